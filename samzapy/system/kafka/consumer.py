"""The kafka system's consumer: one group-less AIOKafkaConsumer reading assigned partitions.

Start-up, in order:

1. Look the registered partitions up (they must exist) and read their offset bounds.
2. Decide each partition's starting offset (``start_position``): the registered offset when
   Kafka still holds it, else the registered default resolved to a concrete offset now
   (``oldest``: the first offset held; ``upcoming``: the end). A registered offset Kafka no
   longer holds (retention) or never held (beyond the end) is logged as
   ``checkpoint_offset_unavailable`` with the resolution taken.
3. Connect (with the start-up retry), assign every partition and seek to its offset.

``poll`` pauses the partitions the container did not ask for (their queues are full) and
resumes the ones it asks for, only when that set changes, then takes what aiokafka has
prefetched. aiokafka builds a ConsumerRecord per message; this consumer has its fetcher build
samzapy's envelopes instead, a record batch at a time (``fetched.py``), so a message costs
one object, not two; where the fetcher is not as expected, the envelopes are copied from
aiokafka's records instead.

An offset that runs out of range while running (retention overtook a slow reader) is reset
to the partition's default with the same warning. Kafka partitions never
end: there is no end-of-stream here. aiokafka reconnects by itself after a broker restart;
the consumer only fails once the broker has been silent for longer than
``connect.timeout.ms`` (see ``connection.ContactWatch``). A topic it reads that is deleted
(the brokers answer, the topic is gone) fails it at the next poll once the topic check
(``topic_watch.TopicWatch``, whose checks the idle-time probe shares) finds it missing,
whether or not other partitions deliver: within the probe interval (at most 5 s). So does
one deleted and created again at once, found under another ID than at start-up
(``expect_stream_ids``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import OffsetOutOfRangeError

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.entries import EntryBatch
from samzapy.system.kafka.admin import KafkaSystemAdmin
from samzapy.system.kafka.connection import ContactWatch, connect, started, stop_client
from samzapy.system.kafka.errors import KAFKA_ERRORS, stream_error
from samzapy.system.kafka.fetched import build_envelopes, envelopes
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.kafka.topic_watch import TopicWatch
from samzapy.system.offsets import integer_offset
from samzapy.system.ports import OffsetBounds, OffsetDefault, SystemConsumer

log = structlog.get_logger("samzapy.kafka")

_DEFAULTS = (OffsetDefault.OLDEST, OffsetDefault.UPCOMING)


def start_position(offset: str | None, default: str, bounds: OffsetBounds) -> tuple[int, bool]:
    """Where a partition starts: ``(offset, whether the registered offset was unavailable)``.

    ``offset`` is the registered offset (None: none); ``bounds`` what the partition holds.
    """
    upcoming = int(bounds.upcoming)
    oldest = upcoming if bounds.oldest is None else int(bounds.oldest)
    if offset is not None:
        position = int(offset)
        if oldest <= position <= upcoming:
            return position, False
    return (oldest if default == OffsetDefault.OLDEST else upcoming), offset is not None


class KafkaSystemConsumer(SystemConsumer):
    """Reads the registered partitions of one kafka system."""

    def __init__(self, settings: KafkaSettings, *, read_committed: bool = False) -> None:
        """``read_committed``: read only what committed transactions wrote (else the
        system's ``consumer.isolation.level``, Kafka's default being ``read_uncommitted``)."""
        self._settings = settings
        self._read_committed = read_committed
        self._servers = ",".join(settings.consumer_servers)
        self._requested: dict[SystemStreamPartition, tuple[str | None, str]] = {}
        self._started = False
        self._consumer: Any = None
        self._watch: ContactWatch | None = None
        self._topics: TopicWatch | None = None
        self._ssp_of: dict[Any, SystemStreamPartition] = {}
        self._tp_of: dict[SystemStreamPartition, Any] = {}
        self._starts: dict[SystemStreamPartition, int] = {}
        #: Each partition's next offset as read at start, the high watermark until a fetch
        #: reports one (the lag metric is not 0 before the first fetch).
        self._start_highs: dict[SystemStreamPartition, int] = {}
        self._active: frozenset[SystemStreamPartition] = frozenset()
        self._active_tps: tuple[Any, ...] = ()
        #: When (ms since the epoch) the broker last answered a fetch of records handed out.
        self._answered_ms = 0
        self._keep_raw = False
        #: Whether the fetcher builds entries (``read_entries``), and does so (``start``).
        self._entries = False
        self._builds_entries = False
        #: The topics' IDs at start-up, which the topic watch compares (``expect_stream_ids``).
        self._ids: dict[str, str] = {}

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        if self._started:
            raise StreamSystemError(
                f"cannot register {ssp}: the kafka consumer has already started"
            )
        if offset is not None:
            integer_offset(ssp, offset, "Kafka offsets are integers")
        if default not in _DEFAULTS:
            raise StreamSystemError(
                f"cannot register {ssp}: default offset must be 'oldest' or 'upcoming', "
                f"got {default!r}"
            )
        self._requested[ssp] = (offset, default)

    def keep_raw(self) -> None:
        self._keep_raw = True

    def expect_stream_ids(self, ids: Mapping[str, str]) -> None:
        self._ids = dict(ids)

    def read_entries(self) -> None:
        self._entries = True

    # -- start and stop -----------------------------------------------------------------

    async def start(self) -> None:
        self._started = True
        if not self._requested:
            return
        # 1. What each partition holds now (through the consumer's own brokers).
        bounds = await self._bounds()
        # 2. Where each partition starts.
        positions: dict[SystemStreamPartition, int] = {}
        for ssp, (offset, default) in self._requested.items():
            position, unavailable = start_position(offset, default, bounds[ssp])
            if unavailable:
                self._warn_unavailable(ssp, offset, bounds[ssp], default)
            positions[ssp] = position
        # 3. Connect, assign, seek.
        settings = self._settings
        consumer = await connect(
            self._open,
            servers=self._servers,
            timeout_ms=settings.connect_timeout_ms,
            system=settings.system_name,
            client="consumer",
        )
        self._consumer = consumer
        self._tp_of = {ssp: TopicPartition(ssp.stream, ssp.partition) for ssp in positions}
        self._ssp_of = {tp: ssp for ssp, tp in self._tp_of.items()}
        built = build_envelopes(consumer, self._ssp_of, self._keep_raw, entries=self._entries)
        self._builds_entries = built and self._entries
        try:
            consumer.assign(list(self._tp_of.values()))
            for ssp, position in positions.items():
                consumer.seek(self._tp_of[ssp], position)
        except KAFKA_ERRORS as exc:
            await self.stop()
            raise stream_error(f"cannot assign {sorted(map(str, positions))}", exc) from exc
        self._active = frozenset(positions)
        self._active_tps = tuple(self._tp_of.values())
        self._starts = positions
        self._start_highs = {ssp: int(bounds[ssp].upcoming) for ssp in positions}
        self._watch = ContactWatch(
            self._probe,
            servers=self._servers,
            timeout_ms=settings.connect_timeout_ms,
            system=settings.system_name,
            client="consumer",
        )
        self._topics = TopicWatch(
            consumer._client,
            self._partitions_by_topic(),
            servers=self._servers,
            system=settings.system_name,
            interval_s=self._watch.interval_s,
            ids=self._ids,
        )

    async def _bounds(self) -> dict[SystemStreamPartition, OffsetBounds]:
        settings = self._settings
        admin = KafkaSystemAdmin(dataclasses.replace(settings, servers=settings.consumer_servers))
        try:
            return await admin.offset_bounds(self._requested)
        finally:
            await admin.stop()

    async def _open(self) -> Any:
        kwargs = self._settings.consumer_kwargs()
        if self._read_committed:
            kwargs["isolation_level"] = "read_committed"
        return await started(AIOKafkaConsumer(**kwargs), missing=True)  # its topics exist

    async def _probe(self) -> None:
        """The idle-time check: the brokers answer, and the topics read still exist (a topic
        deleted under the job is not a broker lost: aiokafka would wait for it forever), by
        the topic watch's check (``TopicWatch.confirm``: one per interval for both)."""
        topics = self._topics
        if topics is not None and not await topics.confirm():
            return  # the brokers answered without a topic: the watch fails the next poll
        await self._consumer.end_offsets(list(self._tp_of.values()))

    def _partitions_by_topic(self) -> dict[str, str]:
        """The partitions read of each topic, as text: ``{"t": "0, 1"}``."""
        by_topic: dict[str, list[int]] = {}
        for tp in self._tp_of.values():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {t: ", ".join(map(str, sorted(ps))) for t, ps in by_topic.items()}

    def high_watermark(self, ssp: SystemStreamPartition) -> int | None:
        tp = self._tp_of.get(ssp)
        if tp is None or self._consumer is None:
            return None
        value = self._consumer.highwater(tp)
        return self._start_highs.get(ssp) if value is None else int(value)

    def start_offset(self, ssp: SystemStreamPartition) -> int | None:
        return self._starts.get(ssp)

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        tp = self._tp_of.get(ssp)
        if tp is None or self._consumer is None:
            return None
        # What AIOKafkaConsumer.position() returns, without waiting (None while it resets).
        subscription = self._consumer._subscription.subscription
        assignment = None if subscription is None else subscription.assignment
        state = None if assignment is None else assignment.state_value(tp)
        return int(state.position) if state is not None and state.has_valid_position else None

    async def position(self, ssp: SystemStreamPartition) -> str | None:
        tp = self._tp_of.get(ssp)
        if tp is None or self._consumer is None:
            return None
        try:
            return str(await self._consumer.position(tp))
        except KAFKA_ERRORS as exc:
            raise stream_error(f"cannot read the position of {ssp}", exc) from exc

    async def stop(self) -> None:
        watch, self._watch = self._watch, None
        topics, self._topics = self._topics, None
        consumer, self._consumer = self._consumer, None
        try:
            if watch is not None:
                await watch.close()
        finally:
            try:
                if topics is not None:
                    await topics.close()
            finally:
                if consumer is not None:
                    await stop_client(consumer)

    # -- polling ------------------------------------------------------------------------

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if self._consumer is None or not ssps:
            return await self._poll_nothing(ssps, timeout)
        if self._builds_entries:
            raise StreamSystemError("a kafka consumer that reads entries is polled for entries")
        batches = await self._fetch(ssps, max_messages, timeout)
        ssp_of = self._ssp_of
        keep = self._keep_raw
        return {ssp_of[tp]: envelopes(ssp_of[tp], rs, keep) for tp, rs in batches.items()}

    async def poll_entries(
        self,
        ssp: SystemStreamPartition,
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> EntryBatch | None:
        if self._consumer is None or not self._builds_entries:
            return await super().poll_entries(ssp, max_messages, timeout)
        batches = await self._fetch([ssp], max_messages, timeout)
        records = next(iter(batches.values()), None)
        if records is None or type(records) is EntryBatch:  # built by ``_EntryRecords``
            return records
        # aiokafka's records: its fetcher's results were not as ``fetched.py`` expects.
        return EntryBatch.of_envelopes(envelopes(ssp, records))

    async def _fetch(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> dict[Any, Any]:
        """What the fetcher has for ``ssps``, by topic partition: envelopes, ConsumerRecords
        or ``EntryBatch``es, as it was set to build them."""
        consumer = self._consumer
        if max_messages < 1:
            raise StreamSystemError(f"poll needs max_messages >= 1, got {max_messages}")
        wanted = frozenset(ssps)
        if wanted != self._active:
            self._switch(consumer, wanted)
        try:
            batches: dict[Any, Any] = await consumer.getmany(
                *self._active_tps, timeout_ms=int(timeout * 1000), max_records=max_messages
            )
        except OffsetOutOfRangeError as exc:
            await self._reset(consumer, exc)
            return {}
        except KAFKA_ERRORS as exc:
            raise stream_error(f"cannot read {self._naming(ssps)}", exc) from exc
        watch, topics = self._watch, self._topics
        assert watch is not None and topics is not None
        now = asyncio.get_running_loop().time()
        topics.check(now)
        if not batches:
            watch.check(now)
            return {}
        # Records fetched before an outage are still handed out during it: only a fetch the
        # broker answered since the last one counts as contact (aiokafka notes when, per
        # partition), at the time it was answered.
        answered = (consumer.last_poll_timestamp(tp) for tp in batches)
        answered_ms = max((ms for ms in answered if ms is not None), default=0)
        if answered_ms > self._answered_ms:
            self._answered_ms = answered_ms
            watch.contact(now - max(time.time() - answered_ms / 1000, 0.0))
        return batches

    async def _poll_nothing(
        self,
        ssps: Sequence[SystemStreamPartition],
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if ssps:
            state = "has not started" if not self._started else "has stopped"
            if self._started and ssps[0] not in self._requested:
                state = "did not register it before start"
            raise StreamSystemError(f"cannot poll {ssps[0]}: the kafka consumer {state}")
        if timeout > 0:
            await asyncio.sleep(timeout)
        return {}

    def _switch(self, consumer: Any, wanted: frozenset[SystemStreamPartition]) -> None:
        tp_of = self._tp_of
        for ssp in wanted:
            if ssp not in tp_of:
                raise StreamSystemError(
                    f"cannot poll {ssp}: it was not registered with the kafka consumer "
                    f"of system {self._settings.system_name!r} before start"
                )
        active = self._active
        consumer.pause(*(tp_of[ssp] for ssp in active - wanted))
        consumer.resume(*(tp_of[ssp] for ssp in wanted - active))
        self._active = wanted
        self._active_tps = tuple(tp_of[ssp] for ssp in wanted)

    async def _reset(self, consumer: Any, exc: OffsetOutOfRangeError) -> None:
        """Move partitions whose position Kafka no longer holds to their default."""
        lost = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
        tps = [tp for tp in lost if tp in self._ssp_of]
        if not tps:
            raise stream_error(f"cannot read {self._naming(list(self._active))}", exc) from exc
        try:
            beginning = await consumer.beginning_offsets(tps)
            end = await consumer.end_offsets(tps)
        except KAFKA_ERRORS as error:
            names = sorted(str(self._ssp_of[tp]) for tp in tps)
            raise stream_error(f"cannot read the offsets of {names}", error) from error
        for tp in tps:
            ssp = self._ssp_of[tp]
            default = self._requested[ssp][1]
            oldest, upcoming = beginning[tp], end[tp]
            bounds = OffsetBounds(None if oldest >= upcoming else str(oldest), str(upcoming))
            self._warn_unavailable(ssp, str(lost[tp]), bounds, default)
            consumer.seek(tp, oldest if default == OffsetDefault.OLDEST else upcoming)

    @staticmethod
    def _warn_unavailable(
        ssp: SystemStreamPartition, offset: str | None, bounds: OffsetBounds, default: str
    ) -> None:
        log.warning(
            "checkpoint_offset_unavailable",
            ssp=str(ssp),
            offset=offset,
            oldest=bounds.oldest,
            upcoming=bounds.upcoming,
            resolution=default,
        )

    def _naming(self, ssps: Sequence[SystemStreamPartition]) -> str:
        if len(ssps) == 1:
            return f"{ssps[0]} from Kafka at {self._servers}"
        topics = sorted({ssp.stream for ssp in ssps})
        return f"{len(ssps)} partitions of Kafka topics {topics} from {self._servers}"


__all__ = ["KafkaSystemConsumer", "start_position"]
