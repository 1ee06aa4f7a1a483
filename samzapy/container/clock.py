"""The container's clock: window, commit, progress and callback-timeout timers and the
watermarks' idle timeouts read it, and processing-time windows and triggers read its
wall-clock time.

The default clock is the event loop's monotonic time, and the system's wall clock. Tests use
``samzapy.testing.ManualClock`` to drive the timers without waiting in real time.

What a stop waits on lives here too: ``wait_on`` bounds the wait for calls in flight,
``within_bound`` a commit's wait for its servers, and ``cancelled_here`` tells a stop's own
cancellation from a task's error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


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


async def wait_on(
    clock: Clock, futures: Collection[asyncio.Future[Any]], timeout_s: float
) -> list[asyncio.Future[Any]]:
    """Wait until every one of ``futures`` is done, or for ``timeout_s`` on ``clock`` (what a
    stop gives the calls in flight): the ones still pending then, in order."""
    if not futures:
        return []
    all_done = asyncio.ensure_future(asyncio.wait(futures))
    deadline = asyncio.ensure_future(clock.sleep_until(clock.now() + timeout_s))
    await asyncio.wait([all_done, deadline], return_when=asyncio.FIRST_COMPLETED)
    for waiter in (all_done, deadline):
        waiter.cancel()
    await asyncio.gather(all_done, deadline, return_exceptions=True)
    return [f for f in futures if not f.done()]


async def within_bound(
    work: Coroutine[Any, Any, T],
    bound_s: Callable[[], float | None],
    expired: Callable[[float], BaseException],
    *,
    check_s: float,
    given_up: Callable[[], BaseException | None] = lambda: None,
) -> T:
    """``work``'s result, unless it has run for ``bound_s()`` seconds (None: no bound so far;
    asked again at every check, so a system ``work`` connects on its way counts) or
    ``given_up()`` says why to stop, checked every ``check_s``: then ``work`` is cancelled and
    ``expired(bound)`` (or that reason) raised."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            if (reason := given_up()) is not None:
                raise reason
            within_s = bound_s()
            if within_s is not None and loop.time() - started >= within_s:
                raise expired(within_s)
            left = check_s if within_s is None else max(started + within_s - loop.time(), 0)
            await asyncio.wait([task], timeout=min(check_s, left))
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        elif not task.cancelled():
            # Taken even when the wait itself ends otherwise (a stop cancels it as the work
            # fails): else asyncio logs "Task exception was never retrieved".
            task.exception()
    return task.result()


def cancelled_here(exc: BaseException) -> bool:
    """Whether ``exc`` is the caller's own cancellation (a stop), not the task's error: the
    current asyncio task is being cancelled, as a hook's caller or a slot is on a stop."""
    task = asyncio.current_task()
    return isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling() > 0


def next_after(deadline: float, period: float, now: float) -> float:
    """The next periodic deadline after ``now`` (missed periods are skipped, not queued)."""
    while deadline <= now:
        deadline += period
    return deadline


__all__ = ["Clock", "LoopClock", "cancelled_here", "next_after", "wait_on", "within_bound"]
