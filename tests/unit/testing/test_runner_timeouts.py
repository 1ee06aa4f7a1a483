"""A run that cannot finish fails at its timeout, saying what was still running."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from samzapy import AsyncStreamTask, ClosableTask, InitableTask, StreamTask, TaskError
from samzapy.testing import ManualClock, TestRunner


class Nothing(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        pass


class Stuck(AsyncStreamTask):
    async def process_async(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        if envelope.message == "stuck":
            await asyncio.Event().wait()


def test_an_intermediate_stream_nothing_ends_is_named_in_the_timeout() -> None:
    # Read only, never written: no task of the job sends its end-of-stream.
    runner = TestRunner(Nothing).add_intermediate("mid", partitions=2)
    with pytest.raises(TimeoutError, match=r"within 0\.5 s") as raised:
        runner.run(timeout=0.5)
    text = str(raised.value)
    assert "task 'Partition 0'" in text and "task 'Partition 1'" in text
    assert "not ended: memory.mid#0" in text and "not ended: memory.mid#1" in text
    assert "run the job that writes it in this namespace first" in text


def test_a_call_that_never_returns_is_named_with_its_partition_and_offset() -> None:
    runner = TestRunner(Stuck, {"task.callback.timeout.ms": -1})
    runner.add_input("in", {0: ["a", "stuck", "b"], 1: ["c"]})
    with pytest.raises(TimeoutError) as raised:
        runner.run(timeout=0.5)
    text = str(raised.value)
    assert "task 'Partition 0' (processed 1; a call in flight on memory.in#0 at offset 1" in text
    assert "Partition 1" not in text  # it finished


async def test_run_async_times_out_the_same_way() -> None:
    runner = TestRunner(Nothing).add_intermediate("mid")
    with pytest.raises(TimeoutError, match=r"not ended: memory\.mid#0"):
        await runner.run_async(timeout=0.3)


class FailsThenHangsInClose(StreamTask, ClosableTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        raise ValueError("boom")

    async def close(self) -> None:
        await asyncio.Event().wait()


def test_a_failure_whose_close_never_returns_is_the_timeouts_cause() -> None:
    runner = TestRunner(FailsThenHangsInClose).add_input("in", ["a"])
    with pytest.raises(TimeoutError, match=r"the job failed .*ValueError\('boom'\)") as raised:
        runner.run(timeout=0.5)
    assert "was still stopping" in str(raised.value)
    assert isinstance(raised.value.__cause__, TaskError)
    assert isinstance(raised.value.__cause__.__cause__, ValueError)


class Sleeps(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        time.sleep(1.0)  # holds the event loop: nothing else runs, the timeout included


def test_a_synchronous_call_holding_the_event_loop_is_named() -> None:
    runner = TestRunner(Sleeps, {"task.callback.timeout.ms": -1}).add_input("in", ["a", "b"])
    with pytest.raises(TimeoutError, match=r"the event loop was held .* job\.container\.thread"):
        runner.run(timeout=0.2)


class BlocksItsThread(StreamTask):
    """A call on the thread pool that returns only when the test lets it (or after 6 s)."""

    released = threading.Event()

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        self.released.wait(6.0)


@pytest.mark.parametrize("clock", [None, ManualClock(0.0)], ids=["loop clock", "manual clock"])
def test_a_call_stuck_on_the_thread_pool_does_not_outlast_the_timeout(
    clock: ManualClock | None,
) -> None:
    # The container gives such calls task.shutdown.ms (30 s, on its clock) after a failure;
    # a run its caller gave up on must not wait for them.
    BlocksItsThread.released = threading.Event()
    runner = TestRunner(BlocksItsThread, {"job.container.thread.pool.size": 2}, clock=clock)
    runner.add_input("in", {0: ["a"], 1: ["b"]})
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match=r"a call in flight on memory\.in#0 at offset 0"):
            runner.run(timeout=0.3)
        assert time.monotonic() - started < 3.0
    finally:
        BlocksItsThread.released.set()


class StuckInInit(StreamTask, InitableTask):
    def init(self, context):  # type: ignore[no-untyped-def]
        if str(context.task_name) == "Partition 1":
            return asyncio.Event().wait()  # an init that never returns
        return None

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        pass


def test_an_init_that_never_returns_is_named_with_its_task() -> None:
    runner = TestRunner(StuckInInit).add_input("in", {0: ["a"], 1: ["b"]})
    with pytest.raises(TimeoutError, match=r"still starting: the init of task 'Partition 1'"):
        runner.run(timeout=0.3)
