"""The checkpoint port: a Checkpoint and the CheckpointManager that stores one per task."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName


@dataclass(frozen=True)
class Checkpoint:
    """What a task has fully processed, and what must agree with it after a restart.

    - ``offsets``: the last processed offset of each input partition (of one that delivered
      nothing, the offset before the one the task started it at: it resumes there);
    - ``partition_counts``: every input stream's partition count when it was written (a
      stream's count must never change: each task's state belongs to its partition);
    - ``changelog_offsets``: each logged store's changelog offset after the commit's flush
      (upcoming, exclusive), which the store is restored to;
    - ``control``: the task's control-message bookkeeping (``TaskControl.to_json()``), or
      None when the task reads and writes no framed stream;
    - ``epoch``: the owner epoch of the container that wrote it: each container that takes
      a task writes with the epoch of the checkpoint it found plus one, and readers keep a
      task's checkpoint of the highest epoch, so a container that lost the task (and was not
      told yet) cannot move its checkpoint backwards or forwards. None: written before epochs;
    - ``snapshots``: each RocksDB store's local snapshot taken at the commit that wrote it
      (the snapshot's id, by store name), which a restart after a crash opens instead of
      replaying the whole changelog (a logged store's id is ``<changelog offset>-<tag>``)
      or, for a store without changelog (id ``local.<n>-<tag>``), instead of keeping a
      local store that may hold writes after the checkpoint. Empty: none was taken
      (snapshots off, an in-memory store, or written before snapshots);
    - ``topic_ids``: the ID of each input stream whose system gives IDs (Kafka's topic IDs)
      when it was written: the offsets of a stream whose ID differs at a restart belong to a
      stream of the same name deleted since, and are not read (``container/stale_offsets.py``).
      Empty: no system gave IDs (or written before topic IDs), and nothing is checked.

    ``samzapy.checkpoint.codec`` turns it into the stored JSON document and back.
    """

    offsets: Mapping[SystemStreamPartition, str]
    partition_counts: Mapping[SystemStream, int] = field(default_factory=dict)
    changelog_offsets: Mapping[str, str] = field(default_factory=dict)
    control: Mapping[str, Any] | None = None
    epoch: int | None = None
    snapshots: Mapping[str, str] = field(default_factory=dict)
    topic_ids: Mapping[SystemStream, str] = field(default_factory=dict)


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

    async def abandon(self) -> None:
        """Release what start opened at once, a write still under way given up (the
        container failed or lost its tasks), even with the storage out of reach. By default
        ``stop``: a manager whose stop cannot hang."""
        await self.stop()

    async def refresh(self) -> None:  # noqa: B027 - optional hook
        """Take in the checkpoints other containers wrote since ``start`` (or the last call),
        as far as they are readable now, so ``read_last`` returns them: a standby follows the
        active task's commits this way. A manager whose ``read_last`` reads its storage each
        time has nothing to do."""

    @abc.abstractmethod
    async def read_last(self, task_name: TaskName) -> Checkpoint | None: ...

    @abc.abstractmethod
    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None: ...


__all__ = ["Checkpoint", "CheckpointManager"]
