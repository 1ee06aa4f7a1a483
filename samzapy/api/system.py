"""Names of streams, partitions and tasks: SystemStream, SystemStreamPartition, TaskName."""

from __future__ import annotations

from typing import NamedTuple


class SystemStream(NamedTuple):
    """A stream on a system, e.g. ``SystemStream("kafka", "page-views")``."""

    system: str
    stream: str

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}"


class SystemStreamPartition(NamedTuple):
    """One partition of a stream: the unit a consumer reads and a checkpoint records."""

    system: str
    stream: str
    partition: int

    @property
    def system_stream(self) -> SystemStream:
        return SystemStream(self.system, self.stream)

    def __str__(self) -> str:
        return f"{self.system}.{self.stream}#{self.partition}"


class TaskName(str):
    """A task's name; the group-by-partition grouper names task k ``Partition k``."""

    __slots__ = ()

    @classmethod
    def for_partition(cls, partition: int) -> TaskName:
        return cls(f"Partition {partition}")


__all__ = ["SystemStream", "SystemStreamPartition", "TaskName"]
