"""Messages in and out of a task: IncomingMessageEnvelope, OutgoingMessageEnvelope, KV."""

from __future__ import annotations

from typing import Any, NamedTuple

from samzapy.api.system import SystemStream, SystemStreamPartition

END_OF_STREAM_OFFSET = "END_OF_STREAM"


class KV(NamedTuple):
    """A key and a value: an input message with a key, or an entry of a store."""

    key: Any
    value: Any


class IncomingMessageEnvelope:
    """A message read from one partition, with its offset (a string, as in Samza).

    A bounded partition ends with ``end_of_stream(ssp)``, whose offset is
    ``END_OF_STREAM_OFFSET``; the container acts on it, tasks never receive it.
    """

    __slots__ = (
        "key",
        "message",
        "offset",
        "size",
        "system_stream_partition",
        "timestamp",
    )

    def __init__(
        self,
        system_stream_partition: SystemStreamPartition,
        offset: str,
        key: Any,
        message: Any,
        timestamp: int | None = None,
        size: int = 0,
    ) -> None:
        self.system_stream_partition = system_stream_partition
        self.offset = offset
        self.key = key
        self.message = message
        self.timestamp = timestamp
        self.size = size

    @classmethod
    def end_of_stream(cls, ssp: SystemStreamPartition) -> IncomingMessageEnvelope:
        """The envelope a bounded partition ends with."""
        return cls(ssp, END_OF_STREAM_OFFSET, None, None)

    @property
    def is_end_of_stream(self) -> bool:
        return self.offset == END_OF_STREAM_OFFSET

    def __repr__(self) -> str:
        return (
            f"IncomingMessageEnvelope({self.system_stream_partition}, offset={self.offset!r}, "
            f"key={self.key!r}, message={self.message!r})"
        )


class OutgoingMessageEnvelope:
    """A message a task sends. Partition: explicit, else by partition_key, else by key."""

    __slots__ = ("key", "message", "partition", "partition_key", "system_stream")

    def __init__(
        self,
        system_stream: SystemStream,
        message: Any,
        key: Any = None,
        partition_key: Any = None,
        partition: int | None = None,
    ) -> None:
        self.system_stream = system_stream
        self.message = message
        self.key = key
        self.partition_key = partition_key
        self.partition = partition

    def __repr__(self) -> str:
        return (
            f"OutgoingMessageEnvelope({self.system_stream}, message={self.message!r}, "
            f"key={self.key!r}, partition={self.partition!r})"
        )


__all__ = ["END_OF_STREAM_OFFSET", "KV", "IncomingMessageEnvelope", "OutgoingMessageEnvelope"]
