"""Exactly-once checkpoints: one partition per task, written inside the task's transactions.

Under ``task.processing.guarantee: exactly-once`` a task's checkpoint record is the last write
of each of its Kafka transactions (``writer.TransactionalCheckpointWriter`` sends it and
commits). Readers read ``read_committed``, and a reader cannot read past a transaction still
open in the partition, so the tasks must not share one: the stream
(``checkpoint_stream_name(...) + "-txn"``, compacted) has a partition per task, task
``Partition k`` writing partition k, and only that task's producer (one container at a time:
its transactional id fences the others) ever writes it.

Starting (``start``):

1. create the stream with one partition per task if it is missing (more partitions are
   fine, fewer are an error);
2. read each registered task's partition up to its end, keeping the record of the highest
   owner epoch (the container's transactional producer has claimed the task before, so no
   transaction of an earlier owner is left open);
3. a task without a record there takes its checkpoint from the job's at-least-once stream, if
   that exists: a job switched to exactly-once resumes where it was.

``refresh`` (a standby following its active task) reads every task's partition from the
oldest record, read committed, with a consumer it keeps: it sees each commit once its
transaction has committed, and never waits on one still open.
"""

from __future__ import annotations

from samzapy.api.errors import CheckpointError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import encode_checkpoint
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import STREAM_CONFIG, StreamCheckpointManager
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemConsumer, SystemFactory
from samzapy.system.reader import read_partition

#: The suffix of the exactly-once stream's name.
SUFFIX = "-txn"


def task_partition(task_name: TaskName) -> int:
    """The partition of task ``Partition k``: k."""
    prefix, _, number = str(task_name).rpartition(" ")
    if prefix != "Partition" or not number.isdigit():
        raise CheckpointError(
            f"exactly-once checkpoints need group-by-partition task names ('Partition k'), "
            f"got {str(task_name)!r}"
        )
    return int(number)


class TransactionalCheckpointManager(StreamCheckpointManager):
    """Keeps each task's checkpoint in its own partition, read committed."""

    def __init__(
        self,
        system_factory: SystemFactory,
        stream: str,
        task_count: int,
        replication_factor: int | None = None,
        *,
        fallback_stream: str | None = None,
        read_timeout: float = 60.0,
    ) -> None:
        """``stream`` is the at-least-once stream's name (this one's is it plus ``-txn``);
        ``fallback_stream`` (usually that one) is read for tasks without a checkpoint here."""
        super().__init__(
            system_factory, stream + SUFFIX, replication_factor, read_timeout=read_timeout
        )
        self.task_count = task_count
        self.fallback_stream = fallback_stream
        self._tasks: list[TaskName] = []

    def register(self, task_name: TaskName) -> None:
        task_partition(task_name)
        self._tasks.append(TaskName(task_name))

    async def _start(self) -> int:
        try:
            admin = self._admin = self.system_factory.get_admin()
            await admin.start()
            await self._ensure_partitions(admin)
            records = 0
            for task in self._tasks:
                ssp = SystemStreamPartition(self.ssp.system, self.stream, task_partition(task))
                records += await self._read_partition(admin, ssp)
            missing = [t for t in self._tasks if t not in self._documents]
            if missing and self.fallback_stream is not None:
                records += await self._read_fallback(admin, missing)
        except StreamSystemError as exc:
            raise CheckpointError(f"cannot read checkpoint stream {self.stream}: {exc}") from exc
        return records

    async def _ensure_partitions(self, admin: SystemAdmin) -> None:
        count = (await admin.partition_counts([self.stream])).get(self.stream)
        if count is None:
            await admin.create_stream(
                self.stream,
                self.task_count,
                replication_factor=self.replication_factor,
                config=dict(STREAM_CONFIG),
            )
        elif count < self.task_count:
            raise CheckpointError(
                f"checkpoint stream {self.system_factory.system_name}.{self.stream} has {count} "
                f"partitions; exactly-once needs one per task ({self.task_count}): delete the "
                "stream (the job then resumes from its at-least-once checkpoints) or give the "
                "job a new job.id"
            )

    async def _read_partition(self, admin: SystemAdmin, ssp: SystemStreamPartition) -> int:
        bounds = (await admin.offset_bounds([ssp]))[ssp]
        if bounds.oldest is None or admin.compare_offsets(bounds.oldest, bounds.upcoming) >= 0:
            return 0
        records = 0
        async for batch in read_partition(
            self.system_factory,
            admin,
            ssp,
            None,
            bounds.upcoming,
            timeout=self.read_timeout,
            name=f"checkpoint stream {ssp}",
        ):
            for envelope in batch:
                self._apply(envelope)
            records += len(batch)
        return records

    async def _read_fallback(self, admin: SystemAdmin, missing: list[TaskName]) -> int:
        """Checkpoints of ``missing`` tasks from the at-least-once stream, if it exists."""
        assert self.fallback_stream is not None
        if self.fallback_stream not in await admin.partition_counts([self.fallback_stream]):
            return 0
        older = StreamCheckpointManager(
            self.system_factory, self.fallback_stream, read_timeout=self.read_timeout
        )
        records = 0
        await older.start()
        try:
            for task in missing:
                found = await older.read_last(task)
                if found is not None:
                    self.committed(task, found)
                    records += 1
        finally:
            await older.stop()
        return records

    async def _follow(self) -> SystemConsumer | None:
        admin = self._admin
        if admin is None:
            return None
        count = (await admin.partition_counts([self.stream])).get(self.stream)
        if not count:
            return None
        follower = self.system_factory.get_committed_consumer()
        self._followed = [
            SystemStreamPartition(self.ssp.system, self.stream, p) for p in range(count)
        ]
        for ssp in self._followed:
            follower.register(ssp, None, OffsetDefault.OLDEST)
        await follower.start()
        self._follower = follower
        return follower

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        raise CheckpointError(
            f"the checkpoint of task {str(task_name)!r} is written in its transaction "
            "(TransactionalCheckpointWriter), not on its own"
        )

    def record(
        self, task_name: TaskName, checkpoint: Checkpoint
    ) -> tuple[SystemStream, int, bytes, bytes]:
        """Where and what to send for ``checkpoint``: stream, partition, key, value."""
        return (
            SystemStream(self.ssp.system, self.stream),
            task_partition(task_name),
            str(task_name).encode("utf-8"),
            encode_checkpoint(task_name, checkpoint),
        )

    def committed(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        """``checkpoint`` is committed: the one ``read_last`` returns from now on."""
        task = TaskName(task_name)
        self._documents[task] = encode_checkpoint(task, checkpoint)
        self._epochs[task] = checkpoint.epoch or 0


__all__ = ["SUFFIX", "TransactionalCheckpointManager", "task_partition"]
