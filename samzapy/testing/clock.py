"""A clock that tests move by hand, so window, commit and timeout timers fire without waiting.

``advance(s)`` moves time and wakes the sleepers whose deadline came; ``wait_all_tasks_blocked``
returns once nothing on the event loop can run (every coroutine waits on something), so a
test knows the container has done all it can without guessing a number of rounds; with
``autojump=True`` the clock jumps to the next sleeper's deadline whenever that happens, as
trio's ``MockClock(autojump_threshold=0)`` does, and a test just awaits its outcome.

Telling that nothing can run needs asyncio's own event loop (uvloop does not expose its ready
queue); ``TestRunner.run`` uses asyncio's loop when its clock is a ManualClock. Timers on the
loop's real clock (a poll timeout, ``asyncio.sleep`` in a task) are not the manual clock's:
they still take real time, and a coroutine waiting on one counts as blocked.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Sized

#: How many passes through the event loop must find nothing ready before the loop counts as
#: idle (a callback scheduled with call_soon by the last one to run shows up in the next).
_IDLE_PASSES = 3


class ManualClock:
    """Time stands still until ``advance`` moves it (or, with ``autojump``, until every
    coroutine is blocked); sleepers wake in deadline order."""

    def __init__(self, start: float = 0.0, *, autojump: bool = False) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self.autojump = autojump
        self._jumper: asyncio.Task[None] | None = None

    def now(self) -> float:
        return self._now

    def time_ms(self) -> int:
        """The clock's time as wall-clock time: its seconds since the epoch, in ms."""
        return int(self._now * 1000)

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self._now:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        if self.autojump and (self._jumper is None or self._jumper.done()):
            self._jumper = asyncio.get_running_loop().create_task(self._jump_when_blocked())
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has come; time never
        moves back (timers already fired would not fire again)."""
        if not seconds >= 0:  # NaN too
            raise ValueError(f"advance moves time forward: seconds must be >= 0, got {seconds!r}")
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    async def wait_all_tasks_blocked(self) -> None:
        """Return once nothing else on the event loop is ready to run."""
        await wait_all_tasks_blocked()

    async def advance_and_settle(self, seconds: float) -> None:
        """Advance, then wait until the woken coroutines have done all they can."""
        self.advance(seconds)
        await self.wait_all_tasks_blocked()

    async def _jump_when_blocked(self) -> None:
        while self._sleepers:
            await self.wait_all_tasks_blocked()
            self._sleepers = [s for s in self._sleepers if not s[2].done()]
            heapq.heapify(self._sleepers)
            if self._sleepers:
                self.advance(max(self._sleepers[0][0] - self._now, 0.0))


async def wait_all_tasks_blocked() -> None:
    """Return once nothing else on the (asyncio) event loop is ready to run: every other
    coroutine waits on a future, a timer or I/O."""
    ready = _ready_queue()
    idle = 0
    while idle < _IDLE_PASSES:
        await asyncio.sleep(0)
        idle = 0 if ready else idle + 1


def _ready_queue() -> Sized:
    """The running loop's queue of callbacks ready to run."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    if not isinstance(ready, Sized):
        raise RuntimeError(
            f"ManualClock cannot tell when every task is blocked on {type(loop).__name__}: "
            "run the test on asyncio's own event loop (job.loop: asyncio)"
        )
    return ready


__all__ = ["ManualClock", "wait_all_tasks_blocked"]
