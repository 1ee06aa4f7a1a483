"""The kafka system's producer: messages appended to open record batches, batches sent whole.

``send`` does no I/O and creates no task: it appends the message to the open batch of its
(topic, partition), an aiokafka BatchBuilder. A batch is handed over when it is full, when
its linger time (``producer.linger.ms``, 5 ms by default) has passed since it was opened, or
at ``flush``. Batches of one partition go to aiokafka in order through one sender task per
partition that has batches waiting, which submits them one after the other with
``send_batch`` (aiokafka holds one batch per partition at a time; two tasks submitting
batches of the same partition could overtake each other).

A message without a partition (no key) goes to its topic's one open keyless batch; when that
batch is handed over, it is given a partition and the next keyless batch moves to the next
partition (a sticky partitioner: whole batches, partitions taken in turn).

``flush`` hands over every open batch, waits until every batch handed over so far is
delivered or failed, then raises the first failure (once) as a StreamSystemError naming the
topic and partition; batches sent while it waits are left to the next flush, so a flush under
steady load ends. A record above ``max.request.size`` is not sent: it fails the next flush
alone, as in Kafka's Java producer (the broker would refuse its whole batch). ``failed_sends``
counts the messages whose delivery failed.

``backpressure`` bounds memory and the time a flush (so a commit) waits: with
``MAX_UNSETTLED_BATCHES`` batches handed over and not yet delivered (or two per partition written to
so far, if that is more), it returns a future that resolves once half of them are delivered, and the
container holds its tasks back until then (aiokafka takes one batch per partition at a time: with
1,024 batches a pass-through's commits waited up to 200 ms, with 64 about 30 ms).

``fence_with``: while the container's lease is held, queued batches wait and ``backpressure``
holds the tasks back; once it broke, a queued batch is dropped instead of given to aiokafka,
and the next ``flush`` raises TaskFencedError. The batches inside aiokafka are sent under it
too (``send_under``).

``stop`` flushes first; ``abandon`` (a container that failed or lost its tasks: no checkpoint
covers what it sent) drops every batch not yet delivered, open, queued or inside aiokafka,
and stops the client within ``STOP_TIMEOUT_S`` even with the brokers gone.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Any, ClassVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError

from samzapy.api.errors import SendFailedError, StreamSystemError, TaskFencedError
from samzapy.api.system import SystemStream
from samzapy.system.fencing import WriteLease
from samzapy.system.kafka.batches import (
    NO_HEADERS,
    OpenBatch,
    Queued,
    SizeLimit,
    Target,
    check_partition,
    drop_held,
    drop_open,
    known_count,
    send_under,
)
from samzapy.system.kafka.batches import as_bytes as _as_bytes
from samzapy.system.kafka.batches import fenced as _fenced
from samzapy.system.kafka.connection import STOP_TIMEOUT_S, connect, retrying, started, stop_client
from samzapy.system.kafka.errors import KAFKA_ERRORS, out_of_range, send_failure, where
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.ports import SystemProducer

#: Batches handed over but not yet delivered beyond which ``backpressure`` holds the job back
#: (with aiokafka's default 16 KiB batches, about 1 MiB), unless more partitions are written.
MAX_UNSETTLED_BATCHES = 64

#: What a send may fail with: Kafka's errors, and a metadata look-up that gave up.
_SEND_ERRORS: tuple[type[BaseException], ...] = (*KAFKA_ERRORS, StreamSystemError)


class KafkaSystemProducer(SystemProducer):
    """Writes to the topics of one kafka system in whole batches."""

    _defaults: ClassVar[dict[str, Any]] = {}  # this kind's, under the job's ``producer.*`` options

    def __init__(
        self, settings: KafkaSettings, *, max_unsettled_batches: int = MAX_UNSETTLED_BATCHES
    ) -> None:
        self._settings = settings
        self._max_unsettled = max(1, max_unsettled_batches)
        self._capacity: asyncio.Future[None] | None = None
        #: How few unsettled batches resolve ``_capacity``.
        self._release_at = self._max_unsettled // 2
        self._servers = ",".join(settings.producer_servers)
        kwargs = settings.producer_kwargs(self._defaults)
        self._linger_s = float(kwargs["linger_ms"]) / 1000
        self._size = SizeLimit(kwargs)
        #: Topics held open longer or shorter than ``producer.linger.ms`` (``linger``).
        self._lingers: dict[str, float] = {}
        self._producer: Any = None
        self._open: dict[Target, OpenBatch] = {}
        #: Full batches waiting for their partition's sender task, in order.
        self._queues: dict[Target, deque[Queued]] = {}
        self._senders: dict[Target, asyncio.Task[None]] = {}
        #: The partitions written to since the start.
        self._written: set[Target] = set()
        self._next_keyless: dict[str, int] = {}
        #: The topics added to the aiokafka client's metadata topics.
        self._tracked: set[str] = set()
        self._may_write: WriteLease | None = None
        #: One future per batch handed over, resolved once it is delivered or failed.
        self._unsettled: set[asyncio.Future[None]] = set()
        #: (topic, partition, error, messages lost) of each batch failed since the last flush.
        self._failures: list[tuple[str, int | None, BaseException, int]] = []
        #: Messages whose delivery failed, since the producer started.
        self.failed_sends = 0
        #: Messages handed over and not yet delivered or failed.
        self._held = 0
        #: Set by ``abandon``: batches settled from now on were dropped, not failed.
        self._dropping = asyncio.Event()

    async def start(self) -> None:
        if self._producer is None:
            settings = self._settings
            self._producer = await connect(
                self._open_producer,
                servers=self._servers,
                timeout_ms=settings.connect_timeout_ms,
                system=settings.system_name,
                client="producer",
            )
            if self._may_write is not None:  # its requests too, not only its batches
                send_under(self._producer, self._may_write, self._dropping)

    async def _open_producer(self) -> Any:
        return await started(AIOKafkaProducer(**self._settings.producer_kwargs(self._defaults)))

    async def _partitions_for(self, topic: str) -> Any:
        """The partitions of ``topic``: the client's, else a metadata request's, retried for
        ``connect.timeout.ms``; one answered without the topic fails as aiokafka does."""
        producer = self._producer
        if topic not in self._tracked:
            # aiokafka refreshes the metadata of the topics added to its client only (all of
            # them before the first is added): a topic it knew from that first refresh, and
            # never added, drops out at the next one, and its batches wait for a leader forever.
            self._tracked.add(topic)
            producer.client.add_topic(topic)
        if (known := producer.client.cluster.partitions_for_topic(topic)) is not None:
            return known  # no call: no sign of the brokers, an outage of theirs goes on

        async def look_up() -> Any:
            if not await producer.client.force_metadata_update():
                raise KafkaConnectionError(
                    f"no broker of {self._servers} answered a metadata request"
                )
            return await producer.partitions_for(topic)

        settings = self._settings
        return await retrying(
            look_up,
            what=f"look up the partitions of {where(topic)}",
            fatal=None,
            servers=self._servers,
            timeout_ms=settings.connect_timeout_ms,
            system=settings.system_name,
            client="producer",
        )

    # -- sending ------------------------------------------------------------------------

    def send(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
        headers: Any = NO_HEADERS,
    ) -> None:
        if type(message) is not bytes and message is not None:
            message = _as_bytes(system_stream, "message", message)
        if type(key) is not bytes and key is not None:
            key = _as_bytes(system_stream, "key", key)
        if self._size.check_each and self._refused(system_stream, partition, key, message, headers):
            return
        target = (system_stream.stream, partition)
        batch = self._open.get(target)
        if batch is None:
            if self._refused(system_stream, partition, key, message, headers):
                return
            batch = self._new_batch(target)
        if batch.append(batch.count, None, key, message, headers) is None:
            self._hand_over(batch)
            if self._refused(system_stream, partition, key, message, headers):
                return
            batch = self._new_batch(target)
            if batch.append(0, None, key, message, headers) is None:
                raise StreamSystemError(
                    f"cannot send to {system_stream}: a message of {len(message or b'')} "
                    "bytes does not fit in an empty batch"
                )
        batch.count += 1

    def _refused(self, ss: SystemStream, partition: Any, key: Any, value: Any, hs: Any) -> bool:
        """A record above ``max.request.size`` (``SizeLimit``) is not sent: the next flush
        reports it, as a batch the broker refused."""
        refusal = self._size.refusal(ss, partition, key, value, hs)
        if refusal is not None:
            self.failed_sends += 1
            self._failures.append((ss.stream, partition, refusal, 1))
        return refusal is not None

    def send_with_headers(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
        headers: Any,
    ) -> None:
        self.send(system_stream, partition, key, message, [(n, bytes(v)) for n, v in headers])

    def _new_batch(self, target: Target) -> OpenBatch:
        producer = self._producer
        if producer is None:
            raise StreamSystemError(
                f"cannot send to {where(target[0])}: the kafka producer of system "
                f"{self._settings.system_name!r} has not started (or has stopped)"
            )
        topic, partition = target
        check_partition(producer, topic, partition)
        batch = OpenBatch(producer.create_batch(), target)
        self._open[target] = batch
        linger = self._lingers.get(topic, self._linger_s) if self._lingers else self._linger_s
        batch.timer = asyncio.get_running_loop().call_later(linger, self._lingered, batch)
        return batch

    def linger(self, stream: str, linger_ms: int) -> None:
        self._lingers[stream] = linger_ms / 1000

    def _lingered(self, batch: OpenBatch) -> None:
        if self._open.get(batch.target) is batch:
            self._hand_over(batch)

    def fence_with(self, may_write: WriteLease) -> None:
        self._may_write = may_write

    def _hand_over(self, batch: OpenBatch) -> None:
        """Close an open batch and queue it for its partition's sender."""
        del self._open[batch.target]
        if batch.timer is not None:
            batch.timer.cancel()
        builder = batch.builder
        builder._relative_offset = batch.count  # its record_count()
        builder.close()  # a closed batch is sent at once, without lingering again
        self._held += batch.count
        settled = asyncio.get_running_loop().create_future()
        self._unsettled.add(settled)
        settled.add_done_callback(self._forget)
        topic, partition = batch.target
        if partition is None:
            partition = self._keyless_partition(topic)
        self._enqueue((topic, partition), Queued(builder, settled))

    def _forget(self, settled: asyncio.Future[None]) -> None:
        self._unsettled.discard(settled)
        capacity = self._capacity
        if capacity is not None and len(self._unsettled) <= self._release_at:
            self._capacity = None
            if not capacity.done():
                capacity.set_result(None)

    def backpressure(self) -> asyncio.Future[None] | None:
        unsettled = len(self._unsettled)
        if unsettled < self._max_unsettled:
            return None
        limit = max(self._max_unsettled, 2 * len(self._written))
        if unsettled < limit:
            return None
        if self._capacity is None:
            self._release_at = limit // 2
            self._capacity = asyncio.get_running_loop().create_future()
            # Open batches count towards the limit only once handed over: hand them over now
            # so their delivery can free room.
            for batch in list(self._open.values()):
                self._hand_over(batch)
        return self._capacity

    def partition_count(self, stream: str) -> int | None:
        return known_count(self._producer, stream)  # the client's metadata: no request

    def _keyless_partition(self, topic: str) -> int | None:
        """The next partition of the sticky rotation; None while the count is unknown."""
        if (count := known_count(self._producer, topic)) is None:
            return None
        turn = self._next_keyless.get(topic)
        if turn is None:
            turn = random.randrange(count)  # producers of a topic start on different partitions
        self._next_keyless[topic] = turn + 1
        return turn % count

    def _enqueue(self, target: Target, item: Queued) -> None:
        queue = self._queues.get(target)
        if queue is None:
            queue = self._queues[target] = deque()
            self._written.add(target)
        queue.append(item)
        if target not in self._senders:
            sender = asyncio.get_running_loop().create_task(self._send_queued(target, queue))
            self._senders[target] = sender

    async def _send_queued(self, target: Target, queue: deque[Queued]) -> None:
        """Submit the queued batches of one partition in order (one sender per partition)."""
        topic, partition = target
        try:
            if partition is None:
                await self._place_keyless(topic, queue)
                return
            producer = self._producer
            may_write = self._may_write
            while queue:
                item = queue[0]
                if may_write is not None and not may_write.valid() and not await may_write.settle():
                    # The container may have lost its tasks (``fence_with``): dropped, and
                    # the flush fails (a transaction must not commit without the batch).
                    self._settle(queue.popleft(), topic, partition, _fenced(topic, partition))
                    continue
                error: BaseException | None = None
                try:
                    # Looked up (and retried) only while the topic's metadata is unknown.
                    known = producer.client.cluster.partitions_for_topic(topic)
                    if not known or topic not in self._tracked:
                        known = await self._partitions_for(topic)
                        if may_write is not None and not may_write.valid():
                            continue  # held or broken meanwhile: checked again first
                    if partition in known:
                        delivery = await producer.send_batch(
                            item.builder, topic, partition=partition
                        )
                    else:
                        error = StreamSystemError(out_of_range(topic, partition, known))
                except _SEND_ERRORS as exc:
                    error = exc
                queue.popleft()
                if error is not None:
                    self._settle(item, topic, partition, error)
                else:
                    delivery.add_done_callback(
                        lambda done, item=item: self._delivered(done, item, topic, partition)
                    )
        except BaseException as exc:  # a bug or a cancellation: flush must not wait forever
            while queue:
                self._settle(queue.popleft(), topic, partition, exc)
            raise
        finally:
            del self._senders[target]
            if not queue:
                self._queues.pop(target, None)

    async def _place_keyless(self, topic: str, queue: deque[Queued]) -> None:
        """First keyless batches of a topic whose partitions were not known yet."""
        try:
            await self._partitions_for(topic)
        except _SEND_ERRORS as exc:
            while queue:
                self._settle(queue.popleft(), topic, None, exc)
            return
        while queue:
            self._enqueue((topic, self._keyless_partition(topic)), queue.popleft())

    def _delivered(
        self, delivery: asyncio.Future[Any], item: Queued, topic: str, partition: int
    ) -> None:
        if delivery.cancelled():
            self._settle(item, topic, partition, asyncio.CancelledError())
        else:
            self._settle(item, topic, partition, delivery.exception())

    def _settle(
        self, item: Queued, topic: str, partition: int | None, error: BaseException | None
    ) -> None:
        """A batch is delivered (``error`` None) or failed for good (or dropped)."""
        count = item.builder.record_count()
        self._held -= count
        if error is not None and not self._dropping.is_set():
            self.failed_sends += count
            self._failures.append((topic, partition, error, count))
        if not item.settled.done():
            item.settled.set_result(None)

    # -- flushing -----------------------------------------------------------------------

    async def flush(self) -> None:
        # 1. Hand every open batch over.
        for batch in list(self._open.values()):
            self._hand_over(batch)
        # 2. Wait until every batch handed over so far is delivered or failed (batches sent
        #    meanwhile are the next flush's business).
        unsettled = list(self._unsettled)
        if unsettled:
            await asyncio.wait(unsettled)
        if self._dropping.is_set():  # what it waited for may have been dropped: nothing is durable
            raise StreamSystemError(
                f"the kafka producer of system {self._settings.system_name!r} was abandoned "
                "(its container failed or gave its tasks up): what it held is not written"
            )
        # 3. Report the first failure, once.
        if self._failures:
            topic, partition, exc, _ = self._failures[0]
            count, lost = len(self._failures), sum(f[3] for f in self._failures)
            self._failures.clear()
            if isinstance(exc, TaskFencedError):
                raise exc
            failed = (topic, partition, self._servers, self.failed_sends)
            reason = await send_failure(self._producer, exc, count, *failed)
            raise SendFailedError(reason, messages=lost) from exc

    async def stop(self) -> None:
        if self._producer is None:
            return
        try:
            await self.flush()
        finally:
            await self._close()

    async def abandon(self) -> int:
        """Stop at once, delivering nothing more: every batch not yet delivered is dropped
        (the open ones, those queued, those inside aiokafka) and the client stopped within
        ``STOP_TIMEOUT_S``, whether or not the brokers answer. The messages dropped."""
        if self._producer is None:
            return 0
        self._dropping.set()
        dropped = self._held + sum(batch.count for batch in self._open.values())
        drop_open(self._open)
        while self._senders:  # each settles its queue as it ends
            senders = list(self._senders.values())
            for sender in senders:
                sender.cancel()
            await asyncio.gather(*senders, return_exceptions=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STOP_TIMEOUT_S
        await drop_held(self._producer, "dropped: the producer was abandoned", STOP_TIMEOUT_S)
        await self._close(max(deadline - loop.time(), 0.1))
        return dropped

    async def _close(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop the client (within ``timeout_s``); open batches are dropped."""
        producer, self._producer = self._producer, None
        drop_open(self._open)
        if producer is not None:
            await stop_client(producer, timeout_s)


__all__ = ["KafkaSystemProducer"]
