"""Messages in and out of a task: IncomingMessageEnvelope, OutgoingMessageEnvelope, KV."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, NamedTuple

from samzapy.api.system import SystemStream, SystemStreamPartition

END_OF_STREAM_OFFSET = "END_OF_STREAM"


class KV(NamedTuple):
    """A key and a value: an input message with a key, or an entry of a store."""

    key: Any
    value: Any


def _accelerate(cls: type) -> bool:
    """Give the pair ``cls`` (a NamedTuple of two fields) its C constructor when
    ``samzapy._speedups`` was built and ``SAMZAPY_NO_SPEEDUPS`` is unset; whether it did.
    ``KV(key, value)`` then costs about a third of the NamedTuple's ``__new__`` and makes the
    same object (samzapy/_speedups.c)."""
    if (
        len(getattr(cls, "_fields", ())) != 2
        or cls.__bases__ != (tuple,)
        or "__new__" not in vars(cls)
        or cls.__init__ is not tuple.__init__  # type: ignore[misc]
    ):
        raise TypeError(f"{cls.__name__} is not a NamedTuple of two fields")
    module = speedups()
    if module is None:
        return False
    module.accelerate_pair(cls)
    return True


def speedups() -> ModuleType | None:
    """``samzapy._speedups``, or None: built without a C compiler, on a Python it does not
    support, or ``SAMZAPY_NO_SPEEDUPS`` set. What decides for every C path alike: KV's
    constructor here, the framed records' paths (``control/wire.py``'s ``accelerated``)."""
    if os.environ.get("SAMZAPY_NO_SPEEDUPS"):
        return None
    try:  # by name: an import statement would be an edge to the package in the import graph
        return importlib.import_module("samzapy._speedups")
    except ImportError:
        return None


#: Whether ``KV`` has the C constructor (``samzapy run`` logs it in ``container_started``).
KV_ACCELERATED = _accelerate(KV)


class RawRecord(NamedTuple):
    """An input record as it was read, before any serde or frame decoding: what a dead letter
    (``task.dead.letter.stream``) carries. ``headers``: the record's ``(name, bytes)`` pairs."""

    key: Any
    value: Any
    headers: tuple[tuple[str, bytes], ...] = ()


class IncomingMessageEnvelope:
    """A message read from one partition, with its offset (a string, as in Samza).

    A bounded partition ends with ``end_of_stream(ssp)``, whose offset is
    ``END_OF_STREAM_OFFSET``; the container acts on it, tasks never receive it.

    ``origin``: the record as read when it carries its origin (a framed stream's type 3, 4
    or 5: the container drops what a restarted writer sent twice), else None.

    ``raw``, the ``RawRecord`` as read, is set only when the job has a dead-letter stream
    (``__init__`` leaves it unset, so that reading costs nothing otherwise): read it with
    ``raw_record(envelope)``.
    """

    __slots__ = (
        "key",
        "message",
        "offset",
        "origin",
        "raw",
        "size",
        "system_stream_partition",
        "timestamp",
    )

    #: Unset unless the job has a dead-letter stream (the class docstring).
    raw: RawRecord

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
        self.origin: bytes | None = None

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


def raw_record(envelope: IncomingMessageEnvelope) -> RawRecord | None:
    """The record ``envelope`` was read from, when it was kept (a dead-letter stream)."""
    raw: RawRecord | None = getattr(envelope, "raw", None)
    return raw


class OutgoingMessageEnvelope:
    """A message a task sends. Partition: explicit, else by partition_key, else by key.
    ``timestamp``: the message's event time in ms since the epoch, carried in the frame of a
    framed stream (an intermediate stream, ``samza.framed``), where the reader gets it back as
    the envelope's ``timestamp``; other streams' records get the time they are sent."""

    __slots__ = ("key", "message", "partition", "partition_key", "system_stream", "timestamp")

    def __init__(
        self,
        system_stream: SystemStream,
        message: Any,
        key: Any = None,
        partition_key: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.system_stream = system_stream
        self.message = message
        self.key = key
        self.partition_key = partition_key
        self.partition = partition
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (
            f"OutgoingMessageEnvelope({self.system_stream}, message={self.message!r}, "
            f"key={self.key!r}, partition={self.partition!r})"
        )


__all__ = [
    "END_OF_STREAM_OFFSET",
    "KV",
    "IncomingMessageEnvelope",
    "OutgoingMessageEnvelope",
    "RawRecord",
    "raw_record",
    "speedups",
]
