"""ManualClock: time moves only when told to, or with autojump when every task is blocked."""

from __future__ import annotations

import asyncio

import pytest

from samzapy import RequestScope, StreamTask, WindowableTask
from samzapy.testing import ManualClock, TestRunner, wait_all_tasks_blocked


async def test_sleepers_wake_in_deadline_order_only_when_time_reaches_them() -> None:
    clock = ManualClock(start=10.0)
    woke: list[str] = []

    async def sleeper(name: str, deadline: float) -> None:
        await clock.sleep_until(deadline)
        woke.append(name)

    tasks = [asyncio.ensure_future(sleeper(n, d)) for n, d in [("b", 12.0), ("a", 11.0)]]
    await wait_all_tasks_blocked()
    assert woke == []
    await clock.advance_and_settle(1.5)
    assert woke == ["a"] and clock.now() == 11.5
    await clock.advance_and_settle(0.5)
    assert woke == ["a", "b"]
    await asyncio.gather(*tasks)


async def test_wait_all_tasks_blocked_returns_after_a_chain_of_wakeups() -> None:
    steps: list[int] = []

    async def chain(n: int) -> None:
        for i in range(n):
            await asyncio.sleep(0)
            steps.append(i)

    task = asyncio.ensure_future(chain(200))  # far more rounds than any fixed guess
    await wait_all_tasks_blocked()
    assert steps == list(range(200)) and task.done()


async def test_autojump_moves_to_the_next_deadline_when_everything_waits() -> None:
    clock = ManualClock(autojump=True)
    times: list[float] = []

    async def ticker() -> None:
        for deadline in (5.0, 7.5, 60.0):
            await clock.sleep_until(deadline)
            times.append(clock.now())

    await asyncio.wait_for(ticker(), timeout=5)
    assert times == [5.0, 7.5, 60.0]


def test_a_job_with_an_autojumping_clock_gets_its_windows_without_waiting() -> None:
    windows: list[float] = []
    clock = ManualClock(autojump=True)

    class Task(WindowableTask, StreamTask):
        def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
            pass

        def window(self, collector, coordinator):  # type: ignore[no-untyped-def]
            windows.append(clock.now())
            if len(windows) == 3:
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    # The input never ends: only three windows, an hour of the job's time apart, end it.
    runner = TestRunner(Task, {"task.window.ms": 3_600_000}, clock=clock).add_input("in", {0: []})
    runner.broker.create_stream("in", 1)
    runner.broker.append("in", 0, None, "one message")
    runner.run(timeout=10)
    assert windows == [3600.0, 7200.0, 10800.0]


async def test_uvloop_cannot_tell_when_tasks_are_blocked() -> None:
    import uvloop

    async def attempt() -> None:
        await wait_all_tasks_blocked()

    with pytest.raises(RuntimeError, match="run the test on asyncio's own event loop"):
        await asyncio.to_thread(uvloop.run, attempt())


@pytest.mark.parametrize("seconds", [-1.0, float("nan")])
def test_advance_refuses_to_move_time_back(seconds: float) -> None:
    clock = ManualClock(start=10.0)
    with pytest.raises(ValueError, match=r"advance moves time forward: seconds must be >= 0"):
        clock.advance(seconds)
    assert clock.now() == 10.0
