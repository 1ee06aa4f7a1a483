"""The stall watchdog: a task that silently stopped making progress is impossible to miss.

``assess`` is the rule, pure: a task is *stalled* when

- it has input waiting (queued or in flight) and has completed nothing for
  ``task.stall.timeout.ms``, or
- it has completed messages but has not checkpointed for three commit intervals plus
  ``task.stall.timeout.ms`` (a commit that never gets its turn, or never finishes).

A task that is stopping or finished is not assessed (it neither stalls nor recovers: a task
still hung when a stop begins stays reported until it leaves the container, released or
with the end of its run loop).

``Watchdog`` is the thin client the run loop's timers drive with the tasks' progress
snapshots, on the container's clock. It remembers when each task last moved, logs a stall once
as ``task_stalled`` with the task, the partition and offset it is on and what it waits on,
records it in the container's ``Health`` (``/healthz`` answers 503), and with
``task.stall.fail: true`` fails the container (exit 1), so an orchestrator restarts it. When
the task moves again, ``task_recovered`` is logged and the health problem cleared; when it
leaves the container (``forget``), the problem goes with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from samzapy.api.errors import TaskError
from samzapy.container.progress import TaskProgress
from samzapy.metrics import Health

log = structlog.get_logger("samzapy.watchdog")

#: How many commit intervals without a checkpoint, while progressing, count as a stall.
COMMIT_INTERVALS = 3


@dataclass(frozen=True)
class Stall:
    """Why a task is stalled, and where."""

    reason: str
    waiting_on: str


def assess(
    progress: TaskProgress,
    *,
    moved_at: float,
    now: float,
    timeout_s: float,
    commit_s: float | None,
    since: float,
) -> Stall | None:
    """Whether ``progress`` shows a stall at ``now``.

    ``moved_at``: when the task last completed a message or was seen with nothing to do
    (or when watching began);
    ``commit_s``: the commit interval, None when the job does not checkpoint; ``since``: when
    watching began (stands in for the last commit before the first one).
    """
    if progress.finished or progress.stopping:
        return None
    waiting = progress.in_flight > 0 or progress.buffered > 0
    if waiting and now - moved_at >= timeout_s:
        return Stall(f"completed nothing for {now - moved_at:.1f} s", _waiting_on(progress))
    committed_at = since if progress.committed_at is None else progress.committed_at
    if (
        commit_s is not None
        and progress.processed > progress.committed_processed
        and now - committed_at >= COMMIT_INTERVALS * commit_s + timeout_s
    ):
        return Stall(
            f"no checkpoint for {now - committed_at:.1f} s while progressing",
            _waiting_on(progress),
        )
    return None


def _waiting_on(progress: TaskProgress) -> str:
    if progress.in_flight:
        return f"{progress.in_flight} call(s) of the task that have not completed"
    if progress.backpressured:
        return (
            "the producers (output backpressure: sends are not being delivered), or the "
            "group lease being held (lease_held)"
        )
    if progress.barrier_pending:
        return "a window, commit or end-of-stream barrier that has not finished"
    if progress.bootstrapping:
        return "its bootstrap inputs, read to their heads before its other inputs"
    return "its turn on the event loop (another task or callback holds it)"


@dataclass
class _Seen:
    processed: int
    moved_at: float
    stalled: bool = False


class Watchdog:
    """Watches the tasks of one container; ``check`` runs from the run loop's timers."""

    def __init__(
        self,
        *,
        timeout_s: float,
        commit_s: float | None,
        fail: bool,
        health: Health | None,
        on_fail: Callable[[BaseException], None],
    ) -> None:
        self.timeout_s = timeout_s
        self.commit_s = commit_s
        self.fail = fail
        self.health = health
        self._on_fail = on_fail
        self._seen: dict[str, _Seen] = {}
        self._started_at: float | None = None
        #: When ``check`` last ran, and when it found the event loop held up to then.
        self._checked_at: float | None = None
        self._resumed_at: float | None = None

    @property
    def interval_s(self) -> float:
        """How often ``check`` should run."""
        return max(min(self.timeout_s / 4, 1.0), 0.01)

    def start(self, now: float) -> None:
        """Watching begins at ``now``."""
        self._started_at = self._checked_at = now

    def check(self, tasks: Iterable[TaskProgress], now: float) -> None:
        since = now if self._started_at is None else self._started_at
        self._note_held_loop(now)
        for progress in tasks:
            name = str(progress.name)
            seen = self._seen.get(name)
            if seen is None:
                seen = self._seen[name] = _Seen(0, since)
            # Moved: it completed a message, or it has nothing to do (an idle spell is no
            # stall: the time counts from when input next waits).
            if progress.processed != seen.processed or not (
                progress.in_flight or progress.buffered
            ):
                seen.processed = progress.processed
                seen.moved_at = now
            if progress.finished or progress.stopping:
                continue
            stall = assess(
                progress,
                moved_at=seen.moved_at,
                now=now,
                timeout_s=self.timeout_s,
                commit_s=self.commit_s,
                since=since,
            )
            resumed = self._resumed_at
            if stall is not None and resumed is not None and now - resumed < self.timeout_s:
                continue  # a held loop starved it: judged again a timeout after its return
            if stall is not None and not seen.stalled:
                seen.stalled = True
                self._stalled(progress, stall)
            elif stall is not None and self.health is not None:
                # Still stalled: /healthz says for how long now, and where the task is.
                self.health.set_problem(f"stalled:{name}", _detail(progress, stall))
            elif stall is None and seen.stalled:
                seen.stalled = False
                log.info("task_recovered", task=name)
                if self.health is not None:
                    self.health.clear_problem(f"stalled:{name}")

    def _note_held_loop(self, now: float) -> None:
        """A check far later than its interval: something held the event loop (a sync call
        on it, say) and every task with it; said once, and no task is judged stalled for it
        until a stall timeout after the loop's return (the one holding it, if it never
        returns, holds the watchdog too: deploy.md)."""
        checked, self._checked_at = self._checked_at, now
        if checked is not None and now - checked > 2 * self.interval_s + 1.0:
            self._resumed_at = now
            for seen in self._seen.values():  # the held time is no task's own
                seen.moved_at = max(seen.moved_at, now)
            log.warning(
                "event_loop_held",
                held_s=round(now - checked, 1),
                hint="a sync task's call on the event loop (job.container.thread.pool.size "
                "0 or 1), or other blocking code, held every task meanwhile",
            )

    def forget(self, name: str) -> None:
        """The task left the container: its stall, if any, is no longer this one's problem."""
        if self._seen.pop(name, None) is not None and self.health is not None:
            self.health.clear_problem(f"stalled:{name}")

    def _stalled(self, progress: TaskProgress, stall: Stall) -> None:
        ssp, offset = progress.position or (None, None)
        detail = _detail(progress, stall)
        log.warning("task_stalled", **detail)
        if self.health is not None:
            self.health.set_problem(f"stalled:{progress.name}", detail)
        if self.fail:
            self._on_fail(
                TaskError(
                    f"task {str(progress.name)!r} stalled on {ssp} at offset {offset}: "
                    f"{stall.reason}, waiting on {stall.waiting_on} (task.stall.fail is true)",
                    task_name=progress.name,
                    ssp=ssp,
                    offset=offset,
                )
            )


def _detail(progress: TaskProgress, stall: Stall) -> dict[str, object]:
    """What ``task_stalled`` and the health problem say of a stall."""
    ssp, offset = progress.position or (None, None)
    return {
        "task": str(progress.name),
        "ssp": None if ssp is None else str(ssp),
        "offset": offset,
        "reason": stall.reason,
        "waiting_on": stall.waiting_on,
        "in_flight": progress.in_flight,
    }


__all__ = ["COMMIT_INTERVALS", "Stall", "Watchdog", "assess"]
