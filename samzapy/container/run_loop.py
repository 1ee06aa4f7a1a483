"""The run loop: drives the consumers, the task slots and the timers on one event loop.

It owns what spans tasks: the window, commit, progress, callback-timeout and watchdog timers
(read from an injectable clock), commit and shutdown requests that reach past one task,
failure (the first error stops everything, and nothing more is committed) and the orderly
stop:

1. stop consuming;
2. let every task finish the calls in flight, for at most ``task.shutdown.ms``;
3. return to the container, which closes the tasks, flushes and commits.

A job whose intermediate streams live in memory, and whose checkpoints outlive the process,
first drains them (``Drain``): a memory stream ends with the process, so what a stage wrote
there and the next had not processed would be lost to a restart (the writer's checkpoint is
past it). On a requested stop, the other systems' consumers stop first and the tasks take
messages only from the memory intermediate partitions (what else they hold waits,
uncommitted, for the restart), until every one is processed to its end with no call or
barrier running (for at most ``task.shutdown.ms``); then steps 1 to 3.

``release`` does steps 1 and 2 for some tasks only, while the others go on (a rebalance that
moves them to another container); the container then commits them and stops reading their
partitions.

It knows tasks only through the ``RunLoopTask`` protocol below; the tasks report to it through
the listener protocol they declare (``fail``, ``task_finished``, ``request_commit``,
``request_shutdown``), which it implements.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from samzapy.api.context import RequestScope
from samzapy.api.errors import (
    SamzapyError,
    SerdeError,
    TaskCallbackTimeoutError,
    TaskError,
    TaskFencedError,
)
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.container.clock import Clock, next_after, wait_on
from samzapy.container.progress import Rate, TaskProgress, progress_fields
from samzapy.container.watchdog import Watchdog
from samzapy.metrics import Health

log = structlog.get_logger("samzapy.run_loop")

#: A coroutine function the loop runs until it returns or is cancelled.
Loop = Callable[[], Coroutine[Any, Any, None]]


class RunLoopTask(Protocol):
    """What the run loop needs of a task."""

    @property
    def name(self) -> TaskName: ...

    def slots(self) -> Sequence[Loop]:
        """The coroutine functions that run the task's calls, one per permit."""
        ...

    def request_window(self) -> None: ...

    def request_commit(self) -> None: ...

    def stop(self) -> None:
        """Start no new call; the slots return once their current calls complete."""
        ...

    def drain_only(self, ssps: Collection[SystemStreamPartition]) -> None:
        """Take messages only from ``ssps`` from now on (a stop draining them)."""
        ...

    def progress(self) -> TaskProgress: ...

    def oldest_in_flight(self) -> tuple[float, SystemStreamPartition, str] | None:
        """When the longest-running call started, its partition and offset."""
        ...


@dataclass(frozen=True)
class Drain:
    """What a requested stop drains first (the module docstring): ``keep``, the indexes of
    the consumers that go on (the memory systems'); ``ssps``, the memory intermediate
    partitions to process to their end."""

    keep: frozenset[int]
    ssps: frozenset[SystemStreamPartition]


class RunLoop:
    """Runs the tasks of one container until they end, a stop is requested, or one fails."""

    def __init__(
        self,
        *,
        consumers: Sequence[Loop],
        clock: Clock,
        window_ms: int,
        commit_ms: int,
        callback_timeout_ms: int,
        shutdown_ms: int,
        progress_interval_ms: int,
        checkpointing: bool = True,
        stall_timeout_ms: int = -1,
        stall_fail: bool = False,
        health: Health | None = None,
    ) -> None:
        """``consumers``: the input systems' consumer loops; ``checkpointing``: whether the
        job writes checkpoints (the watchdog expects them then)."""
        self._consumers = list(consumers)
        self.clock = clock
        self.window_s = window_ms / 1000 if window_ms > 0 else None
        self.commit_s = commit_ms / 1000 if commit_ms > 0 else None
        self.callback_timeout_s = callback_timeout_ms / 1000 if callback_timeout_ms > 0 else None
        self.shutdown_s = shutdown_ms / 1000
        self.progress_s = progress_interval_ms / 1000 if progress_interval_ms > 0 else None
        self._tasks: dict[TaskName, RunLoopTask] = {}
        #: Each task's input partitions' lag readers (the container's), for ``progress``.
        self.lags: Mapping[TaskName, Mapping[SystemStreamPartition, Callable[[], float]]] = {}
        self._slots: dict[TaskName, list[asyncio.Task[None]]] = {}
        self._finished: set[TaskName] = set()
        self._shutdown_requested: set[TaskName] = set()
        self.failure: SamzapyError | None = None
        self.stop_reason: str | None = None
        self._done: asyncio.Future[None] | None = None
        #: Set by the container for a job with memory intermediate streams (``Drain``).
        self.drain: Drain | None = None
        self._draining: asyncio.Task[None] | None = None
        self._consumer_tasks: list[asyncio.Task[None]] = []
        self.watchdog = (
            Watchdog(
                timeout_s=stall_timeout_ms / 1000,
                commit_s=self.commit_s if checkpointing else None,
                fail=stall_fail,
                health=health,
                on_fail=self.fail,
            )
            if stall_timeout_ms > 0
            else None
        )

    @property
    def processed(self) -> int:
        return sum(t.progress().processed for t in self._tasks.values())

    @property
    def shutdown_requested(self) -> frozenset[TaskName]:
        return frozenset(self._shutdown_requested)  # CURRENT_TASK requests, finished tasks

    def task_progress(self) -> list[TaskProgress]:
        return [t.progress() for t in self._tasks.values()]

    # -- requests: from the container, and from tasks (their listener) ----------------------------

    def request_stop(self, reason: str, quiet: bool = False) -> None:
        """Stop consuming and end the run after the calls in flight (signals, shutdown);
        ``quiet``: the stop was logged already (by another share of the process)."""
        if self.stop_reason is None:
            self.stop_reason = reason
            if not quiet:
                log.info("stop_requested", reason=reason)
            if (
                self.drain is not None
                and self._done is not None
                and self.failure is None
                and not self._finished >= self._tasks.keys()  # nothing is left to drain
            ):
                self._draining = asyncio.get_running_loop().create_task(self._drain_memory())
        if self._draining is None or self._draining.done():
            self._end()

    async def _drain_memory(self) -> None:
        """Drain the memory intermediate streams, then end the run (the module docstring)."""
        assert self.drain is not None
        drain, clock = self.drain, self.clock
        try:
            await _cancel([t for i, t in enumerate(self._consumer_tasks) if i not in drain.keep])
            for task in self._tasks.values():
                task.drain_only(drain.ssps)
            started = clock.now()
            streams = sorted({str(ssp.system_stream) for ssp in drain.ssps})
            while (left := self._undrained()) is not None:
                if clock.now() - started >= self.shutdown_s:
                    log.warning(
                        "drain_timed_out",
                        streams=streams,
                        shutdown_ms=int(self.shutdown_s * 1000),
                        left=left,
                        reason="what the memory intermediate streams still held is lost to "
                        "the restart: their writers' checkpoints are past it",
                    )
                    break
                await clock.sleep_until(clock.now() + 0.02)
            else:
                log.info(
                    "intermediate_streams_drained", streams=streams, seconds=clock.now() - started
                )
        finally:
            self._end()

    def _undrained(self) -> str | None:
        """What the drain still waits for (None: nothing): a call in flight or a barrier
        running (either may send to a drained stream), or a drained partition's messages
        not processed yet. The tasks take messages from those partitions only."""
        assert self.drain is not None
        for task in self._tasks.values():
            progress = task.progress()
            if not progress.finished and (progress.in_flight or progress.barrier_pending):
                return f"task {progress.name}: a call or barrier running"
        for lags in self.lags.values():
            for ssp, lag in lags.items():
                if ssp in self.drain.ssps and (behind := int(lag())) > 0:
                    return f"{ssp}: {behind} message(s)"
        return None

    def fail(self, error: BaseException) -> None:
        """The first failure stops the container; it is logged here, once."""
        if self.failure is not None:
            return
        if not isinstance(error, SamzapyError):
            wrapped = SamzapyError(f"container failed: {error!r}")
            wrapped.__cause__ = error
            error = wrapped
        assert isinstance(error, SamzapyError)
        self.failure = error
        fields = {}
        if isinstance(error, TaskError | SerdeError):
            fields = {
                "task": error.task_name,
                "ssp": str(error.ssp) if error.ssp else None,
                "offset": error.offset,
            }
            if isinstance(error, TaskError) and error.operator is not None:
                fields["operator"] = error.operator
        if isinstance(error, TaskFencedError):
            log.warning("container_fenced", error=str(error), task=error.task_name)
        else:
            log.error("task_failed", error=str(error), exc_info=error, **fields)
        self._end()

    def _end(self) -> None:
        for task in self._tasks.values():
            task.stop()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def request_commit(self, name: TaskName, scope: RequestScope) -> None:
        if scope is RequestScope.ALL_TASKS_IN_CONTAINER:
            for task in self._tasks.values():
                task.request_commit()
        elif name in self._tasks:
            self._tasks[name].request_commit()

    def request_shutdown(self, name: TaskName, scope: RequestScope) -> None:
        if scope is RequestScope.ALL_TASKS_IN_CONTAINER:
            self.request_stop(f"shutdown requested by task {name!r} for all tasks")
            return
        if name not in self._shutdown_requested:  # logged once per task, as Samza does
            self._shutdown_requested.add(name)
            waiting = sorted(str(task) for task in self._tasks.keys() - self._shutdown_requested)
            log.info("shutdown_requested", task=name, scope="current_task", waiting_for=waiting)
        self._stop_when_every_task_is_done()

    def task_finished(self, name: TaskName) -> None:
        self._finished.add(name)
        self._shutdown_requested.add(name)
        self._stop_when_every_task_is_done()

    def _stop_when_every_task_is_done(self) -> None:
        if not self._tasks:
            return
        if self._finished >= self._tasks.keys():
            self.request_stop("every input partition reached end-of-stream")
        elif self._shutdown_requested >= self._tasks.keys():
            self.request_stop("shutdown requested by every task")

    # -- running --------------------------------------------------------------------------------

    async def run(self, tasks: Sequence[RunLoopTask]) -> None:
        """Run ``tasks`` until done; raise the failure if there was one."""
        self._tasks = {task.name: task for task in tasks}
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        if self.stop_reason is not None or self.failure is not None or not self._tasks:
            self._end()
        self._consumer_tasks = consumer_tasks = [
            loop.create_task(consume(), name=f"consumer-{i}")
            for i, consume in enumerate(self._consumers)
        ]
        for t in consumer_tasks:
            t.add_done_callback(self._background_done)
        slot_tasks: list[asyncio.Task[None]] = []
        for task in tasks:
            for i, slot in enumerate(task.slots()):
                st = loop.create_task(slot(), name=f"{task.name}-slot-{i}")
                st.add_done_callback(self._background_done)
                slot_tasks.append(st)
                self._slots.setdefault(task.name, []).append(st)
        timer_task = loop.create_task(self._timers(), name="timers")
        timer_task.add_done_callback(self._background_done)
        try:
            await self._done
        except asyncio.CancelledError:
            await _cancel([*consumer_tasks, *slot_tasks, timer_task])
            raise
        finally:
            if self._draining is not None:  # a failure ends a drain
                await _cancel([self._draining])
        # 1. Stop consuming.
        await _cancel(consumer_tasks)
        if self.failure is None:
            # 2. Let the calls in flight complete, up to task.shutdown.ms.
            for task in tasks:
                task.stop()
            await self._drain(self._slots, tasks)
        await _cancel([*slot_tasks, timer_task])
        if self.watchdog is not None:  # the tasks leave with the loop, and their stalls
            for name in self._tasks:
                self.watchdog.forget(str(name))
        if self.failure is not None:
            raise self.failure

    async def release(self, names: Collection[TaskName]) -> None:
        """Stop the tasks ``names`` while the others go on: no new call starts, the calls in
        flight may complete for up to ``task.shutdown.ms``; then the loop forgets them."""
        leaving = [self._tasks.pop(name) for name in names if name in self._tasks]
        for task in leaving:
            task.stop()
            if self.watchdog is not None:
                self.watchdog.forget(str(task.name))
        await self._drain({task.name: self._slots.pop(task.name, []) for task in leaving}, leaving)
        self._finished.difference_update(names)
        self._shutdown_requested.difference_update(names)
        self._stop_when_every_task_is_done()

    async def _drain(
        self, slots: Mapping[TaskName, Sequence[asyncio.Task[None]]], tasks: Sequence[RunLoopTask]
    ) -> None:
        running = [st for task_slots in slots.values() for st in task_slots if not st.done()]
        pending = await wait_on(self.clock, running, self.shutdown_s)
        if pending:
            left = set(pending)
            held = {name for name, task_slots in slots.items() if not left.isdisjoint(task_slots)}
            progress = [t.progress() for t in tasks]
            busy = {str(p.name): _doing(p) for p in progress if p.in_flight or p.name in held}
            log.warning(
                "shutdown_timed_out",
                shutdown_ms=int(self.shutdown_s * 1000),
                tasks=sorted(busy),
                in_flight=sum(p.in_flight for p in progress),
                running=busy,
            )
            await _cancel(pending)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.fail(exc)

    async def _timers(self) -> None:
        clock = self.clock
        now = clock.now()
        next_window = now + self.window_s if self.window_s else math.inf
        next_commit = now + self.commit_s if self.commit_s else math.inf
        next_progress = now + self.progress_s if self.progress_s else math.inf
        check_s = self.callback_timeout_s / 4 if self.callback_timeout_s else None
        next_check = now + check_s if check_s else math.inf
        watchdog = self.watchdog
        next_watch = math.inf
        if watchdog is not None:
            watchdog.start(now)
            next_watch = now + watchdog.interval_s
        rate = Rate(0)
        tasks = self._tasks.values()
        while True:
            deadline = min(next_window, next_commit, next_progress, next_check, next_watch)
            if deadline == math.inf:
                return
            await clock.sleep_until(deadline)
            now = clock.now()
            if now >= next_window and self.window_s:
                for task in tasks:
                    task.request_window()
                next_window = next_after(next_window, self.window_s, now)
            if now >= next_commit and self.commit_s:
                for task in tasks:
                    task.request_commit()
                next_commit = next_after(next_commit, self.commit_s, now)
            if now >= next_check and check_s:
                self._check_callback_timeouts(now)
                next_check = next_after(next_check, check_s, now)
            if now >= next_watch and watchdog is not None:
                watchdog.check([t.progress() for t in tasks], now)
                next_watch = next_after(next_watch, watchdog.interval_s, now)
            if now >= next_progress and self.progress_s:
                processed = self.processed
                log.info(
                    "progress", processed=processed, rate=rate(processed), **progress_fields([self])
                )
                next_progress = next_after(next_progress, self.progress_s, now)

    def _check_callback_timeouts(self, now: float) -> None:
        assert self.callback_timeout_s is not None
        for task in self._tasks.values():
            oldest = task.oldest_in_flight()
            if oldest is None:
                continue
            started, ssp, offset = oldest
            if now - started >= self.callback_timeout_s:
                self.fail(
                    TaskCallbackTimeoutError(
                        f"process_async of task {task.name!r} on {ssp} at offset {offset} "
                        f"did not complete within task.callback.timeout.ms="
                        f"{int(self.callback_timeout_s * 1000)}",
                        task_name=task.name,
                        ssp=ssp,
                        offset=offset,
                    )
                )
                return


def _doing(progress: TaskProgress) -> str:
    """What a task still runs at a stop's timeout, for ``shutdown_timed_out``."""
    if progress.in_flight:
        return f"{progress.in_flight} call(s) in flight"
    if progress.backpressured:
        return "held back by its producers or the group lease"
    return "a window, commit, watermark or end-of-stream"


async def _cancel(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["Drain", "Loop", "RunLoop", "RunLoopTask"]
