"""A task's commit protocol, which its TaskInstance runs while nothing is in flight:

1. flush the producers: every output of the covered messages is durable;
2. flush the stores, note how far their changelogs got, and snapshot the RocksDB stores
   (``task.transactional.state.checkpoint.enabled``): a logged store's snapshot holds
   exactly what the changelog holds up to the noted offset, one without changelog's exactly
   what the checkpoint covers (the memtable is written out in a thread: the loop, and so the
   other tasks, wait only for RocksDB's checkpoint, ``storage/snapshots.py``);
3. write the checkpoint: the last fully processed offset of each partition, with the
   changelog offsets, the snapshots and the control bookkeeping consistent with it (under
   exactly-once the writer commits the task's transaction);
4. once it is written, remove the snapshots older than the ones it names (until then a
   crash restarts from the previous checkpoint, which needs its own).

The checkpoint's input offsets are copied to the job's consumer group (``checkpoint/group.py``)
one past the last processed, or at the consumer's position (``fetched_positions``) where that
is further and the task has processed all the consumer handed over of the partition.

A commit waits for the servers up to ``within(final)`` seconds (a kafka system's
``connect.timeout.ms``; ``final``: the commit of a task whose inputs all ended), as a clean
stop's commits do (``shutdown.py``): past it the commit fails naming the step that got no
answer, rather than hold the job, silent, for as long as its brokers are away.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from samzapy.api.errors import StreamSystemError, TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.writer import Fetched, TaskCheckpointWriter
from samzapy.container.clock import within_bound
from samzapy.container.collector import OutputRouter
from samzapy.container.inputs import InputQueue
from samzapy.control.reconcile import TaskControl
from samzapy.storage.task_stores import TaskStores
from samzapy.system.ports import SystemConsumer

#: How often a final commit checks its bound.
_CHECK_S = 0.05


class TaskCommit:
    """Commits one task: its outputs, its stores and its checkpoint."""

    def __init__(
        self,
        *,
        name: TaskName,
        router: OutputRouter,
        checkpoints: TaskCheckpointWriter,
        trackers: Mapping[SystemStreamPartition, OffsetTracker],
        stores: TaskStores | None,
        control: TaskControl,
        partition_counts: Mapping[SystemStream, int],
        within: Callable[[bool], float | None] = lambda final: None,
    ) -> None:
        """``within(final)``: how long a commit may wait for the servers (None: no bound so
        far)."""
        self._name = name
        self._router = router
        self._checkpoints = checkpoints
        self._trackers = trackers
        self._stores = stores if stores else None
        self._control = control
        self._partition_counts = partition_counts
        self._within = within
        #: What the commit under way is doing (named when a final commit is cut short).
        self._step = ""

    async def __call__(self, *, final: bool = False) -> None:
        await within_bound(
            self._commit(),
            lambda: self._within(final),
            lambda within_s: StreamSystemError(
                f"task {str(self._name)!r} could not commit"
                f"{' after end-of-stream' if final else ''}: {self._step} got no answer "
                f"within {within_s:g} s (the longest connect.timeout.ms of the job's "
                "systems): its brokers do not answer; nothing more is committed, the "
                "restart resumes from the last checkpoint"
            ),
            check_s=_CHECK_S,
        )

    async def _commit(self) -> None:
        # 1. Producers.
        self._step = "flushing its outputs"
        try:
            await self._router.flush()
        except TaskFencedError as exc:  # under exactly-once: the task's own producer
            raise self._fenced(exc) from exc
        # 2. Stores.
        stores = self._stores
        changelog_offsets: dict[str, str] = {}
        snapshots: dict[str, str] = {}
        if stores is not None:
            self._step = "flushing its stores and their changelogs"
            await stores.flush()  # caches written back, their changelog records durable
            changelog_offsets = await stores.changelog_offsets()
            if self._checkpoints.enabled:
                snapshots = await stores.snapshot(changelog_offsets)
        # 3. Checkpoint.
        control = self._control
        checkpoint = Checkpoint(
            {s: last for s, t in self._trackers.items() if (last := t.last_processed) is not None},
            self._partition_counts,
            changelog_offsets,
            control.to_json() if control.checkpointed else None,
            snapshots=snapshots,
        )
        self._step = "writing its checkpoint"
        try:
            written = await self._checkpoints.write(checkpoint)
        except TaskFencedError as exc:
            raise self._fenced(exc) from exc
        # 4. Older snapshots.
        if written and snapshots and stores is not None:
            await stores.snapshots_committed(snapshots)

    def _fenced(self, exc: TaskFencedError) -> TaskFencedError:
        """``exc`` naming the task and its owner epoch (the log's ``task`` field)."""
        return TaskFencedError(
            f"task {self._name!r}: {exc}", task_name=self._name, epoch=self._checkpoints.epoch
        )


def fetched_positions(
    inputs: Sequence[tuple[SystemStreamPartition, SystemConsumer, OffsetTracker, InputQueue]],
) -> Fetched:
    """Where the consumer will fetch next, for each of a task's input partitions whose every
    message handed over the task has processed (none queued, none in flight): every offset
    before it was processed or holds no message for the task (a transaction's marker, an
    aborted record read committed). Read at a commit, while nothing is in flight: the
    consumer's coroutine hands a fetch over to the queues without yielding in between."""

    def fetched() -> dict[SystemStreamPartition, int]:
        out = {}
        for ssp, consumer, tracker, queue in inputs:
            if (
                not queue.queue
                and tracker.oldest_offset() is None
                and (position := consumer.fetch_offset(ssp)) is not None
            ):
                out[ssp] = position
        return out

    return fetched


__all__ = ["TaskCommit", "fetched_positions"]
