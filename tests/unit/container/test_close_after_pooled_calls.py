"""After a failure, a task's ``close`` does not overlap its call still running on the thread
pool (``job.container.thread.pool.size`` above 1): that call cannot be cancelled, so the
failed container gives it up to ``task.shutdown.ms`` to return before it closes the tasks,
as Samza's container awaits its task thread pool's termination before closing the tasks.
It closed them at once: a ``close`` releasing what ``process`` was still using (a client,
a connection) ran beside it."""

from __future__ import annotations

import threading
import time
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from samzapy import ClosableTask, InitableTask, StreamTask, TaskError
from samzapy.testing import TestRunner


class FailsBesideASlowCall(InitableTask, ClosableTask, StreamTask):
    """Partition 1's call runs ``slow_s`` on the pool, or until ``release`` (which
    partition 0's close sets when ``release_on_close``); partition 0's fails once partition
    1's has started."""

    events: ClassVar[list[tuple[str, str]]] = []
    lock = threading.Lock()
    entered = threading.Event()
    release = threading.Event()
    slow_s: ClassVar[float] = 1.0
    release_on_close: ClassVar[bool] = True

    def init(self, context: Any) -> None:
        self.name = str(context.task_name)

    def _add(self, event: str) -> None:
        with self.lock:
            self.events.append((event, self.name))

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if self.name == "Partition 0":
            FailsBesideASlowCall.entered.wait(10)
            raise RuntimeError("boom")
        self._add("process_started")
        FailsBesideASlowCall.entered.set()
        FailsBesideASlowCall.release.wait(self.slow_s)
        self._add("process_returned")

    def close(self) -> None:
        self._add("close")
        if self.release_on_close:
            FailsBesideASlowCall.release.set()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    FailsBesideASlowCall.events = []
    FailsBesideASlowCall.entered.clear()
    FailsBesideASlowCall.release.clear()


def _run(shutdown_ms: int) -> TestRunner:
    config = {"job.container.thread.pool.size": 2, "task.shutdown.ms": shutdown_ms}
    runner = TestRunner(FailsBesideASlowCall, config).add_input("in", {0: ["a"], 1: ["a"]})
    with pytest.raises(TaskError, match=r"process\(\) of task 'Partition 0' failed"):
        runner.run(timeout=10)
    return runner


def test_a_failed_container_closes_a_task_only_once_its_pooled_call_returned() -> None:
    _run(shutdown_ms=30000)
    assert FailsBesideASlowCall.events == [
        ("process_started", "Partition 1"),
        ("process_returned", "Partition 1"),
        ("close", "Partition 0"),
        ("close", "Partition 1"),
    ]


def test_a_pooled_call_outlasting_task_shutdown_ms_is_given_up_and_logged() -> None:
    FailsBesideASlowCall.slow_s, FailsBesideASlowCall.release_on_close = 10.0, False
    try:
        started = time.monotonic()
        with capture_logs() as logs:
            _run(shutdown_ms=200)
        assert time.monotonic() - started < 5
        timed_out = [e for e in logs if e["event"] == "shutdown_timed_out"]
        assert [(e["tasks"], e["in_flight"]) for e in timed_out] == [(["Partition 1"], 1)]
        # Given up: closed while it still runs.
        assert ("close", "Partition 1") in FailsBesideASlowCall.events
        assert ("process_returned", "Partition 1") not in FailsBesideASlowCall.events
    finally:
        FailsBesideASlowCall.release.set()
        FailsBesideASlowCall.slow_s, FailsBesideASlowCall.release_on_close = 1.0, True
