"""The container's periodic timers (docs/configuration.md, ``task.window.ms``,
``task.commit.ms``, ``task.progress.interval.ms`` and ``task.callback.timeout.ms``): a window
period missed while the task is busy is skipped, not queued; a call past its timeout is caught
within 1.25 times the timeout; and a period of 0 or -1 turns its timer off."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import AsyncStreamTask, StreamTask, TaskCallbackTimeoutError, WindowableTask
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.testing import ManualClock, TestRunner


async def test_window_periods_missed_while_busy_are_skipped_not_queued() -> None:
    """ "Window never overlaps a process call; periods missed while busy are skipped, not
    queued": a call that holds the task for five and a half periods is followed by one
    window, and the next one comes at the next period's boundary, not at once."""
    clock = ManualClock()
    gate = asyncio.Event()
    windows: list[float] = []

    class Busy(WindowableTask, AsyncStreamTask):
        async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            await gate.wait()

        def window(self, collector: Any, coordinator: Any) -> None:
            windows.append(clock.now())

    runner = TestRunner(Busy, {"task.window.ms": 1000}, clock=clock).add_input("in", [])
    # The input, made here, is never ended: the task runs on after its one message.
    runner.broker.create_stream("in", 1)
    runner.broker.append("in", 0, None, "hold")
    job = asyncio.ensure_future(runner.run_async(timeout=30))
    try:
        await clock.wait_all_tasks_blocked()
        for _ in range(11):  # five and a half periods, half a period at a time
            await clock.advance_and_settle(0.5)
        assert windows == [], "a window ran while a call was in flight"
        gate.set()
        await clock.wait_all_tasks_blocked()
        assert windows == [5.5], windows  # the missed periods are one window, not five
        await clock.advance_and_settle(0.4)
        assert windows == [5.5], "a missed period was queued"
        await clock.advance_and_settle(0.1)
        assert windows == [5.5, 6.0]
        await clock.advance_and_settle(1.0)
        assert windows == [5.5, 6.0, 7.0]
    finally:
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)


async def test_window_periods_missed_while_a_call_holds_the_loop_are_skipped() -> None:
    """The same when a sync call holds the event loop itself for five and a half periods
    (the timers wake once, late): one window, then the next period's boundary."""
    clock = ManualClock()
    windows: list[float] = []

    held = asyncio.Event()

    class HoldsTheLoop(WindowableTask, StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            clock.advance(5.5)  # as a blocking call of 5.5 s would
            held.set()

        def window(self, collector: Any, coordinator: Any) -> None:
            windows.append(clock.now())

    runner = TestRunner(HoldsTheLoop, {"task.window.ms": 1000}, clock=clock).add_input("in", [])
    runner.broker.create_stream("in", 1)
    job = asyncio.ensure_future(runner.run_async(timeout=30))
    try:
        await clock.wait_all_tasks_blocked()  # the timers wait for their first period
        runner.broker.append("in", 0, None, "hold")
        await asyncio.wait_for(held.wait(), 5)  # the next poll (real time) brings it
        await clock.wait_all_tasks_blocked()
        assert windows == [5.5], windows
        await clock.advance_and_settle(0.4)
        assert windows == [5.5], "a missed period was queued"
        await clock.advance_and_settle(0.1)
        assert windows == [5.5, 6.0]
    finally:
        job.cancel()
        await asyncio.gather(job, return_exceptions=True)


@pytest.mark.parametrize("started_at", [0.0, 0.03, 0.049])
async def test_a_call_past_its_callback_timeout_fails_within_a_quarter_more(
    started_at: float,
) -> None:
    """ "checked every N/4 ms, so detected within 1.25 x N": whenever the call started
    between two checks, the job has not failed at N after it and has failed by 1.25 x N."""
    clock = ManualClock()
    gate = asyncio.Event()

    class Hang(AsyncStreamTask):
        def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> Any:
            if envelope.message == "first":
                return gate.wait()  # released at ``started_at``: the next call starts then
            return asyncio.get_running_loop().create_future()  # never done

    runner = TestRunner(Hang, {"task.callback.timeout.ms": 200}, clock=clock)
    runner.add_input("in", ["first", "hangs"])
    job = asyncio.ensure_future(runner.run_async(timeout=30))
    await clock.wait_all_tasks_blocked()
    if started_at:
        await clock.advance_and_settle(started_at)
    gate.set()
    await clock.wait_all_tasks_blocked()
    await clock.advance_and_settle(0.2 - 0.001)
    assert not job.done(), "failed before the call had run for task.callback.timeout.ms"
    await clock.advance_and_settle(0.05 + 0.001)
    assert job.done(), "not caught within 1.25 x task.callback.timeout.ms"
    with pytest.raises(TaskCallbackTimeoutError, match=r"at offset 1"):
        await job


@pytest.mark.parametrize(("period_ms", "on"), [(1000, True), (0, False), (-1, False)])
async def test_a_period_of_0_or_minus_1_turns_window_commit_and_progress_off(
    period_ms: int, on: bool
) -> None:
    """``task.window.ms``, ``task.commit.ms`` and ``task.progress.interval.ms``: "-1 or 0
    is off" (commits then happen only when asked, at end-of-stream and at a stop)."""
    clock = ManualClock()
    windows: list[float] = []

    class Counting(WindowableTask, StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

        def window(self, collector: Any, coordinator: Any) -> None:
            windows.append(clock.now())

    config = {
        "task.window.ms": period_ms,
        "task.commit.ms": period_ms,
        "task.progress.interval.ms": period_ms,
    }
    runner = TestRunner(Counting, config, clock=clock).add_input("in", [])
    runner.broker.create_stream("in", 1)  # never ended
    runner.broker.append("in", 0, None, "one")
    with capture_logs() as logs:
        job = asyncio.ensure_future(runner.run_async(timeout=30))
        try:
            await clock.wait_all_tasks_blocked()
            for _ in range(30):
                await clock.advance_and_settle(1.0)
            assert runner.container is not None
            namespace = runner.container.checkpoint_namespace
            checkpointed = InMemoryCheckpointManager.checkpoints_for(namespace)
        finally:
            job.cancel()
            await asyncio.gather(job, return_exceptions=True)
    events = [e["event"] for e in logs]
    if on:  # the same job with the timers on: a window and a progress line a second
        assert len(windows) >= 29 and events.count("progress") >= 29, events
        assert checkpointed, "no periodic commit"
    else:
        assert windows == [], windows
        assert "progress" not in events, events
        assert checkpointed == {}, checkpointed
