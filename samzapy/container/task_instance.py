"""One task instance: its input queues, its in-flight work and its exclusive actions.

A task instance runs as one coroutine ("slot") per permitted concurrent call: one for sync
tasks and ``task.max.concurrency`` for async tasks. A slot takes the next message (round-robin
over the task's input partitions), invokes the task and awaits the result inline, so no
asyncio task is created per message; the slot is the permit, released when the awaitable
completes. Because a slot takes and invokes in one synchronous step, invocations happen in
offset order per partition.

Window, commit, watermark and end-of-stream are *barriers*: once one is due, no slot starts a
new call; the slot that sees the task idle (nothing in flight) runs the barrier, then all
slots resume. So process, window, on_watermark and commit never overlap, a checkpoint covers
only completed work, and a control message sent downstream follows every output of the
messages before it.

Control messages read from framed streams are reconciled by the task's ``TaskControl`` as the
slots take them, in offset order with the messages around them; their effects (a partition
ended, a watermark moved, an intermediate stream to end) are acted on at the next barrier.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
import types
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from samzapy.api.context import RequestScope
from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import ConfigError, TaskError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.api.task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    WatermarkListenerTask,
    WindowableTask,
)
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.container.consumers import InputQueue
from samzapy.container.stores import TaskStores
from samzapy.control.reconcile import TaskControl
from samzapy.control.wire import EndOfStreamMessage, WatermarkMessage, encode_control
from samzapy.metrics.registry import Timer

if TYPE_CHECKING:
    from samzapy.api.context import MessageCollector
    from samzapy.container.run_loop import RunLoop

log = structlog.get_logger("samzapy.task")

#: How many messages a sync task processes before it yields to the other tasks.
SYNC_TURN = 32


class TaskCoordinatorImpl:
    """A task's TaskCoordinator: requests take effect once the current call ends."""

    __slots__ = ("_instance",)

    def __init__(self, instance: TaskInstance) -> None:
        self._instance = instance

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        self._instance.run_loop.request_commit(self._instance, scope)

    def shutdown(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        self._instance.run_loop.request_shutdown(self._instance, scope)


class TaskInstance:
    """Runs one task under Samza's guarantees."""

    def __init__(
        self,
        *,
        name: TaskName,
        task: Any,
        queues: Sequence[InputQueue],
        trackers: dict[SystemStreamPartition, OffsetTracker],
        collector: MessageCollector,
        run_loop: RunLoop,
        max_concurrency: int,
        executor: concurrent.futures.Executor | None,
        latency: Timer | None = None,
        stores: TaskStores | None = None,
        control: TaskControl | None = None,
        task_count: int = 1,
    ) -> None:
        self.name = name
        self.task = task
        self.queues = list(queues)
        self.trackers = trackers
        self.collector = collector
        self.coordinator = TaskCoordinatorImpl(self)
        self.run_loop = run_loop
        #: The task's key-value stores (empty when it has none).
        self.stores = stores
        self.is_async = isinstance(task, AsyncStreamTask)
        if not self.is_async and not isinstance(task, StreamTask):
            raise ConfigError(
                f"task.class: {type(task).__qualname__} must subclass samzapy.StreamTask or "
                "samzapy.AsyncStreamTask",
                key="task.class",
            )
        self.is_windowable = isinstance(task, WindowableTask)
        #: Control-message bookkeeping; ``task_count`` is what this task's own control
        #: messages announce (the job's task count).
        self.control = control if control is not None else TaskControl(carrying=())
        self.task_count = task_count
        self.max_concurrency = max_concurrency if self.is_async else 1
        self.executor = None if self.is_async else executor
        self._active = list(self.queues)
        self._rr = 0
        self._waiter: asyncio.Future[None] | None = None
        self.inflight = 0
        self.processed = 0
        self.windows = 0
        self.commits = 0
        #: Process latency: the time from invocation to completion of each message.
        self.latency = latency if latency is not None else Timer()
        # Flags. ``attention`` is True whenever any of the others is: slots test only it.
        self.attention = False
        self.window_due = False
        self.commit_due = False
        self.end_pending = False
        self.watermark_due = False
        self._input_watermark_due: int | None = None
        self._output_watermarks_due: dict[SystemStream, int] = {}
        self.ends_due = bool(self.control.outputs)
        self.stopping = False
        self.shutdown_requested = False
        self.finished = False
        self._in_barrier = False
        self.initialized = False
        self.closed = False
        for q in self.queues:
            q.waker = self.wake
        # Partitions a restored checkpoint says have ended are not read again.
        for q in list(self._active):
            if q.ssp in self.control.ended:
                q.ended = True
                self._active.remove(q)
        #: Every input partition had ended by the last checkpoint: the final commit came
        #: after on_end_of_stream and the ends sent downstream, so neither is repeated.
        self.ended_before = not self._active
        if not self._active:
            self.end_pending = True
        self.attention = self.ends_due or self.end_pending

    # -- signals from the run loop -------------------------------------------------------------

    def wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def request_window(self) -> None:
        if self.is_windowable and not self.finished:
            self.window_due = True
            self.attention = True
            self.wake()

    def request_commit(self) -> None:
        if not self.finished:
            self.commit_due = True
            self.attention = True
            self.wake()

    def stop(self) -> None:
        """Start no new call; slots return once their current call completes."""
        self.stopping = True
        self.attention = True
        self.wake()

    def slots(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """The coroutine functions to run for this task, one per permit."""
        if self.is_async:
            return [self._async_slot] * self.max_concurrency
        if self.executor is not None:
            return [self._pool_slot]
        return [self._inline_slot]

    # -- lifecycle calls -----------------------------------------------------------------------

    async def init(self, context: Any) -> None:
        self.initialized = True
        if isinstance(self.task, InitableTask):
            await self._call_hook("init", self.task.init, context)

    async def close(self) -> None:
        """Call ``close`` once, if ``init`` was reached."""
        if self.closed or not self.initialized:
            return
        self.closed = True
        if isinstance(self.task, ClosableTask):
            await self._call_hook("close", self.task.close)

    async def _call_hook(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
            if self.stores:
                self.stores.close_iterators()
        except Exception as exc:
            raise TaskError(
                f"{what}() of task {self.name!r} failed: {exc!r}", task_name=self.name
            ) from exc

    async def _call_in_executor(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self.executor, fn, *args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raise TaskError(
                f"{what}() of task {self.name!r} failed: {exc!r}", task_name=self.name
            ) from exc

    # -- choosing ------------------------------------------------------------------------------

    def _choose(self) -> IncomingMessageEnvelope | None:
        """The next envelope, round-robin over the task's partitions that have one."""
        active = self._active
        n = len(active)
        if n == 1:
            q = active[0]
            queue = q.queue
            if not queue:
                return None
            env = queue.popleft()
            if len(queue) == q.low_mark:
                self.run_loop.consumers.space_freed()
            return env
        for i in range(n):
            idx = (self._rr + i) % n
            q = active[idx]
            if q.queue:
                self._rr = idx + 1
                env = q.queue.popleft()
                if len(q.queue) == q.low_mark:
                    self.run_loop.consumers.space_freed()
                return env
        return None

    def _on_control(self, env: IncomingMessageEnvelope) -> None:
        """Take a control envelope: a bounded partition's end, or a control message of a
        framed stream (reconciled now, acted on at the next barrier)."""
        ssp = env.system_stream_partition
        if env.is_end_of_stream:
            self._input_ended(ssp)
            return
        tracker = self.trackers[ssp]
        tracker.completed(tracker.invoked(env.offset))
        if self.control.receive(ssp, env.control):
            log.info("control_end_of_stream_reconciled", task=self.name, ssp=str(ssp))
            self._input_ended(ssp)
        elif isinstance(env.control, WatermarkMessage):
            self._note_watermarks()

    def _note_watermarks(self) -> None:
        """Decide now, while the partitions are as the control messages left them, which
        watermarks moved; they are given and sent at the next barrier."""
        control = self.control
        watermark = control.advance_input_watermark()
        if watermark is not None:
            self._input_watermark_due = watermark
        moved = control.advance_output_watermarks()
        if moved:
            self._output_watermarks_due.update(moved)
        if watermark is not None or moved:
            self.watermark_due = True
            self.attention = True

    def _input_ended(self, ssp: SystemStreamPartition) -> None:
        for q in self._active:
            if q.ssp == ssp:
                q.ended = True
                q.queue.clear()  # records after a reconciled end are upstream duplicates
                self._active.remove(q)
                break
        self.control.partition_ended(ssp)
        self.run_loop.consumers.partition_ended(ssp)
        log.info("partition_ended", task=self.name, ssp=str(ssp))
        self._note_watermarks()  # a lagging partition that ended no longer holds others back
        self.ends_due = True
        self.attention = True
        if not self._active:
            self.end_pending = True

    async def _wait(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._waiter = asyncio.get_running_loop().create_future()
        await waiter

    # -- barriers ------------------------------------------------------------------------------

    async def _barrier(self) -> bool:
        """Run what is due while nothing is in flight; False tells the slot to exit."""
        if self.stopping or self.finished:
            return False
        if self.inflight or self._in_barrier:
            await self._wait()
            return True
        self._in_barrier = True
        try:
            if self.end_pending:
                await self._end_of_stream()
                return False
            if self.watermark_due:
                self.watermark_due = False
                await self._watermark()
            if self.ends_due:
                self.ends_due = False
                self._send_ends()
            if self.window_due:
                self.window_due = False
                await self._window()
            if self.commit_due:
                self.commit_due = False
                await self.run_loop.commit(self)
                self.commits += 1
        finally:
            self._in_barrier = False
            self.attention = (
                self.window_due
                or self.commit_due
                or self.watermark_due
                or self.ends_due
                or self.end_pending
                or self.stopping
                or self.finished
            )
            self.wake()
        return True

    async def _call_barrier_hook(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """A hook run at a barrier: on the thread pool when sync tasks use one."""
        if self.executor is not None:
            await self._call_in_executor(what, fn, *args)
        else:
            await self._call_hook(what, fn, *args)

    async def _window(self) -> None:
        assert isinstance(self.task, WindowableTask)
        await self._call_barrier_hook("window", self.task.window, self.collector, self.coordinator)
        self.windows += 1

    async def _watermark(self) -> None:
        """Give the task its input watermark if it moved, then send the output watermarks."""
        watermark, self._input_watermark_due = self._input_watermark_due, None
        moved, self._output_watermarks_due = self._output_watermarks_due, {}
        if watermark is not None:
            log.debug("watermark_advanced", task=self.name, watermark=watermark)
            if isinstance(self.task, WatermarkListenerTask):
                await self._call_barrier_hook(
                    "on_watermark",
                    self.task.on_watermark,
                    watermark,
                    self.collector,
                    self.coordinator,
                )
        for stream, timestamp in moved.items():
            self._broadcast(stream, WatermarkMessage(str(self.name), self.task_count, timestamp))

    def _send_ends(self) -> None:
        """Tell the intermediate streams whose upstream partitions all ended that this task
        will write nothing more to them."""
        for stream in self.control.take_ended_outputs():
            self._broadcast(stream, EndOfStreamMessage(str(self.name), self.task_count))
            log.info("end_of_stream_sent", task=self.name, stream=str(stream))

    def _broadcast(
        self, stream: SystemStream, message: WatermarkMessage | EndOfStreamMessage
    ) -> None:
        self.run_loop.router.broadcast_control(stream, encode_control(message))

    async def _end_of_stream(self) -> None:
        """Every input partition ended and nothing is in flight: tell the task, end its
        intermediate outputs, commit, finish."""
        if self.ended_before:
            self.end_pending = False
            self.finished = True
            self.attention = True
            log.info("task_ended", task=self.name, processed=0, ended_before_restart=True)
            self.run_loop.task_finished(self)
            return
        if self.watermark_due:
            self.watermark_due = False
            await self._watermark()
        if isinstance(self.task, EndOfStreamListenerTask):
            await self._call_hook(
                "on_end_of_stream", self.task.on_end_of_stream, self.collector, self.coordinator
            )
        self._send_ends()
        self.end_pending = False
        await self.run_loop.commit(self)
        self.commits += 1
        self.finished = True
        self.attention = True
        log.info("task_ended", task=self.name, processed=self.processed)
        self.run_loop.task_finished(self)

    # -- slots ---------------------------------------------------------------------------------

    def _failed(self, exc: BaseException, env: IncomingMessageEnvelope, what: str) -> TaskError:
        ssp = env.system_stream_partition
        error = TaskError(
            f"{what} of task {self.name!r} failed on {ssp} at offset {env.offset}: {exc!r}",
            task_name=self.name,
            ssp=ssp,
            offset=env.offset,
        )
        error.__cause__ = exc
        return error

    # The three slots repeat their few lines of preamble (barrier, backpressure, choose) on
    # purpose: a shared coroutine would cost a coroutine per message on the hot path.

    async def _inline_slot(self) -> None:
        """A sync task on the loop thread: process up to SYNC_TURN messages, then yield."""
        process = self.task.process
        collector, coordinator = self.collector, self.coordinator
        trackers = self.trackers
        record = self.latency.update_ns
        backpressure = self.run_loop.router.backpressure
        stores = self.stores if self.stores else None
        clock = time.perf_counter_ns
        while True:
            if self.attention and not await self._barrier():
                return
            if self.attention:
                continue
            if (held := backpressure()) is not None:
                await held
                continue
            env = None
            n = 0
            while n < SYNC_TURN:
                env = self._choose()
                if env is None:
                    break
                if env.control is not None:
                    self._on_control(env)
                    if self.attention:
                        break
                    continue
                try:
                    t0 = clock()
                    process(env, collector, coordinator)
                    record(clock() - t0)
                    if stores is not None:
                        stores.close_iterators()
                except Exception as exc:
                    self.processed += n
                    self.run_loop.fail(self._failed(exc, env, "process()"))
                    return
                trackers[env.system_stream_partition].last_processed = env.offset
                n += 1
                if self.attention:
                    break
            self.processed += n
            if env is None:
                await self._wait()
            elif not self.attention:
                await asyncio.sleep(0)

    async def _pool_slot(self) -> None:
        """A sync task on the thread pool: one call at a time for this task."""
        loop = asyncio.get_running_loop()
        process = self.task.process
        collector, coordinator = self.collector, self.coordinator
        backpressure = self.run_loop.router.backpressure
        clock = time.perf_counter_ns
        while True:
            if self.attention and not await self._barrier():
                return
            if self.attention:
                continue
            if (held := backpressure()) is not None:
                await held
                continue
            env = self._choose()
            if env is None:
                await self._wait()
                continue
            if env.control is not None:
                self._on_control(env)
                continue
            self.inflight = 1
            t0 = clock()
            try:
                await loop.run_in_executor(self.executor, process, env, collector, coordinator)
            except Exception as exc:
                self.run_loop.fail(self._failed(exc, env, "process()"))
                return
            finally:
                self.inflight = 0
            self.latency.update_ns(clock() - t0)
            self.processed += 1
            self.trackers[env.system_stream_partition].last_processed = env.offset
            if self.stores:
                self.stores.close_iterators()

    async def _async_slot(self) -> None:
        """One permit of an async task: invoke in order, await inline, complete."""
        process_async = self.task.process_async
        collector, coordinator = self.collector, self.coordinator
        trackers = self.trackers
        record = self.latency.update_ns
        clock = time.perf_counter_ns
        track_start = self.run_loop.callback_timeout_s is not None
        backpressure = self.run_loop.router.backpressure
        turn = 0
        while True:
            if self.attention and not await self._barrier():
                return
            if self.attention:
                continue
            if (held := backpressure()) is not None:
                await held
                continue
            env = self._choose()
            if env is None:
                await self._wait()
                continue
            if env.control is not None:
                self._on_control(env)
                continue
            tracker = trackers[env.system_stream_partition]
            entry = tracker.invoked(env.offset)
            if track_start:
                entry.started = self.run_loop.clock.now()
                entry.envelope = env
            self.inflight += 1
            t0 = clock()
            try:
                result = process_async(env, collector, coordinator)
                if type(result) is types.CoroutineType or isinstance(result, asyncio.Future):
                    await result
                elif isinstance(result, concurrent.futures.Future):
                    if result.done():
                        result.result()
                    else:
                        await asyncio.wrap_future(result)
                elif inspect.isawaitable(result):
                    await result
                else:
                    raise TypeError(
                        f"process_async must return an awaitable, got {type(result).__name__}"
                    )
            except Exception as exc:
                self.inflight -= 1
                self.run_loop.fail(self._failed(exc, env, "process_async()"))
                return
            self.inflight -= 1
            tracker.completed(entry)
            record(clock() - t0)
            self.processed += 1
            if self.inflight == 0:
                if self.stores:
                    self.stores.close_iterators()
                if self.attention:
                    self.wake()
            # Awaitables that complete at once never suspend the slot: yield now and then so
            # other tasks and the consumers get their turn.
            turn += 1
            if turn >= SYNC_TURN:
                turn = 0
                await asyncio.sleep(0)

    def oldest_in_flight(self) -> tuple[float, IncomingMessageEnvelope] | None:
        """The start time and envelope of the longest-running call (for callback timeouts)."""
        oldest: tuple[float, IncomingMessageEnvelope] | None = None
        for tracker in self.trackers.values():
            for entry in tracker.pending():
                if not entry.done:
                    started = entry.started
                    if oldest is None or started < oldest[0]:
                        oldest = (started, entry.envelope)
                    break
        return oldest


__all__ = ["SYNC_TURN", "TaskCoordinatorImpl", "TaskInstance"]
