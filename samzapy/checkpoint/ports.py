"""The checkpoint port: a Checkpoint and the CheckpointManager that stores one per task."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samzapy.api.system import SystemStreamPartition, TaskName


@dataclass(frozen=True)
class Checkpoint:
    """What a task has fully processed: the last processed offset of each input partition.

    ``extra`` carries what later layers checkpoint with the offsets (store changelog offsets,
    control-message bookkeeping); it must be JSON-serializable.
    """

    offsets: Mapping[SystemStreamPartition, str]
    extra: Mapping[str, Any] = field(default_factory=dict)


class CheckpointManager(abc.ABC):
    """Stores the latest checkpoint of each task.

    Contract: ``register`` every task before ``start``; ``read_last`` returns the checkpoint
    last written for the task (also by an earlier process) or None; ``write`` is durable when
    it returns; nothing is called after ``stop``.
    """

    def register(self, task_name: TaskName) -> None:  # noqa: B027 - optional hook
        """Announce a task this container will read and write checkpoints for."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open files or connections."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release what start opened."""

    @abc.abstractmethod
    async def read_last(self, task_name: TaskName) -> Checkpoint | None: ...

    @abc.abstractmethod
    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None: ...


__all__ = ["Checkpoint", "CheckpointManager"]
