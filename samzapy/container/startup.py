"""Start-up that a stop request cuts short.

Starting a container can wait a long time: for a broker that does not answer yet (up to
``connect.timeout.ms``), for a group's first assignment, for a store's restore. SIGTERM or
Ctrl-C in that time must stop the process at once, as the README promises, not after the
wait: ``unless_stopped`` runs a start-up step and cancels it when the stop comes first. What
the step had opened is closed by the caller's usual clean-up after a failed start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def unless_stopped(step: Coroutine[Any, Any, T], stopped: asyncio.Event) -> T | None:
    """``await step``, or None when ``stopped`` is set first (``step`` is then cancelled).
    A cancellation that does not come from the stop is not taken for one: it propagates."""
    task = asyncio.ensure_future(step)
    waiter = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled() and stopped.is_set():
        return None
    return task.result()  # a step that cancelled itself raises CancelledError here


__all__ = ["unless_stopped"]
