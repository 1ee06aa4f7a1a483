"""The kafka producer's batches: one being filled, one handed over, and those inside aiokafka.

``OpenBatch`` is a batch the producer appends messages to; ``Queued`` one handed over and
waiting for its partition's sender (``producer.py``); ``drop_open`` drops those being filled.
``too_large`` refuses a record above ``max.request.size``. ``send_under`` sends the batches
inside aiokafka only under the container's lease. ``drop_held`` fails every batch an aiokafka
producer still holds, so that its stop need not wait for brokers that are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiokafka.errors import KafkaError
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from samzapy.api.errors import StreamSystemError, TaskFencedError
from samzapy.api.system import SystemStream
from samzapy.system.fencing import WriteLease
from samzapy.system.kafka.errors import not_bytes, out_of_range, where

#: (topic, partition); partition None: the topic's keyless batch.
Target = tuple[str, int | None]

#: The headers of every message (none); the record builder only reads them.
NO_HEADERS: list[Any] = []


class OpenBatch:
    """A batch being filled: aiokafka's BatchBuilder, and the append of the record batch
    builder inside it, called directly (``append(offset in the batch, timestamp, key, value,
    headers)``, None once full): the BatchBuilder's own append costs as much again in Python
    per message. ``count`` is its message count, noted in the BatchBuilder when handed over."""

    __slots__ = ("append", "builder", "count", "target", "timer")

    def __init__(self, builder: Any, target: Target) -> None:
        self.builder = builder
        records = getattr(builder, "_builder", None)
        if type(getattr(builder, "_relative_offset", None)) is int and records is not None:
            self.append = records.append
        else:  # not the BatchBuilder expected: its own append
            self.append = self._append_through_builder
        self.count = 0
        self.target = target
        self.timer: asyncio.TimerHandle | None = None

    def _append_through_builder(
        self, offset: int, timestamp: Any, key: Any, value: Any, headers: Any
    ) -> Any:
        if headers:  # a dead letter's
            return self.builder.append(timestamp=timestamp, key=key, value=value, headers=headers)
        return self.builder.append(timestamp=timestamp, key=key, value=value)


def drop_open(batches: dict[Target, OpenBatch]) -> None:
    """Drop the batches being filled (their linger timers cancelled)."""
    for batch in batches.values():
        if batch.timer is not None:
            batch.timer.cancel()
    batches.clear()


class Queued:
    """A batch handed over, and the future its delivery (or failure) resolves."""

    __slots__ = ("builder", "settled")

    def __init__(self, builder: Any, settled: asyncio.Future[None]) -> None:
        self.builder = builder
        self.settled = settled


#: The API key of Kafka's ProduceRequest.
_PRODUCE = 0
#: How long a request not sent waits for its producer to drop it (a container that lost its
#: tasks abandons its producers at once) before it fails its batches itself.
_DROP_WAIT_S = 5.0


def send_under(producer: Any, may_write: WriteLease, dropping: asyncio.Event) -> None:
    """Send the aiokafka ``producer``'s batches only under ``may_write``. A batch handed to
    aiokafka just before the container stood still (a SIGSTOP, a frozen VM) is still inside
    it when the event loop runs again, after the session: sent then, it would land after its
    task's new owner had started (a changelog record putting an older value back). So each
    produce request waits out a hold; once the lease broke, it is not sent: its batches fail
    once the producer drops what it holds (``dropping``, which counts them as dropped)."""
    client = producer.client
    send = client.send

    async def send_under_lease(node_id: Any, request: Any, **kwargs: Any) -> Any:
        if (
            getattr(request, "API_KEY", None) == _PRODUCE
            and not may_write.valid()
            and not await may_write.settle()
        ):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(dropping.wait(), _DROP_WAIT_S)
            raise KafkaError("not sent: the container may have lost its tasks")
        return await send(node_id, request, **kwargs)

    client.send = send_under_lease


async def drop_held(producer: Any, why: str, timeout_s: float) -> None:
    """Fail every batch the aiokafka ``producer`` holds, queued or sent, with ``why``, and any
    it is given from now on, so that its stop waits for none (an idempotent producer retries
    a batch until it is delivered: with the brokers gone its stop never ends).

    Its sender is stopped first, its requests in flight given up to ``timeout_s`` to end: a
    request failing after its batch was failed here would queue that batch again. The
    batches' waiters are read here (nobody waits for them any more), and a batch sent once
    and queued again is put back among those sent, which aiokafka drops it from when it
    fails (a KeyError in a callback otherwise)."""
    sender = getattr(getattr(producer, "_sender", None), "sender_task", None)
    if sender is not None and not sender.done():
        sender.cancel()
        await asyncio.wait([sender], timeout=timeout_s)
    accumulator = getattr(producer, "_message_accumulator", None)
    if accumulator is None:
        return
    queued = [b for batches in getattr(accumulator, "_batches", {}).values() for b in batches]
    sent = getattr(accumulator, "_pending_batches", None)
    if isinstance(sent, set):
        sent.update(b for b in queued if getattr(b, "retry_count", 0))
    accumulator.fail_all(KafkaError(why))
    for batch in queued:
        waiter = getattr(batch, "_drain_waiter", None)
        if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
            waiter.exception()


def fenced(topic: str, partition: int) -> TaskFencedError:
    where_to = where(topic, partition)
    return TaskFencedError(f"not written to {where_to}: the container may have lost its tasks")


class SizeLimit:
    """``max.request.size``: a record above it is not sent, as Kafka's Java producer refuses
    one (estimated alone in its batch). Only a batch's first record can exceed it (a batch
    takes more within ``batch.size`` only), unless ``batch.size`` is larger (``check_each``)."""

    __slots__ = ("check_each", "large", "limit")

    def __init__(self, producer_kwargs: dict[str, Any]) -> None:
        self.limit = int(producer_kwargs.get("max_request_size", 1048576))
        #: Up to this many bytes of key and value, a record is below the limit at a glance.
        self.large = self.limit - 256
        self.check_each = int(producer_kwargs.get("max_batch_size", 16384)) > self.large

    def refusal(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
    ) -> StreamSystemError | None:
        """Why the record is not sent (None: it is sent)."""
        if len(value or b"") + len(key or b"") <= self.large and not headers:
            return None
        size: int = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, headers)
        if size <= self.limit:
            return None
        return StreamSystemError(
            f"cannot write to {where(system_stream.stream, partition)}: a record of {size} "
            "bytes (key, value and headers, serialized) is larger than "
            f"systems.{system_stream.system}.producer.max.request.size ({self.limit}); not sent"
        )


def check_partition(producer: Any, topic: str, partition: Any) -> None:
    """A StreamSystemError unless ``partition`` is None or one of ``topic``'s (as far as the
    client's metadata knows them)."""
    if partition is None:
        return
    known = producer.client.cluster.partitions_for_topic(topic)
    if (
        type(partition) is not int
        or partition < 0
        or (known is not None and partition not in known)
    ):
        raise StreamSystemError(out_of_range(topic, partition, known))


def known_count(producer: Any, topic: str) -> int | None:
    """How many partitions ``topic`` has in the client's metadata (None: unknown, or no client)."""
    known = None if producer is None else producer.client.cluster.partitions_for_topic(topic)
    return len(known) if known else None


def as_bytes(system_stream: SystemStream, what: str, value: Any) -> bytes:
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise not_bytes(system_stream, what, value)


__all__ = [
    "NO_HEADERS",
    "OpenBatch",
    "Queued",
    "Target",
    "as_bytes",
    "drop_held",
    "drop_open",
    "fenced",
    "send_under",
    "SizeLimit",
    "check_partition",
    "known_count",
]
