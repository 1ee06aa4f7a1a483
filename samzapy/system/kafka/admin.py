"""The kafka system's admin: topic metadata (topic IDs too: ``topic_ids.py``) and configs,
topic creation and partition offset bounds.

It holds an AIOKafkaAdminClient (metadata, configs, creation) and a group-less
AIOKafkaConsumer (offset look-ups), both connected at ``start`` (or on first use) with the
start-up retry of ``connection.connect``; every call through them is retried the same way
(``connection.retrying``), so an outage at any moment of start-up is ridden out up to
``connect.timeout.ms``, but ``stream_configs``: a check the job can do without, made once.
Kafka offsets are integers, so the base class's ``offset_after`` and ``compare_offsets`` apply
as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import NodeNotReadyError

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.kafka.connection import (
    connect,
    retrying,
    started,
    stop_client,
)
from samzapy.system.kafka.errors import (
    KAFKA_ERRORS,
    LEADER_NOT_AVAILABLE,
    NO_ERROR,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    error_name,
    stream_error,
    transient_topic_error,
    where,
)
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.kafka.topic_ids import lookup
from samzapy.system.ports import OffsetBounds, StreamConfigs, SystemAdmin

#: How long a topic just created may take to show in the metadata before that is an error.
_CREATED_VISIBLE_S = 30.0
_METADATA_RETRY_S = 0.05

log = structlog.get_logger("samzapy.kafka")


class KafkaSystemAdmin(SystemAdmin):
    """Metadata, creation and offsets of the topics of one kafka system."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._servers = ",".join(settings.servers)
        self._admin: Any = None
        self._consumer: Any = None
        self._connecting = asyncio.Lock()
        self._no_topic_ids = False

    async def start(self) -> None:
        await self._clients()

    async def stop(self) -> None:
        admin, self._admin = self._admin, None
        consumer, self._consumer = self._consumer, None
        try:
            if consumer is not None:
                await stop_client(consumer)
        finally:
            if admin is not None:
                await admin.close()

    async def _clients(self) -> tuple[Any, Any]:
        async with self._connecting:
            if self._admin is None:
                settings = self._settings
                self._admin = await connect(
                    self._open_admin,
                    servers=self._servers,
                    timeout_ms=settings.connect_timeout_ms,
                    system=settings.system_name,
                    client="admin",
                )
                self._consumer = await connect(
                    self._open_consumer,
                    servers=self._servers,
                    timeout_ms=settings.connect_timeout_ms,
                    system=settings.system_name,
                    client="admin",
                )
        return self._admin, self._consumer

    async def _open_admin(self) -> Any:
        admin = AIOKafkaAdminClient(**self._settings.admin_kwargs())
        return await started(admin, admin.close)

    async def _open_consumer(self) -> Any:
        settings = self._settings
        return await started(AIOKafkaConsumer(**settings.consumer_kwargs(servers=settings.servers)))

    async def _call(self, call: Callable[[], Awaitable[Any]], what: str) -> Any:
        """One admin or metadata call, retried while the brokers are unreachable."""
        settings = self._settings
        return await retrying(
            call,
            what=what,
            fatal=lambda exc: stream_error(f"cannot {what}", exc),
            servers=self._servers,
            timeout_ms=settings.connect_timeout_ms,
            system=settings.system_name,
            client="admin",
        )

    # -- metadata -----------------------------------------------------------------------

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        topics = list(dict.fromkeys(streams))
        if not topics:
            return {}
        admin, _ = await self._clients()
        counts: dict[str, int] = {}
        pending = topics
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CREATED_VISIBLE_S
        while True:
            described = await self._call(
                functools.partial(admin.describe_topics, pending),
                f"describe Kafka topics {pending}",
            )
            unsettled = []
            for entry in described:
                topic, code, partitions = entry["topic"], entry["error_code"], entry["partitions"]
                if code == UNKNOWN_TOPIC_OR_PARTITION:
                    continue
                if code in (NO_ERROR, LEADER_NOT_AVAILABLE) and partitions:
                    counts[topic] = len(partitions)
                elif code == LEADER_NOT_AVAILABLE and loop.time() < deadline:
                    unsettled.append(topic)  # being created: its partitions follow shortly
                else:
                    raise StreamSystemError(
                        f"cannot read the metadata of {where(topic)}: {error_name(code)}"
                    )
            if not unsettled:
                return counts
            pending = unsettled
            await asyncio.sleep(_METADATA_RETRY_S)

    async def topic_ids(self, streams: Iterable[str]) -> dict[str, str] | None:
        """Through Metadata v10 or later (``topic_ids.py``), every topic in one request.
        Brokers that give no topic IDs (before Kafka 2.8) are logged once, at info, as
        ``topic_ids_unavailable``."""
        topics = list(dict.fromkeys(streams))
        if not topics or self._no_topic_ids:
            return None if self._no_topic_ids else {}
        admin, _ = await self._clients()
        found: dict[str, str] | None = await self._call(
            lambda: lookup(admin._send_request, topics), f"look up the IDs of Kafka topics {topics}"
        )
        if found is None:
            self._no_topic_ids = True
            log.info(
                "topic_ids_unavailable",
                system=self._settings.system_name,
                servers=self._servers,
                reason="the brokers give no topic IDs (Metadata v10, Kafka 2.8 and later): a "
                "restart cannot tell an input topic deleted and created again since its "
                "checkpoint from the topic the checkpoint was written for",
            )
        return found

    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise StreamSystemError(
                f"cannot create {where(stream)}: partitions must be an integer >= 1, "
                f"got {partitions!r}"
            )
        replicas = self._settings.replication_factor
        if replication_factor is not None:
            replicas = replication_factor
        if type(replicas) is not int or replicas == 0 or replicas < -1:
            raise StreamSystemError(
                f"cannot create {where(stream)}: the replication factor must be -1 (the "
                f"broker's default) or >= 1, got {replicas!r}"
            )
        admin, _ = await self._clients()
        topic_configs = {str(k): str(v) for k, v in (config or {}).items()}
        new_topic = NewTopic(
            stream, num_partitions=partitions, replication_factor=1, topic_configs=topic_configs
        )
        # NewTopic refuses -1 although CreateTopics (v4+ brokers) takes it for "broker default".
        new_topic.replication_factor = replicas
        what = (
            f"create {where(stream)} with {partitions} partitions and replication "
            f"factor {replicas}" + (f" and config {topic_configs}" if topic_configs else "")
        )

        async def create() -> Any:
            response = await admin.create_topics([new_topic])
            for _topic, code, message, *_ in response.topic_errors:
                if transient_topic_error(code, message):
                    raise NodeNotReadyError(f"{error_name(code)}: {message}")
            return response

        # A retry after a lost answer finds the topic created: TOPIC_ALREADY_EXISTS, fine.
        response = await self._call(create, what)
        for _topic, code, message, *_ in response.topic_errors:
            if code == TOPIC_ALREADY_EXISTS:
                break  # an existing stream is left as it is, whatever its count
            if code != NO_ERROR:
                raise StreamSystemError(f"cannot {what}: {error_name(code)}: {message}")
        await self._await_visible(stream)

    async def _await_visible(self, topic: str) -> None:
        """Return once the topic just created shows in the metadata (it lags creation)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CREATED_VISIBLE_S
        while topic not in await self.partition_counts([topic]):
            if loop.time() >= deadline:
                raise StreamSystemError(
                    f"{where(topic)} was created but did not show in the metadata within "
                    f"{_CREATED_VISIBLE_S:g} s"
                )
            await asyncio.sleep(_METADATA_RETRY_S)

    async def stream_configs(self, streams: Iterable[str], keys: Collection[str]) -> StreamConfigs:
        """Through DescribeConfigs, every topic in one request to one broker, asking for
        ``keys`` only. A topic the broker does not describe (TopicAuthorizationFailedError:
        the ACLs deny DescribeConfigs; UnknownTopicOrPartitionError) is ``unread``."""
        topics = list(dict.fromkeys(streams))
        if not topics:
            return StreamConfigs({}, {})
        admin, _ = await self._clients()
        wanted = dict.fromkeys(keys) or None  # an empty dict asks for no setting at all
        resources = [ConfigResource(ConfigResourceType.TOPIC, t, wanted) for t in topics]
        try:
            responses = await admin.describe_configs(resources)
        except KAFKA_ERRORS as exc:
            what = f"cannot describe the configs of Kafka topics {topics}"
            raise stream_error(what, exc) from exc
        found: dict[str, dict[str, str]] = {}
        unread: dict[str, str] = {}
        for response in responses:
            for code, message, _type, topic, entries in response.resources:
                if code != NO_ERROR:
                    unread[topic] = error_name(code) + (f": {message}" if message else "")
                    continue
                # (name, value, read only, ...): the rest differs between versions
                found[topic] = {e[0]: e[1] for e in entries if e[1] is not None}
        return StreamConfigs(found, unread)

    # -- offsets ------------------------------------------------------------------------

    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        wanted = list(dict.fromkeys(ssps))
        if not wanted:
            return {}
        _, consumer = await self._clients()
        await self.check_partitions(wanted)
        tps = list({ssp: TopicPartition(ssp.stream, ssp.partition) for ssp in wanted}.items())
        what = f"read the offsets of Kafka topics {sorted({ssp.stream for ssp in wanted})}"
        partitions = [tp for _, tp in tps]
        await _tracked(consumer, {ssp.stream for ssp in wanted})
        beginning = await self._call(lambda: consumer.beginning_offsets(partitions), what)
        end = await self._call(lambda: consumer.end_offsets(partitions), what)
        bounds: dict[SystemStreamPartition, OffsetBounds] = {}
        for ssp, tp in tps:
            oldest, upcoming = beginning[tp], end[tp]
            bounds[ssp] = OffsetBounds(None if oldest >= upcoming else str(oldest), str(upcoming))
        return bounds

    async def offsets_for_time(
        self, ssps: Iterable[SystemStreamPartition], timestamp_ms: int
    ) -> dict[SystemStreamPartition, str | None]:
        """Kafka's ListOffsets by time. Used by ``samzapy checkpoint set --to TIME``."""
        wanted = list(dict.fromkeys(ssps))
        if not wanted:
            return {}
        _, consumer = await self._clients()
        await self.check_partitions(wanted)
        tps = {ssp: TopicPartition(ssp.stream, ssp.partition) for ssp in wanted}
        what = f"look up offsets by time in Kafka topics {sorted({s.stream for s in wanted})}"
        await _tracked(consumer, {ssp.stream for ssp in wanted})
        found = await self._call(
            lambda: consumer.offsets_for_times({tp: timestamp_ms for tp in tps.values()}), what
        )
        return {
            ssp: None if found.get(tp) is None else str(found[tp].offset) for ssp, tp in tps.items()
        }

    async def group_members(self, group_id: str) -> list[tuple[str, str, str]]:
        """Through DescribeGroups. Used by ``samzapy checkpoint set``, which refuses to move
        a job's offsets while containers run it."""
        admin, _ = await self._clients()
        responses = await self._call(
            functools.partial(admin.describe_consumer_groups, [group_id]),
            f"describe consumer group {group_id!r}",
        )
        members: list[tuple[str, str, str]] = []
        for response in responses:
            for code, _group, _state, _type, _protocol, group_members, *_ in response.groups:
                if code != NO_ERROR:
                    raise StreamSystemError(
                        f"cannot describe consumer group {group_id!r}: {error_name(code)}"
                    )
                members.extend((m[0], m[1], m[2]) for m in group_members)
        return members

    async def check_partitions(self, ssps: Iterable[SystemStreamPartition]) -> None:
        """Raise unless every partition exists (offset look-ups would wait for it instead)."""
        wanted = list(ssps)
        counts = await self.partition_counts(ssp.stream for ssp in wanted)
        for ssp in wanted:
            count = counts.get(ssp.stream)
            if count is None:
                raise StreamSystemError(
                    f"cannot read {ssp}: {where(ssp.stream)} does not exist at {self._servers}"
                )
            if not 0 <= ssp.partition < count:
                raise StreamSystemError(
                    f"cannot read {ssp}: partition {ssp.partition} is out of range for "
                    f"{where(ssp.stream)}, which has partitions 0..{count - 1}"
                )


async def _tracked(consumer: Any, topics: Iterable[str]) -> None:
    """Have ``consumer``'s metadata cover ``topics`` before it looks up their offsets: aiokafka
    looks up a partition it has no metadata for only after a retry backoff (100 ms, on every
    first look-up of a topic by a new client: at each start, for each consumer and admin).
    An update that does not come within a request's timeout leaves the look-up to its own
    retries."""
    client = consumer._client
    updates = [client.add_topic(topic) for topic in topics if topic not in client._topics]
    if updates:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*updates), client._request_timeout_ms / 1000)


__all__ = ["KafkaSystemAdmin"]
