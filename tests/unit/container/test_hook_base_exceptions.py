"""A task's hook (init, window, on_watermark, on_end_of_stream, close) that raises a
BaseException of its own (a CancelledError its code raises, not a stop's; SystemExit;
KeyboardInterrupt) fails the job like any error of the hook, naming the task and the hook,
as one from ``process`` does (test_run_loop.py). A CancelledError from window or
on_end_of_stream killed the task's slot silently and the job hung; SystemExit escaped the
container unnamed, and its exit code was the task's."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from samzapy import (
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    TaskError,
    WatermarkListenerTask,
    WindowableTask,
)
from samzapy.control import EndOfStreamMessage, WatermarkMessage, encode_control, frame
from samzapy.testing import TestRunner


class RaisesInHook(
    InitableTask,
    WindowableTask,
    WatermarkListenerTask,
    EndOfStreamListenerTask,
    ClosableTask,
    StreamTask,
):
    """The hook ``failing`` raises ``error`` (window and on_watermark only once the task has
    processed a message, so that the failure is not a start-up one)."""

    failing: ClassVar[str] = ""
    error: ClassVar[BaseException] = asyncio.CancelledError()

    def __init__(self) -> None:
        self.processed = False

    def _hook(self, name: str) -> None:
        if name == RaisesInHook.failing:
            raise RaisesInHook.error

    def init(self, context):
        self._hook("init")

    def process(self, envelope, collector, coordinator):
        self.processed = True
        if envelope.message == "stop":
            coordinator.shutdown()

    def window(self, collector, coordinator):
        if self.processed:
            self._hook("window")

    def on_watermark(self, watermark, collector, coordinator):
        self._hook("on_watermark")

    async def on_end_of_stream(self, collector, coordinator):
        self._hook("on_end_of_stream")

    def close(self):
        self._hook("close")


#: What the framed input holds after ``a`` for each hook to run: nothing (the stream stays
#: open, the window fires), a watermark, the end, a stop.
AFTER = {
    "init": [],
    "window": [],
    "on_watermark": [WatermarkMessage("t0", 1, 5)],
    "on_end_of_stream": [EndOfStreamMessage("t0", 1)],
    "close": ["stop"],
}


@pytest.mark.parametrize("pool", [0, 2], ids=["inline", "pool"])
@pytest.mark.parametrize(
    "error", [asyncio.CancelledError(), SystemExit(0), KeyboardInterrupt()], ids=type
)
@pytest.mark.parametrize("hook", list(AFTER))
def test_a_base_exception_of_a_hook_s_own_fails_the_job_naming_the_hook(
    hook: str, error: BaseException, pool: int
) -> None:
    RaisesInHook.failing, RaisesInHook.error = hook, error
    config = {
        "task.window.ms": 10,
        "job.container.thread.pool.size": pool,
        "streams.mid.samza.msg.serde": "string",
    }
    runner = TestRunner(RaisesInHook, config).add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    for item in ["a", *AFTER[hook]]:
        record: Any = frame(item.encode()) if isinstance(item, str) else encode_control(item)
        runner.broker.append("mid", 0, None, record)
    with pytest.raises(TaskError, match=rf"{hook}\(\) of task 'Partition 0' failed") as err:
        runner.run(timeout=10)
    assert type(err.value.__cause__) is type(error)
