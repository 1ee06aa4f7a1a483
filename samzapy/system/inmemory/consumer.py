"""The in-memory system's consumer: reads partitions of an InMemoryBroker namespace.

Each registered partition has a cursor (the next list index to read). ``poll`` slices the
partition's record list from the cursor, so a poll with data available costs one slice and
one envelope per record; when nothing is available it waits on the broker's wake-up future
until an append, an end of partition, or the timeout.

A memory stream lives as long as its process: a checkpoint of an earlier run may name an
offset past its end. The container drops such an offset at start-up, on any system
(``container/stale_offsets.py``, ``forget_streams_gone_back``), before it registers anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.inmemory.broker import InMemoryBroker, InMemoryPartition
from samzapy.system.offsets import integer_offset
from samzapy.system.ports import OffsetDefault, SystemConsumer


def _wake_at_deadline(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Cursor:
    __slots__ = ("eos_sent", "partition", "position")

    def __init__(self, partition: InMemoryPartition, position: int) -> None:
        self.partition = partition
        self.position = position
        self.eos_sent = False


class InMemorySystemConsumer(SystemConsumer):
    """Reads registered partitions of one broker namespace."""

    def __init__(self, broker: InMemoryBroker) -> None:
        self._broker = broker
        self._requested: dict[SystemStreamPartition, tuple[str | None, str]] = {}
        self._cursors: dict[SystemStreamPartition, _Cursor] = {}
        self._started_at: dict[SystemStreamPartition, int] = {}
        self._started = False
        self._keep_raw = False

    def keep_raw(self) -> None:
        self._keep_raw = True

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        if self._started:
            raise StreamSystemError(
                f"cannot register {ssp}: the memory consumer has already started"
            )
        if offset is not None:
            integer_offset(ssp, offset, "memory offsets are integers")
        elif default not in (OffsetDefault.OLDEST, OffsetDefault.UPCOMING):
            raise StreamSystemError(
                f"cannot register {ssp}: default offset must be 'oldest' or 'upcoming', "
                f"got {default!r}"
            )
        self._requested[ssp] = (offset, default)

    async def start(self) -> None:
        # "upcoming" means the end of the partition when the consumer starts.
        for ssp, (offset, default) in self._requested.items():
            partition = self._broker.partition(ssp.stream, ssp.partition)
            if offset is not None:
                position = integer_offset(ssp, offset, "memory offsets are integers")
            elif default == OffsetDefault.OLDEST:
                position = 0
            else:
                position = len(partition.records)
            self._cursors[ssp] = _Cursor(partition, position)
            self._started_at[ssp] = position
        self._started = True

    async def stop(self) -> None:
        self._cursors.clear()

    def high_watermark(self, ssp: SystemStreamPartition) -> int | None:
        cursor = self._cursors.get(ssp)
        return None if cursor is None else len(cursor.partition.records)

    def start_offset(self, ssp: SystemStreamPartition) -> int | None:
        return self._started_at.get(ssp)

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if max_messages < 1:
            raise StreamSystemError(f"poll needs max_messages >= 1, got {max_messages}")
        result = self._collect(ssps, max_messages)
        if result or timeout <= 0:
            return result
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        broker = self._broker
        while True:
            waiter: asyncio.Future[None] = loop.create_future()
            broker.add_waiter(waiter)
            handle = loop.call_at(deadline, _wake_at_deadline, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                broker.remove_waiter(waiter)
            result = self._collect(ssps, max_messages)
            if result or loop.time() >= deadline:
                return result

    def _collect(
        self, ssps: Sequence[SystemStreamPartition], max_messages: int
    ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        result: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        cursors = self._cursors
        envelope = IncomingMessageEnvelope
        for ssp in ssps:
            try:
                cursor = cursors[ssp]
            except KeyError:
                raise StreamSystemError(
                    f"cannot poll {ssp}: it was not registered with the memory consumer "
                    "before start"
                ) from None
            if cursor.eos_sent:
                continue
            partition = cursor.partition
            records = partition.records
            position = cursor.position
            available = len(records)
            if position < available:
                end = min(available, position + max_messages)
                batch = [
                    envelope(ssp, str(offset), key, message, timestamp)
                    for offset, (key, message, timestamp) in enumerate(
                        records[position:end], position
                    )
                ]
                cursor.position = end
                if self._keep_raw:
                    headers = partition.headers
                    for env, (key, message, _) in zip(batch, records[position:end], strict=True):
                        env.raw = RawRecord(key, message, headers.get(int(env.offset), ()))
                if end == available and partition.ended and len(batch) < max_messages:
                    batch.append(envelope.end_of_stream(ssp))
                    cursor.eos_sent = True
                result[ssp] = batch
            elif partition.ended:
                result[ssp] = [envelope.end_of_stream(ssp)]
                cursor.eos_sent = True
        return result


__all__ = ["InMemorySystemConsumer"]
