"""TaskProgress: a read-only snapshot of how far one task has got and what it is doing; and
the fields of the ``progress`` line (its lag summary among them) and of ``job_finished``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

from samzapy.api.system import SystemStreamPartition, TaskName


class TaskProgress(NamedTuple):
    """One task at one moment, as the run loop, the watchdog and the metrics read it."""

    name: TaskName
    #: Messages whose processing completed, and calls in flight now.
    processed: int
    in_flight: int
    #: Windows run and commits made.
    windows: int
    commits: int
    #: Messages queued for the task (taken from its inputs, not yet processed).
    buffered: int
    #: The partition and offset the task is on: its oldest call in flight, else the next
    #: message queued (None when idle).
    position: tuple[SystemStreamPartition, str] | None
    #: A window, commit, watermark or end-of-stream barrier is due or running.
    barrier_pending: bool
    #: The producers (output backpressure) or a held group lease hold the task back.
    backpressured: bool
    stopping: bool
    finished: bool
    #: When the last commit ran (on the container's clock; None before the first), and how
    #: many messages had been processed then.
    committed_at: float | None
    committed_processed: int
    #: Reading its bootstrap inputs to their heads (its other inputs wait).
    bootstrapping: bool = False


def lag_summary(
    lags: Iterable[tuple[SystemStreamPartition, Callable[[], float]]],
) -> dict[str, Any]:
    """The ``progress`` line's lag: messages between each input partition's next offset and
    its high watermark, summed; and the partition furthest behind, with its lag."""
    total, worst, worst_ssp = 0, 0, None
    for ssp, read in lags:
        value = int(read())
        total += value
        if value > worst:
            worst, worst_ssp = value, ssp
    return {"lag": total, "lag_max": worst, "lag_max_partition": worst_ssp and str(worst_ssp)}


class Rate:
    """The ``progress`` line's rate: messages a second since the count was last read."""

    def __init__(self, count: int) -> None:
        self._count, self._at = count, time.monotonic()

    def __call__(self, count: int) -> float:
        now = time.monotonic()
        rate = round((count - self._count) / max(now - self._at, 1e-9), 1)
        self._count, self._at = count, now
        return rate


class Reporting(Protocol):
    """What the ``progress`` line reads from a run loop: its tasks, and their input
    partitions' lag readers."""

    def task_progress(self) -> list[TaskProgress]: ...

    lags: Mapping[TaskName, Mapping[SystemStreamPartition, Callable[[], float]]]


def progress_fields(loops: Iterable[Reporting]) -> dict[str, Any]:
    """The ``progress`` line's fields, the count and rate aside, over the tasks of ``loops``
    (one run loop, or every share's in a process). ``tasks_held``: the running tasks held
    back at that moment (``TaskProgress.backpressured``), all of them while the group lease
    is held, when the tasks run but process nothing and their lag is the last one read."""
    progress: list[TaskProgress] = []
    lags: list[tuple[SystemStreamPartition, Callable[[], float]]] = []
    for loop in loops:
        tasks = loop.task_progress()
        progress += tasks
        lags += [item for p in tasks for item in loop.lags.get(p.name, {}).items()]
    return {
        "in_flight": sum(p.in_flight for p in progress),
        "tasks_running": sum(1 for p in progress if not p.finished),
        "tasks_bootstrapping": sum(1 for p in progress if p.bootstrapping),
        # Held back now, by a held group lease (nothing processed) or by their producers.
        "tasks_held": sum(1 for p in progress if p.backpressured and not p.finished),
        **lag_summary(lags),
    }


def finished_fields(
    reason: str | None, started: float, counts: Mapping[str, int]
) -> dict[str, Any]:
    """The ``job_finished`` line's fields: why the run ended, and what it did since
    ``started`` (monotonic), from ``counts`` (``processed``, ``commits``, ``checkpoints``)."""
    elapsed = time.monotonic() - started
    processed = counts["processed"]
    return {
        "reason": reason,
        "processed": processed,
        "elapsed_s": round(elapsed, 3),
        "rate": round(processed / elapsed, 1) if elapsed > 0 else None,
        "commits": counts["commits"],
        "checkpoints_written": counts["checkpoints"],
    }


__all__ = [
    "Rate",
    "Reporting",
    "TaskProgress",
    "finished_fields",
    "lag_summary",
    "progress_fields",
]
