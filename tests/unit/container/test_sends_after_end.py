"""A task's send to an intermediate stream after it sent the stream its end-of-stream fails
the task, naming it and the stream: the stream's readers may have finished, so the message
would never be read (it used to vanish). The send made in time, from ``on_stream_watermark``
at the end of an upstream input, reaches the readers."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from samzapy import (
    END_WATERMARK,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    OutgoingMessageEnvelope,
    StreamSystemError,
    StreamTask,
    StreamWatermarkListenerTask,
    SystemStream,
    TaskError,
    TaskName,
)
from samzapy.container.collector import OutputRouter
from samzapy.control.wire import EndOfStreamMessage, encode_control
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.testing import TestRunner

LINES = SystemStream("memory", "lines")
WORDS = SystemStream("memory", "words")
COUNTS = SystemStream("memory", "counts")


class TwoStages(InitableTask, StreamTask, EndOfStreamListenerTask):
    """Stage 1 counts the words of its lines and sends each task's counts to ``words`` at
    its end; stage 2 (the same tasks, reading ``words``) adds them up."""

    def init(self, context: Any) -> None:
        self.counts: dict[str, int] = {}
        self.totals: dict[str, int] = {}

    def process(self, env: Any, collector: Any, coordinator: Any) -> None:
        if env.system_stream_partition.system_stream == LINES:
            for word in env.message.split():
                self.counts[word] = self.counts.get(word, 0) + 1
        else:
            self.totals[env.key] = self.totals.get(env.key, 0) + env.message

    def send_counts(self, collector: Any) -> None:
        for word, n in self.counts.items():
            collector.send(OutgoingMessageEnvelope(WORDS, n, key=word))
        self.counts = {}

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        self.send_counts(collector)  # too late: every input ended, words too
        for word, n in self.totals.items():
            collector.send(OutgoingMessageEnvelope(COUNTS, n, key=word))


class TwoStagesInTime(TwoStages, StreamWatermarkListenerTask):
    """The counts sent when the lines end, before the task ends its writing to ``words``."""

    def on_stream_watermark(
        self, stream: SystemStream, watermark: int, collector: Any, coordinator: Any
    ) -> None:
        if stream == LINES and watermark == END_WATERMARK:
            self.send_counts(collector)


def _run(task: type) -> Any:
    return (
        TestRunner(task, {"task.inputs": ["memory.lines", "memory.words"]})
        .add_input("lines", {0: ["a b a", "c"], 1: ["b c", "a"]})
        .add_intermediate("words", 2)
        .add_output("counts", 2)
        .run(timeout=10)
    )


def test_a_send_to_an_intermediate_stream_after_its_end_fails_the_task_naming_both() -> None:
    with pytest.raises(TaskError) as info:
        _run(TwoStages)
    message = str(info.value)
    assert "on_end_of_stream() of task 'Partition " in message
    assert "sent to memory.words after its end-of-stream" in message
    assert "on_stream_watermark" in message


def test_the_same_counts_sent_at_the_end_of_the_upstream_input_are_all_read() -> None:
    result = _run(TwoStagesInTime)
    totals: dict[str, int] = {}
    for records in result.keyed_outputs("counts").values():
        for word, n in records:
            assert word not in totals  # each word's total from the one task its key reaches
            totals[word] = n
    assert totals == {"a": 3, "b": 2, "c": 2}


class SendsAtClose(TwoStagesInTime, ClosableTask):
    """What it sends to ``words`` from ``close``, once the job ended, comes after the end."""

    def process(self, env: Any, collector: Any, coordinator: Any) -> None:
        self.collector = collector
        super().process(env, collector, coordinator)

    def close(self) -> None:
        self.counts = {"late": 1}
        self.send_counts(self.collector)


def test_a_send_to_an_ended_intermediate_stream_from_close_fails_the_task_too() -> None:
    """The router forgot the task's ends before its close ran: the send vanished, exit 0."""
    with pytest.raises(TaskError) as info:
        _run(SendsAtClose)
    assert "close() of task 'Partition " in str(info.value)
    assert "sent to memory.words after its end-of-stream" in str(info.value)


async def test_the_router_refuses_the_ended_task_only_until_its_instance_closes() -> None:
    broker = InMemoryBroker.for_namespace(f"ends-{uuid.uuid4().hex[:8]}")
    broker.create_stream("words", 2)
    factory = InMemorySystemFactory("memory", {"namespace": broker.namespace})
    errors: list[BaseException] = []
    router = OutputRouter(
        {"memory": factory.get_producer()},
        {"memory": factory.get_admin()},
        lambda ss: (None, None),
        lambda ss: 2,
        errors.append,
        framed=lambda ss: True,
    )
    ended, other = TaskName("Partition 0"), TaskName("Partition 1")
    try:
        await router.prepare([WORDS])
        router.broadcast_control(
            WORDS, encode_control(EndOfStreamMessage(str(ended), 2)), ended_by=ended
        )
        envelope = OutgoingMessageEnvelope(WORDS, b"1", key=b"a")
        router.send(envelope, other)  # another task still writes it
        with pytest.raises(StreamSystemError, match=r"'Partition 0' sent to memory\.words after"):
            router.send(envelope, ended)
        router.forget_ends(ended)  # the task's instance closed: a later one starts afresh
        router.send(envelope, ended)
        await router.flush()
        assert errors == []
    finally:
        InMemoryBroker.drop_namespace(broker.namespace)
