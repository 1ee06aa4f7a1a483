"""Exactly-once checkpoints: one partition per task, written inside the task's transactions.

Under ``task.processing.guarantee: exactly-once`` a task's checkpoint record is the last write
of each of its Kafka transactions (``writer.TransactionalCheckpointWriter`` sends it and
commits). Readers read ``read_committed``, and a reader cannot read past a transaction still
open in the partition, so the tasks must not share one: the stream
(``exactly_once_stream``: ``checkpoint_stream_name(...) + "-txn"``, cut to fit as that name
is, compacted) has a partition per task, task
``Partition k`` writing partition k, and only that task's producer (one container at a time:
its transactional id fences the others) ever writes it.

Starting (``start``):

1. create the stream with one partition per task if it is missing (more partitions are
   fine, fewer are an error);
2. read each registered task's partition up to its end, keeping the record of the highest
   owner epoch (the container's transactional producer has claimed the task before, so no
   transaction of an earlier owner is left open);
3. if the job's at-least-once stream exists, a task whose checkpoint there has a higher owner
   epoch than the one found here (or that has none here) takes that one: a job switched to
   exactly-once, or back to it, resumes where it was.

The job's owner record (``samzapy.checkpoint.owner``) lives in the at-least-once stream,
the one stream of the job with a single partition written outside transactions: ``own``
claims it there (creating the stream if missing) before the container starts its
transactional producers, so a refused job has started nothing; step 3 checks it again.

The other way round, ``AtLeastOnceCheckpointManager`` is the at-least-once stream's manager:
once started, a task whose checkpoint in this stream (if it exists) has a higher owner epoch
than in its own takes that one, so a job switched back from exactly-once neither starts its
tasks over nor restores their stores to an old checkpoint.

``refresh`` (a standby following its active task) reads every task's partition from the
oldest record, read committed, with a consumer it keeps: it sees each commit once its
transaction has committed, and never waits on one still open.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import structlog

from samzapy.api.errors import CheckpointError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import encode_checkpoint
from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import MAX_STREAM_NAME_LENGTH, STREAM_CONFIG, StreamCheckpointManager
from samzapy.config.directories import OWN_DIRECTORIES
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemConsumer, SystemFactory
from samzapy.system.reader import read_partition

#: The suffix of the exactly-once stream's name.
SUFFIX = "-txn"


def exactly_once_stream(stream: str) -> str:
    """``<stream>-txn``, the exactly-once stream of the at-least-once ``stream``. One longer
    than Kafka takes is cut and ends with a hash of ``stream`` before the suffix, as
    ``checkpoint_stream_name`` cuts a long name, so it fits and long names stay apart."""
    name = stream + SUFFIX
    if len(name) <= MAX_STREAM_NAME_LENGTH:
        return name
    digest = hashlib.sha256(stream.encode()).hexdigest()[:16]
    return f"{stream[: MAX_STREAM_NAME_LENGTH - len(digest) - 1 - len(SUFFIX)]}_{digest}{SUFFIX}"


log = structlog.get_logger("samzapy.checkpoint")


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
        owner: JobIdentity | None = None,
        claim_owner: bool = True,
    ) -> None:
        """``stream`` is the at-least-once stream's name (this one's is it plus ``-txn``);
        ``fallback_stream`` (usually that one) is read for tasks without a checkpoint here,
        and holds the owner record ``own`` claims for ``owner``."""
        super().__init__(
            system_factory,
            exactly_once_stream(stream),
            replication_factor,
            read_timeout=read_timeout,
            owner=owner,
            claim_owner=claim_owner,
        )
        self.task_count = task_count
        self.fallback_stream = fallback_stream

    async def own(self) -> None:
        """Check, and claim when it has none, the owner record of ``fallback_stream``
        (created when missing); JobCollisionError if it is another job's."""
        if self.owner is None or self.fallback_stream is None:
            return
        claimer = StreamCheckpointManager(
            self.system_factory,
            self.fallback_stream,
            self.replication_factor,
            read_timeout=self.read_timeout,
            owner=self.owner,
            claim_owner=self.claim_owner,
        )
        await claimer.start()
        await claimer.stop()

    def register(self, task_name: TaskName) -> None:
        task_partition(task_name)
        super().register(task_name)

    async def _start(self) -> int:
        try:
            admin = self._admin = self.system_factory.get_admin()
            await admin.start()
            await self._ensure_partitions(admin)
            records = 0
            for task in self._tasks:
                ssp = SystemStreamPartition(self.ssp.system, self.stream, task_partition(task))
                records += await self._read_partition(admin, ssp)
            if self.fallback_stream is not None:
                records += await self._read_fallback(admin)
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
                f"job a new job.id ({OWN_DIRECTORIES})"
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

    async def _read_fallback(self, admin: SystemAdmin) -> int:
        """Step 3: the at-least-once stream's checkpoints of a higher owner epoch."""
        assert self.fallback_stream is not None
        if self.fallback_stream not in await admin.partition_counts([self.fallback_stream]):
            return 0
        other = StreamCheckpointManager(
            self.system_factory,
            self.fallback_stream,
            read_timeout=self.read_timeout,
            owner=self.owner,
            claim_owner=False,  # ``own`` claimed it: here only checked
        )
        await other.start()
        try:
            return await _take_newer(self, other, self._tasks)
        finally:
            await other.stop()

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


class AtLeastOnceCheckpointManager(StreamCheckpointManager):
    """The job's at-least-once checkpoint stream, which also takes a task's checkpoint from
    the exactly-once stream (``stream`` plus ``-txn``, if it exists) when that one's owner
    epoch is higher: the job ran under exactly-once since (module docstring)."""

    async def _start(self) -> int:
        records = await super()._start()
        admin = self._admin
        assert admin is not None
        stream = exactly_once_stream(self.stream)
        try:
            count = (await admin.partition_counts([stream])).get(stream)
        except StreamSystemError as exc:
            raise CheckpointError(f"cannot read checkpoint stream {stream}: {exc}") from exc
        # Only the tasks it can hold (a task named otherwise never ran under exactly-once).
        tasks = [t for t in self._tasks if _partition_of(t) < (count or 0)]
        if not tasks:
            return records
        other = TransactionalCheckpointManager(
            self.system_factory, self.stream, count or 0, read_timeout=self.read_timeout
        )
        for task in tasks:
            other.register(task)
        await other.start()
        try:
            return records + await _take_newer(self, other, tasks)
        finally:
            await other.stop()


def checkpoint_streams(manager: StreamCheckpointManager) -> list[str]:
    """The streams ``manager`` reads a job's checkpoints from: its own, then the other
    guarantee's (the exactly-once manager's fallback, the at-least-once manager's ``-txn``)."""
    if isinstance(manager, TransactionalCheckpointManager):
        return [manager.stream, *filter(None, [manager.fallback_stream])]
    if isinstance(manager, AtLeastOnceCheckpointManager):
        return [manager.stream, exactly_once_stream(manager.stream)]
    return [manager.stream]


def reading_existing(
    manager: StreamCheckpointManager, existing: Mapping[str, int]
) -> StreamCheckpointManager | None:
    """A manager that reads what ``manager`` would and creates no stream, given the streams
    of ``checkpoint_streams(manager)`` that exist (``existing``, with their partition counts):
    ``manager`` when its own stream exists, else one over the other guarantee's stream, else
    None (the job never wrote a checkpoint)."""
    if manager.stream in existing:
        return manager
    other = checkpoint_streams(manager)[1:]
    if not other or other[0] not in existing:
        return None
    if isinstance(manager, TransactionalCheckpointManager):
        # Exactly-once, before its first commit: the at-least-once checkpoints.
        return StreamCheckpointManager(
            manager.system_factory,
            other[0],
            owner=manager.owner,
            claim_owner=manager.claim_owner,
        )
    # At-least-once, after a run under exactly-once only (no owner record there).
    return TransactionalCheckpointManager(
        manager.system_factory, manager.stream, existing[other[0]]
    )


def _partition_of(task_name: TaskName) -> int:
    """The exactly-once partition of ``task_name``; -1 for a name that has none."""
    try:
        return task_partition(task_name)
    except CheckpointError:
        return -1


async def _take_newer(
    manager: StreamCheckpointManager, other: StreamCheckpointManager, tasks: list[TaskName]
) -> int:
    """Keep in ``manager`` each of ``tasks``' checkpoints in ``other`` whose owner epoch is
    higher than the one ``manager`` read (or that ``manager`` has none of): how many."""
    taken = []
    for task in tasks:
        found = await other.read_last(task)
        if found is None:
            continue
        mine = await manager.read_last(task)
        if mine is not None and (found.epoch or 0) <= (mine.epoch or 0):
            continue
        manager._keep(task, encode_checkpoint(task, found), found.epoch or 0, str(other.ssp))
        taken.append(task)
    if taken:
        log.info(
            "checkpoints_taken_from",
            stream=other.stream,
            tasks=sorted(str(t) for t in taken),
            reason="their owner epoch there is the highest: the job ran under the other "
            "task.processing.guarantee since; they resume where it left them",
        )
    return len(taken)


__all__ = [
    "SUFFIX",
    "AtLeastOnceCheckpointManager",
    "TransactionalCheckpointManager",
    "checkpoint_streams",
    "exactly_once_stream",
    "reading_existing",
    "task_partition",
]
