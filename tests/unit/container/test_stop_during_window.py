"""A stop that comes while a task's window (a barrier: no call is in flight) outlasts
``task.shutdown.ms``: the ``shutdown_timed_out`` warning names the task and says what it was
running. It had said ``tasks: []``, ``in_flight: 0``: a timeout over nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from structlog.testing import capture_logs

from samzapy import RequestScope, StreamTask, WindowableTask
from samzapy.testing import TestRunner


class StopsInASlowWindow(StreamTask, WindowableTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass

    async def window(self, collector: Any, coordinator: Any) -> None:
        coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)  # as SIGTERM would
        await asyncio.sleep(30)


def test_a_window_outlasting_task_shutdown_ms_is_named_in_shutdown_timed_out() -> None:
    config = {"task.window.ms": 50, "task.shutdown.ms": 200, "task.commit.ms": 600_000}
    began = time.monotonic()
    with capture_logs() as logs:
        TestRunner(StopsInASlowWindow, config).add_input("in", [1], end=False).run(timeout=10)
    assert time.monotonic() - began < 5
    [timed_out] = [e for e in logs if e["event"] == "shutdown_timed_out"]
    assert timed_out["tasks"] == ["Partition 0"], timed_out
    assert timed_out["in_flight"] == 0
    assert timed_out["running"] == {"Partition 0": "a window, commit, watermark or end-of-stream"}
