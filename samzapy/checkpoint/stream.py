"""The stream checkpoint manager: each task's latest checkpoint as a keyed record of a stream.

Samza's Kafka checkpoint manager, written against the system ports, so it runs over any
system whose records keep their keys (Kafka; the memory system in tests). The job's
checkpoint stream has one partition; a record's key is the task name in UTF-8 and its value
the JSON document the file manager writes (``samzapy.checkpoint.file``); a record without a
value is a tombstone that deletes the task's checkpoint. On Kafka the stream is compacted,
so it keeps about one record per task.

Starting (``start``):

1. start the admin and create the stream if it is missing: one partition, the replication
   factor, ``cleanup.policy=compact``; an existing stream must have exactly one partition;
2. take the partition's upcoming offset: what was written before this moment is read;
3. read from the oldest record with a consumer of its own until the record before the
   upcoming offset (or end-of-stream), keeping the last record per task and the first owner
   record (``samzapy.checkpoint.owner``);
4. start a producer of its own for the writes;
5. given the job's identity (``owner``): if no owner record was read, write one naming the
   job and read on to the stream's end; then the first owner record names the owner, and a
   stream of another job raises ``JobCollisionError`` before any checkpoint is read or
   written. A reader that must not write (``claim_owner=False``, ``samzapy checkpoint
   show``) only checks an owner record it finds.

``write`` sends one record and flushes the producer, so the checkpoint is durable when it
returns. The manager's consumer and producer are separate from the job's own. ``refresh``
reads on from where the last read stopped, with a consumer it keeps, until a poll brings
nothing: what other containers committed since (standby replicas follow their active tasks'
checkpoints this way).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import CheckpointError, ConfigError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import decode_checkpoint, encode_checkpoint
from samzapy.checkpoint.owner import (
    JobIdentity,
    is_typed_key,
    owner_of,
    owner_record,
    read_owner,
)
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.config.directories import OWN_DIRECTORIES
from samzapy.system.ports import (
    OffsetDefault,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)
from samzapy.system.reader import read_partition

log = structlog.get_logger("samzapy.checkpoint")

#: Kafka's longest topic name.
MAX_STREAM_NAME_LENGTH = 249
#: The topic configuration the checkpoint stream is created with.
STREAM_CONFIG = {"cleanup.policy": "compact"}
REPLICATION_FACTOR_KEY = "task.checkpoint.replication.factor"
_NOT_IN_TOPIC_NAMES = re.compile(r"[^a-zA-Z0-9._-]")


def checkpoint_stream_name(job_name: str, job_id: str) -> str:
    """``__samzapy_checkpoint_<job>_<id>``, usable as a Kafka topic name.

    Characters Kafka refuses in topic names become ``_``. A name longer than Kafka allows is
    cut and ends with a hash of the whole name, so long names of different jobs stay apart.
    """
    name = _NOT_IN_TOPIC_NAMES.sub("_", f"__samzapy_checkpoint_{job_name}_{job_id}")
    if len(name) <= MAX_STREAM_NAME_LENGTH:
        return name
    digest = hashlib.sha256(f"{job_name}\0{job_id}".encode()).hexdigest()[:16]
    return f"{name[: MAX_STREAM_NAME_LENGTH - len(digest) - 1]}_{digest}"


def _replication_factor(value: int | None) -> int | None:
    if value is None or value == -1:
        return None
    if type(value) is not int or value < 1:
        raise ConfigError(
            f"{REPLICATION_FACTOR_KEY} must be -1 (the system's default) or an integer >= 1, "
            f"got {value!r}",
            key=REPLICATION_FACTOR_KEY,
        )
    return value


class StreamCheckpointManager(CheckpointManager):
    """Keeps each task's latest checkpoint in a one-partition stream of ``system_factory``."""

    def __init__(
        self,
        system_factory: SystemFactory,
        stream: str,
        replication_factor: int | None = None,
        *,
        read_timeout: float = 60.0,
        owner: JobIdentity | None = None,
        claim_owner: bool = True,
    ) -> None:
        """``replication_factor``: None or -1 for the system's default. ``read_timeout``: how
        long reading the stream at start may go without receiving anything. ``owner``: the
        job's identity, checked against the stream's owner record (None: not checked);
        ``claim_owner``: write one when the stream has none (start, step 5)."""
        self.system_factory = system_factory
        self.owner = owner
        self.claim_owner = claim_owner
        #: The job the stream's first owner record names, once read.
        self.owner_found: JobIdentity | None = None
        self.stream = stream
        self.replication_factor = _replication_factor(replication_factor)
        self.read_timeout = read_timeout
        self.ssp = SystemStreamPartition(system_factory.system_name, stream, 0)
        #: The tasks registered, in order.
        self._tasks: list[TaskName] = []
        self._documents: dict[TaskName, bytes] = {}
        self._epochs: dict[TaskName, int] = {}
        self._locks: dict[TaskName, asyncio.Lock] = {}
        self._admin: SystemAdmin | None = None
        self._producer: SystemProducer | None = None
        #: ``refresh``: where the start's read stopped, and the consumer that reads on.
        self._read_to_offset: str | None = None
        self._follower: SystemConsumer | None = None
        self._followed: list[SystemStreamPartition] = []

    # -- start ----------------------------------------------------------------------------

    def register(self, task_name: TaskName) -> None:
        self._tasks.append(TaskName(task_name))

    async def start(self) -> None:
        try:
            records = await self._start()
        except BaseException:
            # Release what was opened; the error that stopped the start is the one to see.
            with contextlib.suppress(Exception):
                await self.stop()
            raise
        log.info(
            "checkpoints_read",
            stream=str(self.ssp),
            tasks=len(self._documents),
            records=records,
        )

    async def _start(self) -> int:
        try:
            admin = self._admin = self.system_factory.get_admin()
            await admin.start()
            # 1. The stream, with one partition.
            await self._ensure_stream(admin)
            # 2. Where reading stops: what exists now.
            bounds = (await admin.offset_bounds([self.ssp]))[self.ssp]
            # 3. The last record of each task.
            records = 0
            oldest = bounds.oldest
            if oldest is not None and admin.compare_offsets(oldest, bounds.upcoming) < 0:
                records = await self._read_to(admin, bounds.upcoming)
            self._read_to_offset = bounds.upcoming
            # 4. The producer for writes.
            producer = self._producer = self.system_factory.get_producer()
            await producer.start()
            # 5. Whose stream it is.
            records += await self._own(admin, producer)
        except StreamSystemError as exc:
            raise CheckpointError(f"cannot read checkpoint stream {self.ssp}: {exc}") from exc
        return records

    async def _ensure_stream(self, admin: SystemAdmin) -> None:
        stream = self.stream
        count = (await admin.partition_counts([stream])).get(stream)
        if count is None:
            await admin.create_stream(
                stream,
                1,
                replication_factor=self.replication_factor,
                config=dict(STREAM_CONFIG),
            )
        elif count != 1:
            raise CheckpointError(
                f"checkpoint stream {self.system_factory.system_name}.{stream} has {count} "
                "partitions, expected 1: a task's checkpoints must stay in one ordered "
                "partition; delete the stream or point the job at another one"
            )

    async def _own(self, admin: SystemAdmin, producer: SystemProducer) -> int:
        """Step 5: check (and claim) the owner; returns how many records it read."""
        job = self.owner
        if job is None:
            return 0
        records = 0
        if self.owner_found is None:
            if not self.claim_owner:
                return 0
            key, value = owner_record(job)
            producer.send(SystemStream(self.ssp.system, self.stream), 0, key, value)
            await producer.flush()
            # Read on to the end: a job that claimed at the same moment may have come first.
            upcoming = (await admin.offset_bounds([self.ssp]))[self.ssp].upcoming
            records = await self._read_to(admin, upcoming, self._read_to_offset)
            self._read_to_offset = upcoming
            if self.owner_found is None:
                raise CheckpointError(
                    f"the owner record written to checkpoint stream {self.ssp} was not read "
                    "back: does its system keep message keys?"
                )
            log.info("checkpoint_stream_claimed", stream=str(self.ssp), owner=str(job))
        owner_of(f"{self.system_factory.system_name}.{self.stream}", self.owner_found, job)
        return records

    async def _read_to(self, admin: SystemAdmin, upcoming: str, start: str | None = None) -> int:
        """Read every record from ``start`` (None: the oldest) before ``upcoming``; returns
        how many were read."""
        records = 0
        async for batch in read_partition(
            self.system_factory,
            admin,
            self.ssp,
            start,
            upcoming,
            timeout=self.read_timeout,
            name=f"checkpoint stream {self.ssp}",
        ):
            for envelope in batch:
                try:
                    self._apply(envelope)
                except CheckpointError as exc:
                    raise CheckpointError(
                        f"{exc}; restarting fails the same way: to start the job over (every "
                        "task at its offset defaults, its logged stores empty), give it a new "
                        f"job.id, which reads a new checkpoint stream instead of {self.stream} "
                        f"({OWN_DIRECTORIES})"
                    ) from exc
            records += len(batch)
        return records

    def _apply(self, envelope: IncomingMessageEnvelope) -> None:
        """Keep the record as its task's latest checkpoint, or delete it on a tombstone."""
        source = f"record at offset {envelope.offset} of checkpoint stream {self.ssp}"
        key = envelope.key
        if is_typed_key(key):  # the owner record (or a newer samzapy's): no task's
            assert isinstance(key, bytes | bytearray)
            found = read_owner(bytes(key), envelope.message, source)
            if self.owner_found is None:
                self.owner_found = found
            return
        try:
            if not isinstance(key, bytes | bytearray):
                raise ValueError(f"expected the task name as UTF-8 bytes, got {key!r}")
            task_name = TaskName(bytes(key).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"corrupt checkpoint {source}: key: {exc}") from exc
        value = envelope.message
        if value is None:
            self._documents.pop(task_name, None)
            self._epochs.pop(task_name, None)
            return
        if not isinstance(value, bytes | bytearray):
            raise CheckpointError(
                f"corrupt checkpoint {source}: expected a JSON document as bytes, "
                f"got {type(value).__name__}"
            )
        document = bytes(value)
        stored_task, checkpoint = decode_checkpoint(document, source)
        if stored_task != task_name:
            raise CheckpointError(
                f"corrupt checkpoint {source}: its key is task {str(task_name)!r} but the "
                f"document holds task {str(stored_task)!r}"
            )
        self._keep(task_name, document, checkpoint.epoch or 0, source)

    def _keep(self, task_name: TaskName, document: bytes, epoch: int, source: str) -> None:
        """Keep ``document`` as the task's latest, unless it comes from an older owner epoch
        than the one kept (a container that had lost the task wrote it: it does not count)."""
        kept = self._epochs.get(task_name)
        if kept is not None and epoch < kept:
            log.warning(
                "stale_checkpoint_ignored",
                task=task_name,
                epoch=epoch,
                newest_epoch=kept,
                record=source,
            )
            return
        self._documents[task_name] = document
        self._epochs[task_name] = epoch

    # -- reading and writing --------------------------------------------------------------

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        document = self._documents.get(TaskName(task_name))
        if document is None:
            return None
        return decode_checkpoint(document, f"checkpoint of task {str(task_name)!r}")[1]

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        producer = self._producer
        if producer is None:
            raise CheckpointError(
                f"cannot write the checkpoint of task {str(task_name)!r} to {self.ssp}: "
                "the checkpoint manager has not started"
            )
        task = TaskName(task_name)
        document = encode_checkpoint(task, checkpoint)
        # One write per task at a time, so the last one written is the one kept.
        lock = self._locks.get(task)
        if lock is None:
            lock = self._locks[task] = asyncio.Lock()
        async with lock:
            try:
                producer.send(
                    SystemStream(self.ssp.system, self.stream), 0, task.encode("utf-8"), document
                )
                await producer.flush()
            except StreamSystemError as exc:
                raise CheckpointError(
                    f"cannot write the checkpoint of task {str(task)!r} to {self.ssp}: {exc}"
                ) from exc
            self._documents[task] = document

    # -- following other containers' writes ----------------------------------------------

    async def refresh(self) -> None:
        follower = self._follower
        try:
            if follower is None:
                follower = await self._follow()
                if follower is None:
                    return
            while True:
                polled = await follower.poll(self._followed, 10_000, 0.05)
                batches = [batch for batch in polled.values() if batch]
                if not batches:
                    return
                for batch in batches:
                    for envelope in batch:
                        if not envelope.is_end_of_stream:
                            self._apply(envelope)
        except StreamSystemError as exc:
            raise CheckpointError(f"cannot read checkpoint stream {self.ssp}: {exc}") from exc

    async def _follow(self) -> SystemConsumer | None:
        """The consumer ``refresh`` reads with, from where ``start`` stopped."""
        follower = self.system_factory.get_committed_consumer()
        self._followed = [self.ssp]
        follower.register(self.ssp, self._read_to_offset, OffsetDefault.OLDEST)
        await follower.start()
        self._follower = follower
        return follower

    # -- stop -----------------------------------------------------------------------------

    async def stop(self) -> None:
        await self._stop(abandon=False)

    async def abandon(self) -> None:
        """As ``stop``, a checkpoint record not yet delivered dropped (a write under way)."""
        await self._stop(abandon=True)

    async def _stop(self, *, abandon: bool) -> None:
        producer, self._producer = self._producer, None
        admin, self._admin = self._admin, None
        follower, self._follower = self._follower, None
        try:
            if follower is not None:
                await follower.stop()
            if producer is not None:
                await (producer.abandon() if abandon else producer.stop())
        finally:
            if admin is not None:
                await admin.stop()


__all__ = [
    "MAX_STREAM_NAME_LENGTH",
    "STREAM_CONFIG",
    "StreamCheckpointManager",
    "checkpoint_stream_name",
]
