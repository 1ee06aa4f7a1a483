"""The job model: which input partitions each task gets (Samza's group-by-partition).

A job has as many tasks as its widest input has partitions; task ``Partition k``
receives partition k of every input that has one. Broadcast partitions go to every task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName


@dataclass(frozen=True, slots=True)
class TaskModel:
    """One task: its name, its partition number and the input partitions it reads."""

    name: TaskName
    partition: int
    ssps: tuple[SystemStreamPartition, ...]


def group_by_partition(
    partition_counts: Mapping[SystemStream, int],
    broadcast: Iterable[tuple[SystemStream, Iterable[int]]] = (),
    broadcast_counts: Mapping[SystemStream, int] | None = None,
) -> list[TaskModel]:
    """Tasks for the inputs' partition counts; broadcast partitions are added to every task.

    A broadcast partition is not also grouped by its number: it reaches every task once.
    ``broadcast_counts``: the partition counts of the broadcast streams that are not inputs
    (checked like the others, not grouped).
    """
    broadcast_ssps = [
        SystemStreamPartition(ss.system, ss.stream, p) for ss, parts in broadcast for p in parts
    ]
    known = {**(broadcast_counts or {}), **partition_counts}
    for ssp in broadcast_ssps:
        count = known.get(ssp.system_stream)
        if count is not None and ssp.partition >= count:
            raise ConfigError(
                f"task.broadcast.inputs names partition {ssp.partition} of {ssp.system_stream}, "
                f"which has {count} partitions (0..{count - 1})",
                key="task.broadcast.inputs",
            )
    broadcast_set = set(broadcast_ssps)
    grouped = {ss: n for ss, n in partition_counts.items()}
    task_count = max(grouped.values(), default=0)
    tasks = []
    for k in range(task_count):
        ssps = [
            SystemStreamPartition(ss.system, ss.stream, k)
            for ss, n in grouped.items()
            if k < n and SystemStreamPartition(ss.system, ss.stream, k) not in broadcast_set
        ]
        ssps.extend(broadcast_ssps)
        tasks.append(TaskModel(TaskName.for_partition(k), k, tuple(ssps)))
    if not tasks and broadcast_ssps:
        tasks.append(TaskModel(TaskName.for_partition(0), 0, tuple(broadcast_ssps)))
    return tasks


__all__ = ["TaskModel", "group_by_partition"]
