"""README: ``window`` (and ``on_watermark``) may be coroutine functions, whatever
``job.container.thread.pool.size`` says. On the thread pool, a pooled sync task's coroutine
hook was handed to ``run_in_executor``, which uvloop refuses ("coroutines cannot be used with
run_in_executor()"): the job failed at its first window. A coroutine hook runs on the loop;
a plain one still runs on the pool, like ``process``."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, ClassVar

import pytest

from samzapy import StreamTask, WatermarkListenerTask, WindowableTask
from samzapy.control import WatermarkMessage, encode_control, frame
from samzapy.testing import TestRunner


class CoroutineHooks(WindowableTask, WatermarkListenerTask, StreamTask):
    """Its hooks are coroutine functions; once both ran, its process asks for a stop (the
    input stays open)."""

    ran: ClassVar[dict[str, int]] = {}

    def process(self, envelope, collector, coordinator):
        if {"window", "on_watermark"} <= self.ran.keys():
            coordinator.shutdown()
        time.sleep(0.02)  # the window falls due

    async def window(self, collector, coordinator):
        await asyncio.sleep(0)
        self.ran["window"] = threading.get_ident()

    async def on_watermark(self, watermark, collector, coordinator):
        await asyncio.sleep(0)
        self.ran["on_watermark"] = threading.get_ident()


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_pooled_sync_task_s_coroutine_hooks_run_on_the_loop(loop: str) -> None:
    CoroutineHooks.ran = {}
    config = {
        "job.loop": loop,
        "task.window.ms": 10,
        "job.container.thread.pool.size": 2,
        "streams.mid.samza.msg.serde": "string",
    }
    runner = TestRunner(CoroutineHooks, config).add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    record: Any = encode_control(WatermarkMessage("t0", 1, 5))
    runner.broker.append("mid", 0, None, record)
    for _ in range(20):
        runner.broker.append("mid", 0, None, frame(b"a"))
    runner.run(timeout=10)
    main = threading.get_ident()
    assert CoroutineHooks.ran == {"window": main, "on_watermark": main}
