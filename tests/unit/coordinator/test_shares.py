"""The process's one ``progress`` line over the shares it runs under kafka-group."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from structlog.testing import capture_logs

from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.container.progress import TaskProgress
from samzapy.coordinator.shares import Share, Shares


def progress(task: int, processed: int, in_flight: int = 0) -> TaskProgress:
    return TaskProgress(
        name=TaskName.for_partition(task),
        processed=processed,
        in_flight=in_flight,
        windows=0,
        commits=0,
        buffered=0,
        position=None,
        barrier_pending=False,
        backpressured=False,
        stopping=False,
        finished=False,
        committed_at=None,
        committed_processed=0,
    )


class Loop:
    """A share's run loop as the progress line reads it."""

    def __init__(self, tasks: dict[int, tuple[int, int]], lag: dict[int, int]) -> None:
        self._tasks, self._lag = tasks, lag

    def task_progress(self) -> list[TaskProgress]:
        return [progress(t, n, f) for t, (n, f) in self._tasks.items()]

    @property
    def lags(self) -> dict[TaskName, dict[SystemStreamPartition, Any]]:
        return {
            TaskName.for_partition(t): {SystemStreamPartition("kafka", "in", t): lambda v=v: v}
            for t, v in self._lag.items()
        }


def share(loop: Loop | None, tasks: set[int], run: asyncio.Future[None]) -> Share:
    return Share(SimpleNamespace(run_loop=loop), run, tasks)  # type: ignore[arg-type]


async def test_one_line_over_every_running_share_counting_the_whole_process() -> None:
    shares = Shares(lambda tasks: None)  # type: ignore[arg-type,return-value]
    running = asyncio.get_running_loop().create_future()
    ended = asyncio.get_running_loop().create_future()
    ended.set_result(None)
    shares.shares = [
        share(Loop({0: (100, 1), 1: (50, 0)}, {0: 7, 1: 2}), {0, 1}, running),
        share(Loop({2: (30, 2)}, {2: 40}), {2}, running),
        share(Loop({3: (999, 0)}, {3: 1000}), {3}, ended),  # its run ended: left out
        share(None, {4}, running),  # still starting
    ]
    counts = [1000, 1000, 1100]  # read at the start, then at each tick
    two_ticks = asyncio.Event()

    def processed() -> int:
        if len(counts) == 1:
            two_ticks.set()  # the second tick logs before this test goes on
        return counts.pop(0)

    with capture_logs() as logs:
        reporting = asyncio.ensure_future(shares.report_progress(10, processed, lambda: "member-1"))
        await asyncio.wait_for(two_ticks.wait(), 5)
        reporting.cancel()
    lines = [e for e in logs if e["event"] == "progress"]
    assert len(lines) == 2
    assert [e["processed"] for e in lines] == [1000, 1100], "the process's count, not a share's"
    assert lines[1]["rate"] > 0 and lines[0]["rate"] == 0
    assert {k: lines[1][k] for k in ("in_flight", "tasks_running", "lag", "lag_max")} == {
        "in_flight": 3,
        "tasks_running": 3,
        "lag": 49,
        "lag_max": 40,
    }
    assert lines[1]["lag_max_partition"] == "kafka.in#2"
    assert lines[1]["member"] == "member-1"


async def test_no_line_while_no_task_runs() -> None:
    shares = Shares(lambda tasks: None)  # type: ignore[arg-type,return-value]
    with capture_logs() as logs:
        reporting = asyncio.ensure_future(shares.report_progress(20, lambda: 0, lambda: None))
        await asyncio.sleep(0.1)
        reporting.cancel()
    assert [e for e in logs if e["event"] == "progress"] == []
