"""``clock.within_bound``: the work runs in a task of its own, and whatever ends the wait,
the task's outcome is taken, so asyncio never logs "Task exception was never retrieved"
(which ``samzapy run`` shows as an error-level ``library_log`` line)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from samzapy.container.clock import within_bound


async def test_a_work_that_failed_as_its_caller_was_cancelled_leaves_no_unretrieved_error() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    work_task: list[asyncio.Task[Any]] = []

    async def work() -> None:
        work_task.append(asyncio.current_task())  # type: ignore[arg-type]
        raise ValueError("the send failed")

    async def caller() -> None:
        await within_bound(work(), lambda: None, TimeoutError, check_s=10)

    waiting = asyncio.ensure_future(caller())
    while not work_task or not work_task[0].done():  # noqa: ASYNC110 (turns of the loop)
        await asyncio.sleep(0)
    waiting.cancel()  # a stop, before the caller woke to take the work's error
    with pytest.raises(asyncio.CancelledError):
        await waiting
    del work_task[:], waiting
    gc.collect()
    await asyncio.sleep(0)
    assert [c["message"] for c in reported] == []


async def test_the_work_s_error_is_raised_to_the_caller() -> None:
    async def work() -> None:
        raise ValueError("the send failed")

    with pytest.raises(ValueError, match="the send failed"):
        await within_bound(work(), lambda: None, TimeoutError, check_s=10)
