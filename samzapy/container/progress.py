"""TaskProgress: a read-only snapshot of how far one task has got and what it is doing."""

from __future__ import annotations

from typing import NamedTuple

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


__all__ = ["TaskProgress"]
