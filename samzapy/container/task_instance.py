"""TaskInstance: one task's lifecycle, barriers, control-message effects, and its commit.

The task's calls run in its slots (``slots.py``). Window, commit, watermark and end-of-stream
are *barriers*: once one is due, no slot starts a new call; the slot that sees the task idle
(nothing in flight) runs the barrier, then all slots resume. So process, window, on_watermark
and commit never overlap, a checkpoint covers only completed work, and a control message sent
downstream follows every output of the messages before it. What is due is one bit field
(``SlotState.due``), the only flag the slots test.

Control messages read from framed streams are reconciled by the task's ``TaskControl`` as the
slots take them, in offset order with the messages around them; their effects (a partition
ended, a watermark moved, an intermediate stream to end) are acted on at the next barrier.

A task with bootstrap inputs takes only their messages until they reached their heads; a
barrier then releases its other inputs (``bootstrap.py``). The instance reports upward only
through the ``TaskListener`` it is given (the run loop, ``coordinator.py``).
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from collections.abc import Callable, Collection, Coroutine, Mapping
from typing import Any

import structlog

from samzapy.api.context import MessageCollector, TaskContext
from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.api.task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    WindowableTask,
)
from samzapy.checkpoint.offsets import OffsetTracker, oldest_in_flight
from samzapy.checkpoint.writer import TaskCheckpointWriter
from samzapy.container.bootstrap import CaughtUp, TaskBootstrap
from samzapy.container.clock import Clock
from samzapy.container.collector import OutputRouter
from samzapy.container.commit import TaskCommit
from samzapy.container.coordinator import TaskCoordinatorImpl, TaskListener
from samzapy.container.drops import Drops
from samzapy.container.hooks import TaskHooks
from samzapy.container.inputs import NO_OFFSET, ControlEnvelope, TaskInputs
from samzapy.container.origins import clear_cursor, committable, log_dropped, with_origins
from samzapy.container.progress import TaskProgress
from samzapy.container.slots import SlotContext, SlotState, async_slot, inline_slot, pool_slot
from samzapy.container.task_collector import MessageInProgress
from samzapy.container.watermarks import TaskWatermarks
from samzapy.control.reconcile import TaskControl
from samzapy.control.wire import EndOfStreamMessage, WatermarkMessage, encode_control
from samzapy.metrics.registry import Timer
from samzapy.storage.task_stores import TaskStores

log = structlog.get_logger("samzapy.task")

# The bits of ``TaskInstance._due``: what the next barrier must do.
_WINDOW = 1
_COMMIT = 2
_WATERMARK = 4  # give on_watermark the input watermark, send the output watermarks
_ENDS = 8  # send end-of-stream to the intermediate outputs whose upstream partitions ended
_END = 16  # every input ended: on_end_of_stream, commit, finish
_STOP = 32  # start no new call; the slots exit
_FINISHED = 64
_RUNNING = 128  # a barrier is running: the other slots wait for it
_BOOTSTRAPPED = 256  # the bootstrap inputs reached their heads: release the other inputs
_EXIT = _STOP | _FINISHED
_BARRIERS = _WINDOW | _COMMIT | _WATERMARK | _ENDS | _END | _BOOTSTRAPPED


class TaskInstance:
    """Runs one task under Samza's guarantees."""

    def __init__(
        self,
        *,
        name: TaskName,
        task: Any,
        inputs: TaskInputs,
        trackers: dict[SystemStreamPartition, OffsetTracker],
        collector: MessageCollector,
        router: OutputRouter,
        clock: Clock,
        checkpoints: TaskCheckpointWriter,
        listener: TaskListener,
        max_concurrency: int = 1,
        executor: concurrent.futures.Executor | None = None,
        stores: TaskStores | None = None,
        control: TaskControl | None = None,
        task_count: int = 1,
        partition_counts: Mapping[SystemStream, int] | None = None,
        latency: Timer | None = None,
        commit_latency: Timer | None = None,
        track_call_starts: bool = False,
        drops: Drops | None = None,
        bootstrap: TaskBootstrap | None = None,
        current: MessageInProgress | None = None,
        commit_within: Callable[[bool], float | None] = lambda final: None,
    ) -> None:
        """``control``: the control-message bookkeeping; ``task_count``: what this task's own
        control messages announce (the job's task count); ``partition_counts``: recorded in
        every checkpoint; ``track_call_starts``: note when each async call started (callback
        timeouts); ``bootstrap``: its bootstrap partitions, if any; ``current``: what the slots
        tell the task's collector of the message each call is for; ``commit_within``: the
        bound of a commit, of the one after end-of-stream or not (``commit.py``)."""
        self.name = name
        is_async = isinstance(task, AsyncStreamTask)
        if not is_async and not isinstance(task, StreamTask):
            raise ConfigError(
                f"task.class: {type(task).__qualname__} must subclass samzapy.StreamTask or "
                "samzapy.AsyncStreamTask",
                key="task.class",
            )
        self._task = task
        self._is_async = is_async
        self._inputs = inputs
        self._trackers = trackers
        self._collector = collector
        self._coordinator = TaskCoordinatorImpl(name, self.request_commit, listener)
        self._router = router
        self._clock = clock
        self._listener = listener
        self._max_concurrency = max_concurrency if is_async else 1
        self._executor = None if is_async else executor
        self._stores = stores if stores else None
        self._close_iterators = self._stores.close_iterators if self._stores else None
        self.hooks = TaskHooks(name, self._executor, self._close_iterators or (lambda: None))
        self._control = control if control is not None else TaskControl(carrying=())
        self._task_count = task_count
        self._commit = TaskCommit(
            name=name,
            router=router,
            checkpoints=checkpoints,
            trackers=trackers,
            stores=self._stores,
            control=self._control,
            partition_counts=dict(partition_counts or {}),
            within=commit_within,
        )
        self._latency = latency if latency is not None else Timer()
        self._commit_latency = commit_latency if commit_latency is not None else Timer()
        self._track_call_starts = track_call_starts
        self._windows = 0
        self._commits = 0
        self._dropped_logged = 0
        self._committed_at: float | None = None
        self._committed_processed = 0
        self._watermarks = TaskWatermarks(self._control, task, str(name))
        self._initialized = False
        self._closed = False
        #: Every input partition had ended by the last checkpoint: the final commit came
        #: after on_end_of_stream and the ends sent downstream, so neither is repeated.
        self._ended_before = inputs.all_ended
        self._state = SlotState(
            (_ENDS if self._control.outputs else 0) | (_END if inputs.all_ended else 0)
        )
        if self._watermarks.note():  # what a restored checkpoint says is due (a restart)
            self._state.due |= _WATERMARK
        self._bootstrap = bootstrap  # set while it reads its bootstrap inputs to their heads
        if bootstrap is not None and bootstrap.start(inputs, clock.now()):
            self._state.due |= _BOOTSTRAPPED  # nothing to catch up on: said at the first barrier
        inputs.wake_with(self._state.wake)
        self._slot_context = SlotContext(
            name=name,
            state=self._state,
            inputs=inputs,
            trackers=trackers,
            collector=collector,
            coordinator=self._coordinator,
            latency=self._latency,
            clock=clock,
            backpressure=router.backpressure,
            barrier=self._barrier,
            on_control=self._on_control,
            fail=listener.fail,
            close_iterators=self._close_iterators,
            executor=self._executor,
            track_call_starts=track_call_starts,
            drops=drops,
            current=current if current is not None else MessageInProgress(is_async=is_async),
        )

    # -- what the run loop and the container see ------------------------------------------------

    @property
    def stores(self) -> TaskStores | None:
        return self._stores

    @property
    def finished(self) -> bool:
        return bool(self._state.due & _FINISHED)

    def progress(self) -> TaskProgress:
        return TaskProgress(
            name=self.name,
            processed=self._state.processed,
            in_flight=self._state.inflight,
            windows=self._windows,
            commits=self._commits,
            buffered=self._inputs.buffered,
            position=self._position(),
            barrier_pending=bool(self._state.due & (_BARRIERS | _RUNNING)),
            backpressured=self._router.backpressure() is not None,
            stopping=bool(self._state.due & _STOP),
            finished=bool(self._state.due & _FINISHED),
            committed_at=self._committed_at,
            committed_processed=self._committed_processed,
            bootstrapping=self._bootstrap is not None,
        )

    def _position(self) -> tuple[SystemStreamPartition, str] | None:
        """The message the task is on: its oldest call in flight, a sync call's (on the
        thread pool, the one the stall watchdog sees), else the next one queued."""
        oldest = self.oldest_in_flight()
        if oldest is not None:
            return oldest[1:]
        if (env := self._slot_context.current.env) is not None:
            return env.system_stream_partition, env.offset
        return self._inputs.head()

    def pooled(self) -> list[concurrent.futures.Future[Any]]:
        """Its calls still running on the thread pool (a stop or a failure gave them up)."""
        return [c for c in (self._state.pooled, self.hooks.pooled) if c and not c.done()]

    def oldest_in_flight(self) -> tuple[float, SystemStreamPartition, str] | None:
        """When the longest-running call started, and its partition and offset."""
        return oldest_in_flight(self._trackers)

    # -- requests -------------------------------------------------------------------------------

    def request_window(self) -> None:
        if isinstance(self._task, WindowableTask):
            self._request(_WINDOW)

    def request_commit(self) -> None:
        self._request(_COMMIT)

    def _request(self, bit: int) -> None:
        if not self._state.due & _FINISHED:
            self._state.due |= bit
            self._state.wake()

    def drain_only(self, ssps: Collection[SystemStreamPartition]) -> None:
        """Take messages only from ``ssps`` from now on (a stop draining memory intermediate
        streams); the others wait, uncommitted, for the restart. A bootstrap ends here: its
        release would take them again."""
        self._bootstrap = None
        self._state.due &= ~_BOOTSTRAPPED
        self._inputs.hold_all_but(ssps)

    def stop(self) -> None:
        """Start no new call; slots return once their current call completes."""
        self._state.due |= _STOP
        self._state.wake()

    def slots(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """The coroutine functions to run for this task, one per permit."""
        ctx = self._slot_context
        task = self._task
        process = task.process_async if self._is_async else task.process
        process, ctx = with_origins(process, ctx, self._control.reader, is_async=self._is_async)
        if self._is_async:
            return [functools.partial(async_slot, ctx, process)] * self._max_concurrency
        if self._executor is not None:
            return [functools.partial(pool_slot, ctx, process)]
        return [functools.partial(inline_slot, ctx, process)]

    # -- lifecycle ------------------------------------------------------------------------------

    async def init(self, context: TaskContext) -> None:
        self._initialized = True
        if isinstance(self._task, InitableTask):
            await self.hooks.call("init", self._task.init, context)

    async def close(self) -> None:
        """Call ``close`` once, if ``init`` was reached (its sends after an end fail too); a
        pooled call still running was given up, its sends dropped (``task_collector.py``)."""
        self._slot_context.current.closed = True
        try:
            if self._initialized and not self._closed and isinstance(self._task, ClosableTask):
                self._closed = True
                await self.hooks.call("close", self._task.close)
        finally:
            self._router.forget_ends(self.name)  # a later instance writes them again

    async def close_stores(self, *, clean: bool) -> None:
        """Close the stores; ``clean`` after the final commit (they are marked as matching
        it, so a restart keeps them)."""
        if self._stores:
            offsets = await self._stores.changelog_offsets() if clean else None
            self._stores.close(offsets)

    @property
    def duplicates_dropped(self) -> int | None:
        """Records of framed inputs dropped as copies of ones applied (None: no such input)."""
        reader = self._control.reader
        return None if reader is None else reader.dropped

    async def commit(self, *, final: bool = False) -> None:
        """The commit protocol (``commit.py``), run while nothing is in flight."""
        reader = self._control.reader
        if reader is not None and not committable(reader, self._state.inflight, self.name):
            return
        started = time.perf_counter_ns()
        await self._commit(final=final)
        if reader is not None:
            self._dropped_logged = log_dropped(reader, self._dropped_logged, self.name)
        self._commits += 1
        self._committed_at = self._clock.now()
        self._committed_processed = self._state.processed
        self._commit_latency.update_ns(time.perf_counter_ns() - started)

    # -- control messages -------------------------------------------------------------------------

    def _on_control(self, env: ControlEnvelope) -> None:
        """Take a control envelope: a bounded partition's end, or a control message of a
        framed stream (reconciled now, acted on at the next barrier)."""
        ssp = env.system_stream_partition
        if type(env) is CaughtUp:
            return self._caught_up(ssp)
        message = env.message
        if message is None:
            self._input_ended(ssp)
            return
        if env.offset != NO_OFFSET:
            tracker = self._trackers[ssp]
            tracker.completed(tracker.invoked(env.offset))
        if self._control.receive(ssp, message):
            log.info("control_end_of_stream_reconciled", task=self.name, ssp=str(ssp))
            self._input_ended(ssp)
        else:  # a watermark, or an upstream task's end: either may move the watermark
            self._note_watermarks()

    def _note_watermarks(self) -> None:
        """Decide now, while the partitions are as the control messages left them, which
        watermarks moved; they are given and sent at the next barrier."""
        if self._watermarks.note():
            self._state.due |= _WATERMARK

    def _caught_up(self, ssp: SystemStreamPartition) -> None:
        """``ssp`` reached its bootstrap head, or ended: after the last, the barrier releases."""
        if self._bootstrap is not None and self._bootstrap.caught_up(ssp):
            self._state.due |= _BOOTSTRAPPED

    def _input_ended(self, ssp: SystemStreamPartition) -> None:
        self._inputs.end(ssp)
        self._control.partition_ended(ssp)
        log.info("partition_ended", task=self.name, ssp=str(ssp))
        self._caught_up(ssp)
        self._note_watermarks()  # a lagging partition that ended no longer holds others back
        self._state.due |= _ENDS | (_END if self._inputs.all_ended else 0)

    async def _watermark(self) -> None:
        """Give the task its watermarks that moved, then send the output watermarks."""
        await self._watermarks.deliver(
            self.hooks.call_at_barrier,
            self._collector,
            self._coordinator,
            lambda stream, timestamp, idle: self._router.broadcast_control(
                stream,
                encode_control(WatermarkMessage(str(self.name), self._task_count, timestamp, idle)),
            ),
        )

    async def _send_ends(self) -> None:
        """Tell the intermediate streams whose upstream partitions all ended that this task
        will write nothing more to them (the router refuses what it sends them from now on)."""
        for stream in self._control.take_ended_outputs():
            ended = encode_control(EndOfStreamMessage(str(self.name), self._task_count))
            self._router.broadcast_control(stream, ended, ended_by=self.name)
            log.info("end_of_stream_sent", task=self.name, stream=str(stream))

    # -- barriers -------------------------------------------------------------------------------

    async def _barrier(self) -> bool:
        """Run what is due while nothing is in flight; False tells the slot to exit."""
        due = self._state.due
        if due & _EXIT:
            return False
        if self._state.inflight or due & _RUNNING:
            await self._state.wait()
            return True
        self._state.due |= _RUNNING
        if self._is_async:
            clear_cursor()  # what a barrier sends is caused by no one message
        try:
            if due & _END:
                await self._end_of_stream()
                return False
            for bit, action in self._barrier_actions:
                if self._state.due & bit:
                    self._state.due &= ~bit
                    await action(self)
        finally:
            self._state.due &= ~_RUNNING
            self._state.wake()
        return True

    async def _window(self) -> None:
        assert isinstance(self._task, WindowableTask)
        await self.hooks.call_at_barrier(
            "window", self._task.window, self._collector, self._coordinator
        )
        self._windows += 1

    async def _bootstrapped(self) -> None:
        """Nothing is in flight: every bootstrap message before the heads was processed."""
        assert self._bootstrap is not None
        done = self._bootstrap.release(self._inputs, self._state.processed, self._clock.now())
        self._bootstrap = None
        log.info("bootstrap_completed", task=self.name, **done)

    #: In the order they run: the bootstrap, the watermark, the ends it allows, window, commit.
    _barrier_actions: tuple[tuple[int, Callable[[TaskInstance], Coroutine[Any, Any, None]]], ...]
    _barrier_actions = (
        (_BOOTSTRAPPED, _bootstrapped),
        (_WATERMARK, _watermark),
        (_ENDS, _send_ends),
        (_WINDOW, _window),
        (_COMMIT, commit),
    )

    async def _end_of_stream(self) -> None:
        """Every input partition ended and nothing is in flight: tell the task, end its
        intermediate outputs, commit, finish."""
        if self._ended_before:
            self._state.due |= _FINISHED
            log.info("task_ended", task=self.name, processed=0, ended_before_restart=True)
            self._listener.task_finished(self.name)
            return
        if self._state.due & _WATERMARK:
            self._state.due &= ~_WATERMARK
            await self._watermark()
        if isinstance(self._task, EndOfStreamListenerTask):
            await self.hooks.call(
                "on_end_of_stream", self._task.on_end_of_stream, self._collector, self._coordinator
            )
        await self._send_ends()
        await self.commit(final=True)
        self._state.due |= _FINISHED
        log.info("task_ended", task=self.name, processed=self._state.processed)
        self._listener.task_finished(self.name)


__all__ = ["TaskInstance"]
