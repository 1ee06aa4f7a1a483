"""The run loop: drives the consumers, the task slots and the timers on one event loop.

It owns what spans tasks: the window, commit, progress and callback-timeout timers (read
from an injectable clock), commit and shutdown requests from coordinators, the commit
protocol, failure (the first error stops everything, and nothing more is committed) and the
orderly stop:

1. stop consuming;
2. let every task finish the calls in flight, for at most ``task.shutdown.ms``;
3. return to the container, which closes the tasks, flushes and commits.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import structlog

from samzapy.api.context import RequestScope
from samzapy.api.errors import SamzapyError, TaskCallbackTimeoutError, TaskError
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.container.clock import Clock
from samzapy.container.collector import OutputRouter
from samzapy.container.consumers import SystemConsumers
from samzapy.container.stores import CHANGELOG_OFFSETS
from samzapy.container.watchdog import Watchdog
from samzapy.control.reconcile import CONTROL_STATE
from samzapy.metrics import Health
from samzapy.metrics.registry import Timer

if TYPE_CHECKING:
    from samzapy.container.task_instance import TaskInstance

log = structlog.get_logger("samzapy.run_loop")


class RunLoop:
    """Runs the tasks of one container until they end, a stop is requested, or one fails."""

    def __init__(
        self,
        *,
        consumers: SystemConsumers,
        input_systems: Sequence[str],
        router: OutputRouter,
        checkpoints: CheckpointManager | None,
        clock: Clock,
        window_ms: int,
        commit_ms: int,
        callback_timeout_ms: int,
        shutdown_ms: int,
        progress_interval_ms: int,
        checkpoint_extra: Mapping[str, Any] | None = None,
        stall_timeout_ms: int = -1,
        stall_fail: bool = False,
        health: Health | None = None,
    ) -> None:
        self.consumers = consumers
        self.input_systems = list(input_systems)
        self.router = router
        self.checkpoints = checkpoints
        self.clock = clock
        self.window_s = window_ms / 1000 if window_ms > 0 else None
        self.commit_s = commit_ms / 1000 if commit_ms > 0 else None
        self.callback_timeout_s = callback_timeout_ms / 1000 if callback_timeout_ms > 0 else None
        self.shutdown_s = shutdown_ms / 1000
        self.progress_s = progress_interval_ms / 1000 if progress_interval_ms > 0 else None
        self.checkpoint_extra = dict(checkpoint_extra or {})
        self.tasks: list[TaskInstance] = []
        self.failure: SamzapyError | None = None
        self.stop_reason: str | None = None
        self._done: asyncio.Future[None] | None = None
        self._written: dict[str, Checkpoint] = {}
        self.commit_count = 0
        #: Metrics: how long commits take, and when each task last wrote a checkpoint.
        self.commit_latency = Timer()
        self.checkpointed_at: dict[str, float] = {}
        self.watchdog = (
            Watchdog(
                self,
                timeout_s=stall_timeout_ms / 1000,
                commit_s=self.commit_s if checkpoints is not None else None,
                fail=stall_fail,
                health=health,
            )
            if stall_timeout_ms > 0
            else None
        )

    # -- requests -------------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """Stop consuming and end the run after the calls in flight (signals, shutdown)."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.info("stop_requested", reason=reason)
        for task in self.tasks:
            task.stop()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

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
        if isinstance(error, TaskError):
            fields = {
                "task": error.task_name,
                "ssp": str(error.ssp) if error.ssp else None,
                "offset": error.offset,
            }
        log.error("task_failed", error=str(error), exc_info=error, **fields)
        for task in self.tasks:
            task.stop()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def request_commit(self, instance: TaskInstance, scope: RequestScope) -> None:
        targets = self.tasks if scope is RequestScope.ALL_TASKS_IN_CONTAINER else [instance]
        for task in targets:
            task.request_commit()

    def request_shutdown(self, instance: TaskInstance, scope: RequestScope) -> None:
        if scope is RequestScope.ALL_TASKS_IN_CONTAINER:
            self.request_stop(f"shutdown requested by task {instance.name!r} for all tasks")
            return
        instance.shutdown_requested = True
        if all(t.shutdown_requested for t in self.tasks):
            self.request_stop("shutdown requested by every task")

    def task_finished(self, instance: TaskInstance) -> None:
        instance.shutdown_requested = True
        if all(t.finished for t in self.tasks):
            self.request_stop("every input partition reached end-of-stream")
        elif all(t.shutdown_requested for t in self.tasks):
            self.request_stop("shutdown requested by every task")

    # -- commit ---------------------------------------------------------------------------------

    async def commit(self, task: TaskInstance) -> None:
        """The commit protocol, run while the task has nothing in flight."""
        started = time.perf_counter_ns()
        await self._commit(task)
        self.commit_latency.update_ns(time.perf_counter_ns() - started)

    async def _commit(self, task: TaskInstance) -> None:
        # 1. Flush producers: every output of the covered messages is durable.
        await self.router.flush()
        # 2. Flush the stores, and note how far their changelogs got.
        extra = self.checkpoint_extra
        if task.stores:
            task.stores.flush()
            extra = {**extra, CHANGELOG_OFFSETS: await task.stores.changelog_offsets()}
        # The control-message bookkeeping, consistent with the offsets (nothing in flight).
        if task.control.partitions or task.control.outputs:
            extra = {**extra, CONTROL_STATE: task.control.to_json()}
        # 3. Write the checkpoint: the last fully processed offset of each partition.
        if self.checkpoints is None:
            return
        offsets = {
            ssp: tracker.last_processed
            for ssp, tracker in task.trackers.items()
            if tracker.last_processed is not None
        }
        checkpoint = Checkpoint(offsets, extra)
        if self.watchdog is not None:
            self.watchdog.committed(task, self.clock.now())
        if self._written.get(task.name) == checkpoint:
            return
        await self.checkpoints.write(task.name, checkpoint)
        self._written[task.name] = checkpoint
        self.checkpointed_at[task.name] = time.monotonic()
        self.commit_count += 1
        log.debug(
            "checkpoint_written",
            task=task.name,
            offsets={str(ssp): offset for ssp, offset in offsets.items()},
        )

    def remember_checkpoint(self, task: TaskInstance, checkpoint: Checkpoint) -> None:
        """The checkpoint read at start-up, so an unchanged one is not written again."""
        self._written[task.name] = checkpoint

    # -- running --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run until done; raise the failure if there was one."""
        loop = asyncio.get_running_loop()
        self._done = loop.create_future()
        if self.stop_reason is not None or self.failure is not None or not self.tasks:
            self._done.set_result(None)
        consumer_tasks = [
            loop.create_task(self.consumers.run(system), name=f"consumer-{system}")
            for system in self.input_systems
        ]
        for t in consumer_tasks:
            t.add_done_callback(self._background_done)
        slot_tasks: list[asyncio.Task[None]] = []
        for task in self.tasks:
            for i, slot in enumerate(task.slots()):
                st = loop.create_task(slot(), name=f"{task.name}-slot-{i}")
                st.add_done_callback(self._background_done)
                slot_tasks.append(st)
        timer_task = loop.create_task(self._timers(), name="timers")
        timer_task.add_done_callback(self._background_done)
        try:
            await self._done
        except asyncio.CancelledError:
            await _cancel([*consumer_tasks, *slot_tasks, timer_task])
            raise
        # 1. Stop consuming.
        await _cancel(consumer_tasks)
        if self.failure is None:
            # 2. Let the calls in flight complete, up to task.shutdown.ms.
            for task in self.tasks:
                task.stop()
            await self._drain(slot_tasks)
        await _cancel([*slot_tasks, timer_task])
        if self.failure is not None:
            raise self.failure

    async def _drain(self, slot_tasks: list[asyncio.Task[None]]) -> None:
        running = [t for t in slot_tasks if not t.done()]
        if not running:
            return
        all_done = asyncio.ensure_future(asyncio.wait(running))
        deadline = asyncio.ensure_future(self.clock.sleep_until(self.clock.now() + self.shutdown_s))
        await asyncio.wait([all_done, deadline], return_when=asyncio.FIRST_COMPLETED)
        deadline.cancel()
        pending = [t for t in running if not t.done()]
        if pending:
            log.warning(
                "shutdown_timed_out",
                shutdown_ms=int(self.shutdown_s * 1000),
                tasks=sorted({str(t.name) for t in self.tasks if t.inflight}),
                in_flight=sum(t.inflight for t in self.tasks),
            )
            await _cancel(pending)
        await _cancel([all_done])

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
        last_processed, last_time = 0, time.monotonic()
        while True:
            deadline = min(next_window, next_commit, next_progress, next_check, next_watch)
            if deadline == math.inf:
                return
            await clock.sleep_until(deadline)
            now = clock.now()
            if now >= next_window and self.window_s:
                for task in self.tasks:
                    task.request_window()
                next_window = _next_after(next_window, self.window_s, now)
            if now >= next_commit and self.commit_s:
                for task in self.tasks:
                    task.request_commit()
                next_commit = _next_after(next_commit, self.commit_s, now)
            if now >= next_check and check_s:
                self._check_callback_timeouts(now)
                next_check = _next_after(next_check, check_s, now)
            if now >= next_watch and watchdog is not None:
                watchdog.check(now)
                next_watch = _next_after(next_watch, watchdog.interval_s, now)
            if now >= next_progress and self.progress_s:
                processed = self.processed
                wall = time.monotonic()
                log.info(
                    "progress",
                    processed=processed,
                    rate=round((processed - last_processed) / max(wall - last_time, 1e-9), 1),
                    in_flight=sum(t.inflight for t in self.tasks),
                    tasks_running=sum(1 for t in self.tasks if not t.finished),
                )
                last_processed, last_time = processed, wall
                next_progress = _next_after(next_progress, self.progress_s, now)

    def _check_callback_timeouts(self, now: float) -> None:
        assert self.callback_timeout_s is not None
        for task in self.tasks:
            oldest = task.oldest_in_flight()
            if oldest is None:
                continue
            started, env = oldest
            if now - started >= self.callback_timeout_s:
                ssp = env.system_stream_partition
                self.fail(
                    TaskCallbackTimeoutError(
                        f"process_async of task {task.name!r} on {ssp} at offset {env.offset} "
                        f"did not complete within task.callback.timeout.ms="
                        f"{int(self.callback_timeout_s * 1000)}",
                        task_name=task.name,
                        ssp=ssp,
                        offset=env.offset,
                    )
                )
                return

    @property
    def processed(self) -> int:
        return sum(t.processed for t in self.tasks)


def _next_after(deadline: float, period: float, now: float) -> float:
    """The next periodic deadline after ``now`` (missed periods are skipped, not queued)."""
    while deadline <= now:
        deadline += period
    return deadline


async def _cancel(tasks: Sequence[asyncio.Future[Any]]) -> None:
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


__all__ = ["RunLoop"]
