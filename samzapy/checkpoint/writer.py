"""One task's checkpoint writes, stamped with the container's owner epoch for the task.

A container that takes a task reads its checkpoint (epoch ``e``, 0 before epochs) and from then
on writes with epoch ``e + 1``, first of all the checkpoint it found (``claim``): readers keep a
task's checkpoint of the highest epoch, so the writes of a container that lost the task
without noticing yet do not count. At-least-once writes go through the checkpoint manager;
under exactly-once (``TransactionalCheckpointWriter``) the checkpoint record is the last write
of the task's transaction, which the write then commits.

With ``group`` (``group.py``) each checkpoint's input offsets are copied to the job's consumer
group: after the write, or under exactly-once inside the transaction the write commits. Where
``fetched`` finds the consumer past a partition's last processed message (past a transaction's
marker), the group gets that position, also from a commit that leaves the checkpoint as it was
(under exactly-once, in a transaction that writes the checkpoint again). A position found for
a checkpointed offset holds while that offset is the checkpoint's: a later commit that cannot
read it (the consumer stopped) does not move the group back.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping

import structlog

from samzapy.api.errors import TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.group import GroupOffsets
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.checkpoint.transactional import TransactionalCheckpointManager
from samzapy.system.fencing import WriteLease
from samzapy.system.ports import TransactionalProducer

log = structlog.get_logger("samzapy.checkpoint")

#: Where a task's consumers will fetch next, by partition (``TaskCheckpointWriter``).
Fetched = Callable[[], Mapping[SystemStreamPartition, int]]


class TaskCheckpointWriter:
    """Writes the checkpoints of one task.

    ``last`` is the checkpoint read at start-up: a commit that changed nothing (an idle task)
    writes nothing. Without a manager (``task.checkpoint.factory`` unset) nothing is written.
    ``lease`` says whether this container may still be sure it owns the task (the group's
    lease, ``coordinator/lease.py``): a write waits while it is held, and raises
    TaskFencedError instead of writing once it broke. ``fetched``: where the task's
    consumers will fetch next, for the partitions whose every message handed over the task
    has processed; called at each write, while nothing is in flight. ``topic_ids``: the
    inputs' topic IDs, which every checkpoint written records instead of its own (None:
    each keeps its own, as ``samzapy checkpoint set`` writes them).
    """

    def __init__(
        self,
        manager: CheckpointManager | None,
        task_name: TaskName,
        last: Checkpoint | None,
        *,
        lease: WriteLease | None = None,
        group: GroupOffsets | None = None,
        fetched: Fetched | None = None,
        topic_ids: Mapping[SystemStream, str] | None = None,
    ) -> None:
        self._manager = manager
        self._topic_ids = topic_ids
        self.task_name = task_name
        self._last = last
        self._lease = lease
        self._group = group
        self._fetched = fetched
        #: The group offsets last committed, each with the checkpointed offset it is for.
        self._sent: dict[SystemStreamPartition, tuple[str, int]] = {}
        #: This container's owner epoch for the task.
        self.epoch = (0 if last is None else last.epoch or 0) + 1
        #: How many checkpoints were written; when (monotonic seconds) the checkpoint was last
        #: found to cover everything the task had processed: a commit that wrote it, or one
        #: with nothing new to write (an idle task's checkpoint is current, not old).
        self.written = 0
        self.current_at: float | None = None

    @property
    def last(self) -> Checkpoint | None:
        """The checkpoint last written (or read at start-up)."""
        return self._last

    @property
    def enabled(self) -> bool:
        return self._manager is not None

    async def claim(self) -> None:
        """Take the task over: write the checkpoint found, with this container's epoch."""
        if self._last is not None:
            await self.write(self._last)

    async def write(self, checkpoint: Checkpoint) -> bool:
        """Write ``checkpoint`` unless it equals the last one; True when it was written."""
        stamped = dataclasses.replace(checkpoint, epoch=self.epoch)
        if self._topic_ids is not None:
            stamped = dataclasses.replace(stamped, topic_ids=self._topic_ids)
        if self._manager is None:
            return False
        group = self._group_offsets(checkpoint.offsets)
        if not self._changed(stamped, group):
            self.current_at = time.monotonic()
            # Past a transaction's marker, say; not from a container unsure it owns the task.
            if group and self._moved(group) and (self._lease is None or self._lease.valid()):
                self._written(checkpoint, group)
            return False
        if self._lease is not None and not self._lease.valid() and not await self._lease.settle():
            raise self._fenced()
        await self._write(stamped, group)
        self._written(stamped, group)
        self._last = stamped
        self.written += 1
        self.current_at = time.monotonic()
        log.debug(
            "checkpoint_written",
            task=self.task_name,
            epoch=self.epoch,
            offsets={str(ssp): offset for ssp, offset in checkpoint.offsets.items()},
        )
        return True

    def _changed(self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]) -> bool:
        return checkpoint != self._last

    def _group_offsets(
        self, offsets: Mapping[SystemStreamPartition, str]
    ) -> dict[SystemStreamPartition, int]:
        """The group's offsets for a checkpoint's ``offsets`` (none without a group)."""
        if self._group is None:
            return {}
        fetched = self._fetched() if self._fetched is not None else None
        out = self._group.next_offsets(offsets, fetched)
        sent = self._sent
        for ssp, offset in out.items():
            if (before := sent.get(ssp)) is not None and before[0] == offsets[ssp]:
                out[ssp] = max(offset, before[1])
        return out

    def _moved(self, group: Mapping[SystemStreamPartition, int]) -> bool:
        """Whether ``group`` differs from the group offsets last committed."""
        sent = self._sent
        return any(
            (before := sent.get(ssp)) is None or before[1] != offset
            for ssp, offset in group.items()
        )

    def _written(self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]) -> None:
        if group:
            assert self._group is not None
            self._group.commit(group)
            self._note_sent(checkpoint, group)

    def _note_sent(
        self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]
    ) -> None:
        offsets = checkpoint.offsets
        self._sent.update((ssp, (offsets[ssp], offset)) for ssp, offset in group.items())

    def _fenced(self) -> TaskFencedError:
        return TaskFencedError(
            f"task {str(self.task_name)!r} may belong to another container by now: this one "
            "gave its tasks up (the group evicted or fenced it, or it stopped while unsure "
            "it was still a member); its checkpoint is not written",
            task_name=self.task_name,
            epoch=self.epoch,
        )

    async def _write(
        self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]
    ) -> None:
        assert self._manager is not None
        await self._manager.write(self.task_name, checkpoint)


class TransactionalCheckpointWriter(TaskCheckpointWriter):
    """Exactly-once: the checkpoint record ends the task's transaction, which it commits."""

    def __init__(
        self,
        manager: TransactionalCheckpointManager,
        producer: TransactionalProducer,
        task_name: TaskName,
        last: Checkpoint | None,
        *,
        group: GroupOffsets | None = None,
        fetched: Fetched | None = None,
        topic_ids: Mapping[SystemStream, str] | None = None,
    ) -> None:
        super().__init__(
            manager, task_name, last, group=group, fetched=fetched, topic_ids=topic_ids
        )
        self._transactions = manager
        self._producer = producer

    def _changed(self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]) -> bool:
        # Outputs sent without moving the checkpoint (a window) still need their commit, and
        # group offsets that moved (past a marker) their transaction.
        return super()._changed(checkpoint, group) or self._producer.pending or self._moved(group)

    async def _write(
        self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]
    ) -> None:
        stream, partition, key, value = self._transactions.record(self.task_name, checkpoint)
        self._producer.send(stream, partition, key, value)
        if group:
            assert self._group is not None
            await self._group.in_transaction(self._producer, group)
        await self._producer.commit()
        self._transactions.committed(self.task_name, checkpoint)

    def _written(self, checkpoint: Checkpoint, group: Mapping[SystemStreamPartition, int]) -> None:
        self._note_sent(checkpoint, group)  # the offsets went into the transaction


__all__ = ["Fetched", "TaskCheckpointWriter", "TransactionalCheckpointWriter"]
