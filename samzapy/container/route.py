"""One output stream's route (``collector.py``): its producer, serdes and partition count, the
partition of each key seen lately, and the messages waiting while the count is looked up.

A plain output stream takes up the partitions added to it (``take_up_added_partitions``)
once its producer has learned of them, as Kafka's Java producer does at its metadata refresh:
its keys hash over the new count from then on, so a key's later messages may go to another
partition than its earlier ones. A framed stream (an intermediate stream, ``samza.framed``)
keeps the count it was looked up with for its keyed records, those with an origin and its
control records: a replay must send each record where it went the first time, control records
go to every partition it had, and the tasks that read it were planned on that count (a reader
that finds it changed stops, ``partition_monitor.py``). Its keyless records without an origin
go to the producer's rotation, which follows the topic's count as for any keyless record.
"""

from __future__ import annotations

from samzapy.api.envelope import IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.system import SystemStream, TaskName
from samzapy.control.origins import WriterOrigins
from samzapy.system.partitioner import partition_for
from samzapy.system.ports import SystemProducer
from samzapy.system.serde import Serde


class ControlRecord:
    """A control record waiting in a route's backlog, for every partition."""

    __slots__ = ("record",)

    def __init__(self, record: bytes) -> None:
        self.record = record


class Waiting:
    """A message waiting in a route's backlog, with the task that sent it and its origin."""

    __slots__ = ("envelope", "floor", "ordinal", "origin", "task", "writer")

    def __init__(
        self,
        envelope: OutgoingMessageEnvelope,
        task: TaskName | None,
        writer: WriterOrigins | None,
        origin: IncomingMessageEnvelope | None,
        ordinal: int,
        floor: str | None,
    ) -> None:
        self.envelope = envelope
        self.task = task
        self.writer = writer
        self.origin = origin
        self.ordinal = ordinal
        self.floor = floor


#: Keys whose partition a route remembers (murmur2 costs about 0.5 us a key compiled, 3.4 us
#: in Python, a dict look-up 0.06 us); past this many, it starts over.
PARTITION_CACHE_SIZE = 65536


class Route:
    __slots__ = (
        "backlog",
        "ended",
        "framed",
        "key_serde",
        "msg_serde",
        "origins",
        "partition_cache",
        "partitions",
        "producer",
        "stream",
    )

    def __init__(
        self,
        stream: SystemStream,
        producer: SystemProducer | None,
        key_serde: Serde | None,
        msg_serde: Serde | None,
        framed: bool,
        origins: bool = True,
    ) -> None:
        self.stream = stream
        #: None until the route is ready, for a system connected by its first send.
        self.producer: SystemProducer = producer  # type: ignore[assignment]
        self.key_serde = key_serde
        self.msg_serde = msg_serde
        self.framed = framed
        #: Whether its framed records carry their origin.
        self.origins = framed and origins
        self.partitions = 0
        #: The partition of each key bytes seen lately (for ``partitions``).
        self.partition_cache: dict[bytes, int] = {}
        #: Messages waiting for the partition count; None once the route is ready.
        self.backlog: list[Waiting | ControlRecord] | None = []
        #: The tasks that sent it their end-of-stream (None: none did).
        self.ended: set[TaskName] | None = None

    def partition_of(self, key: bytes) -> int:
        """Kafka's partition of ``key``, remembered."""
        partition = partition_for(key, self.partitions)
        cache = self.partition_cache
        if len(cache) >= PARTITION_CACHE_SIZE:
            cache.clear()
        cache[key] = partition
        return partition

    def take_up_added_partitions(self) -> tuple[int, int] | None:
        """Take up a larger partition count the producer knows for a plain output stream that
        is ready: (count before, count now) when it did; None when nothing changed."""
        if self.framed or self.backlog is not None:
            return None
        count = self.producer.partition_count(self.stream.stream)
        if count is None or count <= self.partitions:
            return None
        before, self.partitions = self.partitions, count
        self.partition_cache.clear()
        return before, count


__all__ = ["PARTITION_CACHE_SIZE", "ControlRecord", "Route", "Waiting"]
