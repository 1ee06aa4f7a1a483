"""The container's clock: window, commit, progress and callback-timeout timers and the
watermarks' idle timeouts read it, and processing-time windows and triggers read its
wall-clock time.

The default clock is the event loop's monotonic time, and the system's wall clock. Tests use
``samzapy.testing.ManualClock`` to drive the timers without waiting in real time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Monotonic time in seconds, and a way to wait for a point in it."""

    def now(self) -> float: ...

    def time_ms(self) -> int:
        """Wall-clock time in ms since the epoch: processing time for windows and triggers."""
        ...

    async def sleep_until(self, deadline: float) -> None: ...


class LoopClock:
    """The running event loop's monotonic clock."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def time_ms(self) -> int:
        return int(time.time() * 1000)

    async def sleep_until(self, deadline: float) -> None:
        delay = deadline - self.now()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)


__all__ = ["Clock", "LoopClock"]
