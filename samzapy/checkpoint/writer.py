"""One task's checkpoint writes: through the job's manager, skipping one equal to the last."""

from __future__ import annotations

import time

import structlog

from samzapy.api.system import TaskName
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager

log = structlog.get_logger("samzapy.checkpoint")


class TaskCheckpointWriter:
    """Writes the checkpoints of one task.

    ``last`` is the checkpoint read at start-up: a commit that changed nothing (an idle task)
    writes nothing. Without a manager (``task.checkpoint.factory`` unset) nothing is written.
    """

    __slots__ = ("_last", "_manager", "task_name", "written", "written_at")

    def __init__(
        self, manager: CheckpointManager | None, task_name: TaskName, last: Checkpoint | None
    ) -> None:
        self._manager = manager
        self.task_name = task_name
        self._last = last
        #: How many checkpoints were written, and when the last one was (monotonic seconds).
        self.written = 0
        self.written_at: float | None = None

    @property
    def enabled(self) -> bool:
        return self._manager is not None

    async def write(self, checkpoint: Checkpoint) -> bool:
        """Write ``checkpoint`` unless it equals the last one; True when it was written."""
        if self._manager is None or checkpoint == self._last:
            return False
        await self._manager.write(self.task_name, checkpoint)
        self._last = checkpoint
        self.written += 1
        self.written_at = time.monotonic()
        log.debug(
            "checkpoint_written",
            task=self.task_name,
            offsets={str(ssp): offset for ssp, offset in checkpoint.offsets.items()},
        )
        return True


__all__ = ["TaskCheckpointWriter"]
