"""Which offset a checkpoint may record: the low watermark of contiguous completed messages.

Messages of one partition are invoked in offset order but, above concurrency 1, may complete
out of order. A checkpoint must cover only fully processed messages, so the tracker keeps
the invocations in order and advances ``last_processed`` only across a contiguous run of
completed ones: a checkpoint records the highest offset of the contiguous run of completed
calls, never one past a call still in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from samzapy.api.system import SystemStreamPartition


class PendingMessage:
    """One invocation in flight: its offset, whether it completed, and (for callback
    timeouts) when it started and what it was processing."""

    __slots__ = ("done", "envelope", "offset", "started")

    def __init__(self, offset: str) -> None:
        self.offset = offset
        self.done = False
        self.started = 0.0
        self.envelope: Any = None


class OffsetTracker:
    """The low watermark of one partition of one task."""

    __slots__ = ("_pending", "last_processed")

    def __init__(self, last_processed: str | None = None) -> None:
        self.last_processed = last_processed
        self._pending: deque[PendingMessage] = deque()

    def invoked(self, offset: str) -> PendingMessage:
        """Record an invocation, in offset order; complete it with ``completed``."""
        entry = PendingMessage(offset)
        self._pending.append(entry)
        return entry

    def completed(self, entry: PendingMessage) -> None:
        """Mark an invocation complete and advance over the contiguous completed prefix."""
        entry.done = True
        pending = self._pending
        while pending and pending[0].done:
            self.last_processed = pending.popleft().offset

    def newest(self) -> PendingMessage:
        """The latest invocation (``invoked`` was called for it)."""
        return self._pending[-1]

    def oldest_offset(self) -> str | None:
        """The offset of the oldest invocation still in flight (None: none)."""
        pending = self._pending
        return pending[0].offset if pending else None

    def pending(self) -> Iterator[PendingMessage]:
        """The invocations not yet covered by ``last_processed``, in invocation order."""
        return iter(self._pending)


def oldest_in_flight(
    trackers: Mapping[SystemStreamPartition, OffsetTracker],
) -> tuple[float, SystemStreamPartition, str] | None:
    """When the longest-running invocation started, its partition and offset (None: none)."""
    oldest: tuple[float, SystemStreamPartition, str] | None = None
    for ssp, tracker in trackers.items():
        for entry in tracker.pending():
            if not entry.done:
                if oldest is None or entry.started < oldest[0]:
                    oldest = (entry.started, ssp, entry.offset)
                break
    return oldest


__all__ = ["OffsetTracker", "PendingMessage", "oldest_in_flight"]
