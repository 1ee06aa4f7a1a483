"""Which checkpoint manager a job uses, and what a checkpoint must agree with at start-up.

A checkpoint records, besides the offsets, the partition count of every input stream. A
stream's partition count must never change (seed 003: state is isolated per partition, and a
task's partition k must keep meaning the same keys); a restart that finds a different count
stops with an error that says so, instead of silently mixing keys across tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.api.system import SystemStream, TaskName
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.checkpoint.registry import checkpoint_manager_for
from samzapy.config import ResolvedConfig
from samzapy.system.ports import SystemFactory

#: Where a checkpoint's ``extra`` keeps the input partition counts.
PARTITION_COUNTS = "partition_counts"


def checkpoint_manager(
    config: ResolvedConfig, factories: Mapping[str, SystemFactory], namespace: str
) -> CheckpointManager | None:
    """The manager ``task.checkpoint.factory`` names, or None when checkpoints are off."""
    task = config.task
    if task.checkpoint_factory is None:
        return None
    system_factory = None
    if task.checkpoint_factory in ("kafka", "stream"):
        system = task.checkpoint_system
        if system is None:
            kafka = [n for n, s in config.systems.items() if s.factory == "kafka"]
            system = kafka[0] if len(kafka) == 1 else None
        if system is None or system not in factories:
            raise ConfigError(
                f"task.checkpoint.factory is {task.checkpoint_factory!r}: set "
                "task.checkpoint.system to the system that holds the checkpoint stream"
                + (f" (no system named {system!r})" if system else ""),
                key="task.checkpoint.system",
            )
        system_factory = factories[system]
    return checkpoint_manager_for(
        task.checkpoint_factory,
        job_name=config.job.name,
        job_id=config.job.id,
        checkpoint_dir=task.checkpoint_dir,
        namespace=namespace,
        system_factory=system_factory,
        replication_factor=task.checkpoint_replication_factor,
    )


def partition_counts_extra(counts: Mapping[SystemStream, int]) -> dict[str, Any]:
    """The ``extra`` entry every checkpoint of the job carries."""
    return {PARTITION_COUNTS: {str(ss): n for ss, n in sorted(counts.items())}}


def check_partition_counts(
    checkpoints: Mapping[TaskName, Checkpoint], counts: Mapping[SystemStream, int]
) -> None:
    """Raise if an input's partition count differs from the one the checkpoints recorded."""
    now = {str(ss): n for ss, n in counts.items()}
    for task_name, checkpoint in sorted(checkpoints.items()):
        recorded = checkpoint.extra.get(PARTITION_COUNTS) or {}
        for stream, before in sorted(recorded.items()):
            after = now.get(stream)
            if after is not None and after != before:
                raise StreamSystemError(
                    f"input {stream} had {before} partitions when task {task_name!r} last "
                    f"checkpointed and has {after} now; a stream's partition count must never "
                    "change (each task's state belongs to its partition): write the data to a "
                    "new stream with the partition count you want and read that instead"
                )


__all__ = [
    "PARTITION_COUNTS",
    "check_partition_counts",
    "checkpoint_manager",
    "partition_counts_extra",
]
