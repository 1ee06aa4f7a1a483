"""The in-memory broker: process-wide named namespaces of streams held in lists.

A namespace holds streams with a fixed partition count. Each partition is an append-only list
of ``(key, message, timestamp)`` records; a record's offset is its index in the list, as a
string. A partition can be ended: readers then get end-of-stream after its last record and
appending to it is an error. Tests and the TestRunner write inputs and read outputs here.

The broker is meant for one event loop. Appends wake consumers waiting in ``poll`` through
futures they register with ``add_waiter`` (thread-safely, should an append come from another
thread); nothing loop-bound is created until a consumer waits, so a broker can be filled
before any loop runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, ClassVar

from samzapy.api.errors import StreamSystemError

#: One record of a partition: key, message, timestamp (ms since the epoch or None).
Record = tuple[Any, Any, int | None]


class InMemoryPartition:
    """One partition: its records, whether it has ended, and the headers of the records
    that have any (by offset; a dead letter's)."""

    __slots__ = ("ended", "headers", "records")

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.ended = False
        self.headers: dict[int, tuple[tuple[str, bytes], ...]] = {}


class InMemoryBroker:
    """Streams of one namespace; get the shared instance with ``for_namespace``."""

    _namespaces: ClassVar[dict[str, InMemoryBroker]] = {}

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._streams: dict[str, list[InMemoryPartition]] = {}
        self._waiters: list[asyncio.Future[None]] = []

    @classmethod
    def for_namespace(cls, name: str) -> InMemoryBroker:
        """The broker of namespace ``name``, created on first use; the same object after."""
        broker = cls._namespaces.get(name)
        if broker is None:
            broker = cls._namespaces[name] = cls(name)
        return broker

    @classmethod
    def drop_namespace(cls, name: str) -> None:
        """Forget namespace ``name`` and its streams (a later ``for_namespace`` starts empty)."""
        cls._namespaces.pop(name, None)

    # -- streams ------------------------------------------------------------------------

    def create_stream(self, stream: str, partitions: int) -> None:
        """Create ``stream``; creating it again with the same partition count does nothing."""
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise StreamSystemError(
                f"stream {stream!r} in memory namespace {self.namespace!r} needs a partition "
                f"count >= 1, got {partitions!r}"
            )
        existing = self._streams.get(stream)
        if existing is not None:
            if len(existing) != partitions:
                raise StreamSystemError(
                    f"stream {stream!r} in memory namespace {self.namespace!r} already exists "
                    f"with {len(existing)} partitions, cannot create it with {partitions}"
                )
            return
        self._streams[stream] = [InMemoryPartition() for _ in range(partitions)]

    def add_partitions(self, stream: str, partitions: int) -> None:
        """Grow ``stream`` to ``partitions`` partitions (as Kafka's ``create_partitions``):
        a count it has already, or a smaller one, is refused."""
        self.partition(stream, 0)  # raises when it does not exist
        existing = self._streams[stream]
        if type(partitions) is not int or partitions <= len(existing):
            raise StreamSystemError(
                f"stream {stream!r} in memory namespace {self.namespace!r} has "
                f"{len(existing)} partitions, cannot grow it to {partitions!r}"
            )
        existing.extend(InMemoryPartition() for _ in range(partitions - len(existing)))

    def partition_count(self, stream: str) -> int | None:
        """The partition count of ``stream``, or None when it does not exist."""
        partitions = self._streams.get(stream)
        return None if partitions is None else len(partitions)

    def streams(self) -> list[str]:
        """Names of the streams of this namespace, sorted."""
        return sorted(self._streams)

    def partition(self, stream: str, partition: int) -> InMemoryPartition:
        """The partition object (consumers read its list directly)."""
        partitions = self._streams.get(stream)
        if partitions is None:
            raise StreamSystemError(
                f"stream {stream!r} does not exist in memory namespace {self.namespace!r}; "
                f"existing streams: {self.streams()}"
            )
        if type(partition) is not int or not 0 <= partition < len(partitions):
            raise StreamSystemError(
                f"partition {partition!r} is out of range for stream {stream!r} in memory "
                f"namespace {self.namespace!r}: it has partitions 0..{len(partitions) - 1}"
            )
        return partitions[partition]

    # -- records ------------------------------------------------------------------------

    def append(
        self,
        stream: str,
        partition: int,
        key: Any,
        message: Any,
        timestamp: int | None = None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> str:
        """Append one record (with ``headers``, ``(name, bytes)`` pairs) and return its
        offset; wakes waiting consumers."""
        part = self.partition(stream, partition)
        if part.ended:
            raise StreamSystemError(
                f"partition {partition} of stream {stream!r} in memory namespace "
                f"{self.namespace!r} has ended; cannot append to it"
            )
        records = part.records
        records.append((key, message, timestamp))
        if headers:
            part.headers[len(records) - 1] = tuple(headers)
        if self._waiters:
            self._wake()
        return str(len(records) - 1)

    def end_partition(self, stream: str, partition: int) -> None:
        """Mark a partition bounded: readers get end-of-stream after its last record."""
        self.partition(stream, partition).ended = True
        if self._waiters:
            self._wake()

    def end_stream(self, stream: str) -> None:
        """End every partition of ``stream``."""
        count = self.partition_count(stream)
        if count is None:
            self.partition(stream, 0)  # raises the "does not exist" error
            return
        for partition in range(count):
            self.end_partition(stream, partition)

    def records(self, stream: str, partition: int) -> list[tuple[Any, Any]]:
        """The ``(key, message)`` pairs of a partition, in offset order."""
        return [(key, message) for key, message, _ in self.partition(stream, partition).records]

    def headers(self, stream: str, partition: int, offset: str) -> tuple[tuple[str, bytes], ...]:
        """The headers of the record at ``offset`` (none for most records)."""
        return self.partition(stream, partition).headers.get(int(offset), ())

    # -- waiting ------------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        """Resolve ``waiter`` at the next append or end of partition (for consumers)."""
        self._waiters.append(waiter)

    def remove_waiter(self, waiter: asyncio.Future[None]) -> None:
        """Forget a waiter that timed out or was cancelled."""
        with contextlib.suppress(ValueError):  # already woken and cleared
            self._waiters.remove(waiter)

    def _wake(self) -> None:
        waiters = self._waiters
        self._waiters = []
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None  # appended from a thread (or before any loop runs)
        for waiter in waiters:
            loop = waiter.get_loop()
            if loop.is_closed():
                continue  # its consumer is gone with its loop
            if loop is current:
                _resolve(waiter)
            else:
                loop.call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


__all__ = ["InMemoryBroker", "InMemoryPartition", "Record"]
