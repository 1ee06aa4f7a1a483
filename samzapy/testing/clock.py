"""A clock that tests move by hand, so window and commit timers fire without real waiting."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualClock:
    """Time stands still until ``advance`` moves it; sleepers wake in deadline order."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has come."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def advance_and_settle(self, seconds: float, rounds: int = 20) -> None:
        """Advance, then let the woken coroutines run for a few loop iterations."""
        self.advance(seconds)
        for _ in range(rounds):
            await asyncio.sleep(0)


__all__ = ["ManualClock"]
