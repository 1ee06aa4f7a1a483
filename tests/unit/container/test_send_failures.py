"""A send that cannot be routed fails the task naming the partition and offset of the message
whose call sent it, however the task runs and whenever the send is found to fail: in the call
(the stream's partitions known), or later (the first sends to a stream wait for them)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import (
    AsyncStreamTask,
    EndOfStreamListenerTask,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskError,
)
from samzapy.testing import TestRunner

OUT = SystemStream("memory", "out")  # one partition


def envelope(message: Any) -> OutgoingMessageEnvelope:
    """To partition 0 of ``out``, but message ``"bad"`` to partition 5, beyond its count."""
    return OutgoingMessageEnvelope(OUT, message, partition=5 if message == "bad" else 0)


class Sends(StreamTask):
    def process(self, env: Any, collector: Any, coordinator: Any) -> None:
        collector.send(envelope(env.message))


class SendsAsync(AsyncStreamTask):
    async def process_async(self, env: Any, collector: Any, coordinator: Any) -> None:
        await asyncio.sleep(0)
        collector.send(envelope(env.message))


def failed(task_class: type, config: dict[str, Any], messages: list[str]) -> dict[str, Any]:
    runner = TestRunner(task_class, config).add_input("in", {0: messages}).add_output("out")
    with capture_logs() as logs, pytest.raises(TaskError) as caught:
        runner.run()
    (event,) = [e for e in logs if e["event"] == "task_failed"]
    error = caught.value
    assert (error.ssp and str(error.ssp), error.offset) == (event["ssp"], event["offset"])
    return event


RUNS = pytest.mark.parametrize(
    ("task_class", "config"),
    [
        pytest.param(Sends, {}, id="sync"),
        pytest.param(Sends, {"job.container.thread.pool.size": 2}, id="thread-pool"),
        pytest.param(SendsAsync, {"task.max.concurrency": 4}, id="async"),
    ],
)


@RUNS
def test_a_first_send_failing_once_the_stream_is_looked_up_names_its_message(
    task_class: type, config: dict[str, Any]
) -> None:
    # The first sends to 'out' wait until its partition count is known: the failure comes
    # after the call returned.
    event = failed(task_class, config, ["ok", "bad", "ok"])
    assert (event["task"], event["ssp"], event["offset"]) == ("Partition 0", "memory.in#0", "1")
    assert "memory.in#0 at offset 1" in event["error"]
    assert "partition 5 is out of range for memory.out" in event["error"]


@RUNS
def test_a_later_send_failing_names_its_message(task_class: type, config: dict[str, Any]) -> None:
    # Enough good sends first for 'out' to be looked up: the bad one fails as it is routed.
    event = failed(task_class, config, ["ok"] * 500 + ["bad"] + ["ok"] * 10)
    assert (event["ssp"], event["offset"]) == ("memory.in#0", "500")


class SendsAtTheEnd(StreamTask, EndOfStreamListenerTask):
    def process(self, env: Any, collector: Any, coordinator: Any) -> None:
        pass

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        collector.send(envelope("bad"))


class SendsAtTheEndAsync(AsyncStreamTask, EndOfStreamListenerTask):
    async def process_async(self, env: Any, collector: Any, coordinator: Any) -> None:
        pass

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        collector.send(envelope("bad"))


@pytest.mark.parametrize("task_class", [SendsAtTheEnd, SendsAtTheEndAsync])
def test_a_send_made_for_no_message_names_none(task_class: type) -> None:
    # Sent by on_end_of_stream, after the last message's call: no message to name.
    event = failed(task_class, {}, ["a"] * 100)
    assert (event["task"], event["ssp"], event["offset"]) == ("Partition 0", None, None)
