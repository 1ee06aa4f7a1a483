"""The stall watchdog: a task that silently stopped making progress is impossible to miss.

Checked from the run loop's timers, on its clock. A task is *stalled* when

- it has input waiting (queued or in flight) and has completed nothing for
  ``task.stall.timeout.ms``, or
- it has completed messages but has not checkpointed for three commit intervals plus
  ``task.stall.timeout.ms`` (a commit that never gets its turn, or never finishes).

A stall is logged once as ``task_stalled`` with the task, the partition and offset it is on and
what it waits on, recorded in the container's ``Health`` (``/healthz`` answers 503), and with
``task.stall.fail: true`` fails the container (exit 1), so an orchestrator restarts it. When the
task moves again, ``task_recovered`` is logged and the health problem cleared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from samzapy.api.errors import TaskError
from samzapy.metrics import Health

if TYPE_CHECKING:
    from samzapy.container.run_loop import RunLoop
    from samzapy.container.task_instance import TaskInstance

log = structlog.get_logger("samzapy.watchdog")

#: How many commit intervals without a checkpoint, while progressing, count as a stall.
COMMIT_INTERVALS = 3


@dataclass
class _Seen:
    processed: int
    progress_at: float
    committed_processed: int
    committed_at: float
    stalled: bool = False


class Watchdog:
    """Watches the tasks of one run loop."""

    def __init__(
        self,
        run_loop: RunLoop,
        *,
        timeout_s: float,
        commit_s: float | None,
        fail: bool,
        health: Health | None,
    ) -> None:
        self.run_loop = run_loop
        self.timeout_s = timeout_s
        self.commit_s = commit_s
        self.fail = fail
        self.health = health
        self._seen: dict[str, _Seen] = {}
        self._started_at: float | None = None

    def start(self, now: float) -> None:
        """The run loop started at ``now``: tasks are watched from then on."""
        self._started_at = now

    @property
    def interval_s(self) -> float:
        """How often ``check`` should run."""
        return max(min(self.timeout_s / 4, 1.0), 0.01)

    def committed(self, task: TaskInstance, now: float) -> None:
        """A checkpoint of ``task`` was written (or found unchanged) at ``now``."""
        seen = self._seen.get(str(task.name))
        if seen is not None:
            seen.committed_processed = task.processed
            seen.committed_at = now

    def check(self, now: float) -> None:
        for task in self.run_loop.tasks:
            name = str(task.name)
            seen = self._seen.get(name)
            if seen is None:
                since = now if self._started_at is None else self._started_at
                seen = self._seen[name] = _Seen(0, since, 0, since)
            if task.processed != seen.processed:
                seen.processed = task.processed
                seen.progress_at = now
            reason = None
            if not task.finished and not task.stopping:
                waiting = task.inflight > 0 or any(q.queue for q in task.queues)
                if waiting and now - seen.progress_at >= self.timeout_s:
                    reason = f"completed nothing for {now - seen.progress_at:.1f} s"
                elif (
                    self.commit_s is not None
                    and task.processed > seen.committed_processed
                    and now - seen.committed_at >= COMMIT_INTERVALS * self.commit_s + self.timeout_s
                ):
                    reason = f"no checkpoint for {now - seen.committed_at:.1f} s while progressing"
            if reason is not None and not seen.stalled:
                seen.stalled = True
                self._stalled(task, reason)
            elif reason is None and seen.stalled:
                seen.stalled = False
                log.info("task_recovered", task=name)
                if self.health is not None:
                    self.health.clear_problem(f"stalled:{name}")

    def _stalled(self, task: TaskInstance, reason: str) -> None:
        ssp, offset = _position(task)
        detail: dict[str, Any] = {
            "task": str(task.name),
            "ssp": ssp,
            "offset": offset,
            "reason": reason,
            "waiting_on": self._waiting_on(task),
            "in_flight": task.inflight,
        }
        log.warning("task_stalled", **detail)
        if self.health is not None:
            self.health.set_problem(f"stalled:{task.name}", detail)
        if self.fail:
            self.run_loop.fail(
                TaskError(
                    f"task {task.name!r} stalled on {ssp} at offset {offset}: {reason}, "
                    f"waiting on {detail['waiting_on']} (task.stall.fail is true)",
                    task_name=task.name,
                )
            )

    def _waiting_on(self, task: TaskInstance) -> str:
        if task.inflight:
            return f"{task.inflight} call(s) of the task that have not completed"
        if self.run_loop.router.backpressure() is not None:
            return "the producers (output backpressure: sends are not being delivered)"
        if task.attention:
            return "a window, commit or end-of-stream barrier that has not finished"
        return "its turn on the event loop (another task or callback holds it)"


def _position(task: TaskInstance) -> tuple[str | None, str | None]:
    """The partition and offset the task is on: its oldest call in flight, else the next
    message queued."""
    for ssp, tracker in task.trackers.items():
        for entry in tracker.pending():
            if not entry.done:
                return str(ssp), entry.offset
    for q in task.queues:
        if q.queue:
            return str(q.ssp), q.queue[0].offset
    return None, None


__all__ = ["COMMIT_INTERVALS", "Watchdog"]
