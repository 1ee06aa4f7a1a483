"""The values of task metrics docs/deploy.md ("Metrics") lists and other tests only see
present: ``windows`` counts the window calls completed, ``restored-records`` the changelog
records a task's last start restored into its stores."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import (
    InitableTask,
    RequestScope,
    StreamTask,
    TaskError,
    WindowableTask,
)
from samzapy.control import frame
from samzapy.testing import ManualClock, TestRunner

WINDOWS = 3


class ShutsDownAtItsThirdWindow(WindowableTask, StreamTask):
    def __init__(self) -> None:
        self.windows = 0

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass

    def window(self, collector: Any, coordinator: Any) -> None:
        self.windows += 1
        if self.windows == WINDOWS:
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)


async def test_windows_counts_the_window_calls_completed() -> None:
    clock = ManualClock()
    config = {"task.window.ms": 1000, "streams.mid.samza.msg.serde": "string"}
    # An input that never ends (no end-of-stream): the task runs until its third window.
    runner = TestRunner(ShutsDownAtItsThirdWindow, config, clock=clock).add_intermediate(
        "mid", partitions=1
    )
    runner.broker.create_stream("mid", 1)
    runner.broker.append("mid", 0, None, frame(b"a"))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    for _ in range(WINDOWS):
        await clock.advance_and_settle(1.0)
    result = await asyncio.wait_for(job, 10)
    task = result.metrics.snapshot()["task.Partition 0"]
    assert (task["windows"], task["messages-processed"]) == (WINDOWS, 1)


class CountsThenFails(InitableTask, StreamTask):
    fail_at: int | None = 40

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)
        if int(envelope.offset) == 29:
            coordinator.commit(RequestScope.CURRENT_TASK)
        if CountsThenFails.fail_at is not None and int(envelope.offset) == CountsThenFails.fail_at:
            raise RuntimeError("crash")


def test_restored_records_counts_what_the_tasks_last_start_restored(tmp_path: Path) -> None:
    config = {
        "stores.counts.factory": "inmemory",  # nothing kept locally: a restart replays
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.changelog": "memory.counts-changelog",
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.commit.ms": -1,
    }
    words = {0: [f"w{i % 12}" for i in range(60)]}
    first = TestRunner(CountsThenFails, config).add_input("words", words)
    with pytest.raises(TaskError):
        first.run(timeout=10)
    CountsThenFails.fail_at = None
    try:
        with capture_logs() as logs:
            result = (
                TestRunner(CountsThenFails, config, namespace=first.namespace)
                .add_input("words", words)
                .run(timeout=10)
            )
    finally:
        CountsThenFails.fail_at = 40
    restored = [e["records"] for e in logs if e["event"] == "store_restored"]
    assert restored == [12]  # the twelve words' counts the commit at offset 29 wrote
    assert result.metrics.snapshot()["task.Partition 0"]["restored-records"] == restored[0]
