"""TaskProgress: a read-only snapshot of how far one task has got and what it is doing; and
the lag summary the ``progress`` line carries."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

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
    #: The producers hold the task back (output backpressure).
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


__all__ = ["TaskProgress", "lag_summary"]
