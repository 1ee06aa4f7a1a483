"""Inputs given with ``end=False`` stay open: a window fires under a ManualClock, and the run
ends by a task's shutdown or by its timeout."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from samzapy import (
    KafkaSystemDescriptor,
    KVSerde,
    RequestScope,
    StreamApplication,
    StreamTask,
    WindowableTask,
)
from samzapy.testing import ManualClock, TestRunner

#: The tasks made by the last run, in the order the container made them (by partition).
made: list[Counts] = []


class Counts(WindowableTask, StreamTask):
    """Counts messages; each window notes the count, and the third shuts the job down."""

    def __init__(self) -> None:
        self.count = 0
        self.windows: list[int] = []
        made.append(self)

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        self.count += 1

    def window(self, collector, coordinator):  # type: ignore[no-untyped-def]
        self.windows.append(self.count)
        if len(self.windows) == 3:
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)


@pytest.fixture(autouse=True)
def _forget_made() -> None:
    made.clear()


def test_a_window_fires_on_an_open_input_until_the_task_shuts_the_job_down() -> None:
    clock = ManualClock(0.0, autojump=True)
    runner = TestRunner(Counts, {"task.window.ms": 60_000}, clock=clock)
    runner.add_input("in", ["a", "b"], end=False).run(timeout=10)
    (task,) = made
    assert task.windows == [2, 2, 2]
    assert clock.now() == 180.0
    assert not runner.broker.partition("in", 0).ended  # the task ended the job, not the input


async def test_a_test_moves_the_clock_while_the_job_waits_on_an_open_input() -> None:
    clock = ManualClock(0.0)
    runner = TestRunner(Counts, {"task.window.ms": 1_000}, clock=clock)
    runner.add_input("in", {0: ["a"], 1: []}, end=False)
    running = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    first, second = made
    assert (first.windows, second.windows) == ([], [])  # no time has passed
    await clock.advance_and_settle(1.0)
    assert (first.windows, second.windows) == ([1], [0])
    await clock.advance_and_settle(1.0)
    assert not running.done()  # the input is open: only the third window ends the job
    await clock.advance_and_settle(1.0)
    await asyncio.wait_for(running, timeout=5)
    assert first.windows == [1, 1, 1]


def test_an_open_input_nobody_shuts_down_ends_at_the_timeout_naming_it() -> None:
    runner = TestRunner(Counts).add_input("in", ["a"], end=False)  # and no window
    with pytest.raises(TimeoutError, match=r"within 0\.3 s") as raised:
        runner.run(timeout=0.3)
    text = str(raised.value)
    assert "not ended: memory.in#0" in text
    assert "given with end=False, in never end" in text


def test_an_applications_input_can_stay_open_too() -> None:
    kafka = KafkaSystemDescriptor("kafka")
    numbers = kafka.get_input_descriptor("numbers", "json")

    class Drops(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            app_desc.get_input_stream(numbers).sink(lambda m, c, k: None)

    runner = TestRunner.of(Drops).add_input_stream(numbers, [1, 2], end=False)
    with pytest.raises(TimeoutError, match=r"not ended: kafka\.numbers#0"):
        runner.run(timeout=0.3)


class AsksForItself(StreamTask):
    """Asks to shut down, with the default scope (its own task), at its first message."""

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        coordinator.shutdown()


def test_a_timeout_says_which_tasks_asked_to_shut_down_and_what_the_job_waits_for() -> None:
    # Partition 0's task asks to shut down; partition 1's gets no message and never asks:
    # as in Samza, the job goes on until every task has asked, so the run times out. The
    # error must not leave the test's author thinking the shutdown was lost.
    runner = TestRunner(AsksForItself).add_input("in", {0: ["a"], 1: []}, end=False)
    with pytest.raises(TimeoutError) as raised:
        runner.run(timeout=0.3)
    text = str(raised.value)
    assert "task 'Partition 0' (processed 1; asked to shut down;" in text
    assert "task 'Partition 1' (processed 0; not ended" in text
    assert "once every task has asked" in text
    assert "RequestScope.ALL_TASKS_IN_CONTAINER" in text


def test_a_tasks_shutdown_request_is_logged_once_with_the_tasks_the_job_waits_for() -> None:
    # As Samza logs "Shutdown has now been requested by tasks ...": in a real job the request
    # of one task among several otherwise changes nothing anyone can see.
    runner = TestRunner(AsksForItself).add_input("in", {0: ["a", "b"], 1: []}, end=False)
    with capture_logs() as logs, pytest.raises(TimeoutError):
        runner.run(timeout=0.3)
    asked = [e for e in logs if e["event"] == "shutdown_requested"]
    assert [(e["task"], e["waiting_for"]) for e in asked] == [("Partition 0", ["Partition 1"])]


def test_a_timeout_blames_an_applications_own_partition_by_on_the_input_before_it() -> None:
    # The application writes its partition_by stream itself: it cannot end while the input
    # before it is open, and "run the job that writes it first" would send the test's author
    # looking for another job.
    kafka = KafkaSystemDescriptor("kafka")
    numbers = kafka.get_input_descriptor("numbers", "json")

    class ByParity(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            app_desc.get_input_stream(numbers).partition_by(
                lambda n: str(n % 2), lambda n: n, KVSerde("string", "json"), "by-parity"
            ).sink(lambda m, c, k: None)

    runner = TestRunner.of(ByParity).add_input_stream(numbers, [1, 2], end=False)
    with pytest.raises(TimeoutError) as raised:
        runner.run(timeout=0.3)
    text = str(raised.value)
    assert "run the job that writes it" not in text
    assert "its upstream inputs have ended (upstream not ended: kafka.numbers)" in text
