"""The kafka producer's batches: one being filled, and one handed over.

``OpenBatch`` is a batch the producer appends messages to; ``Queued`` one handed over and
waiting for its partition's sender (``producer.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from samzapy.api.errors import TaskFencedError
from samzapy.api.system import SystemStream
from samzapy.system.kafka.errors import not_bytes, where

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


class Queued:
    """A batch handed over, and the future its delivery (or failure) resolves."""

    __slots__ = ("builder", "settled")

    def __init__(self, builder: Any, settled: asyncio.Future[None]) -> None:
        self.builder = builder
        self.settled = settled


def fenced(topic: str, partition: int) -> TaskFencedError:
    where_to = where(topic, partition)
    return TaskFencedError(f"not written to {where_to}: the container may have lost its tasks")


def as_bytes(system_stream: SystemStream, what: str, value: Any) -> bytes:
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise not_bytes(system_stream, what, value)


__all__ = ["NO_HEADERS", "OpenBatch", "Queued", "Target", "as_bytes", "fenced"]
