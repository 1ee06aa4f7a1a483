"""An input partition told idle before it had a watermark, at event times before the epoch:
the idle marker it gets, and what a writer that reads only such partitions tells its
intermediate stream, carry a time below every event time, so a reader whose other upstream
task stands at -60 ms is not moved on to -1 (which would make its messages at -59 late).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, ClassVar

from samzapy import (
    StreamTask,
    StreamWatermarkListenerTask,
    SystemStreamPartition,
    WatermarkListenerTask,
)
from samzapy.api.system import SystemStream
from samzapy.api.task import END_WATERMARK
from samzapy.container.consumers import InputSerdes, SystemConsumers
from samzapy.container.inputs import ControlEnvelope, InputQueue
from samzapy.control.reconcile import PartitionControl, TaskControl
from samzapy.control.wire import NO_WATERMARK, EndOfStreamMessage, WatermarkMessage, encode_control
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.consumer import InMemorySystemConsumer
from samzapy.testing import TestRunner


async def _idle_marker_of_an_empty_partition() -> object:
    broker = InMemoryBroker.for_namespace(f"idle-none-{uuid.uuid4().hex[:8]}")
    broker.create_stream("in", 1)
    ssp = SystemStreamPartition("memory", "in", 0)
    queue = InputQueue(ssp, 10)
    consumer = InMemorySystemConsumer(broker)
    consumer.register(ssp, None, "oldest")
    timed = InputSerdes(None, None, lateness_ms=0, event_time=lambda k, m: m, idle_ms=20)
    consumers = SystemConsumers(
        {"memory": consumer},
        {ssp: [queue]},
        {ssp: timed},
        compare_offsets={"memory": lambda a, b: int(a) - int(b)},
        poll_timeout=0.005,
        drop_deserialization_errors=False,
    )
    await consumer.start()
    run = asyncio.ensure_future(consumers.run("memory"))
    try:
        for _ in range(400):
            if queue.queue:
                break
            await asyncio.sleep(0.005)
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await consumer.stop()
    (marker,) = queue.queue
    assert isinstance(marker, ControlEnvelope)
    return marker.message


async def test_an_idle_upstream_without_a_watermark_does_not_move_negative_event_time_on() -> None:
    marker = await _idle_marker_of_an_empty_partition()
    assert marker.idle and marker.timestamp < -(2**62)  # below every event time
    a0 = SystemStreamPartition("memory", "in", 0)
    out = SystemStream("kafka", "shuffle")
    writer = TaskControl(carrying=[a0], outputs={out: [a0]})
    writer.receive(a0, marker)
    told = writer.advance_output_idleness()
    assert list(told) == [out] and told[out] < -(2**62)

    reader = PartitionControl()  # of the stream ``out``: the writer and another task
    reader.watermark_from("other", 2, -60)
    reader.watermark_from("other", 2, -60, idle=True)
    reader.watermark_from("writer", 2, told[out], idle=True)
    assert (reader.watermark, reader.idle) == (-60, True)


class _Recorder(StreamTask, WatermarkListenerTask, StreamWatermarkListenerTask):
    seen: ClassVar[list[tuple[str, int]]] = []

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass

    def on_watermark(self, watermark: int, collector: Any, coordinator: Any) -> None:
        _Recorder.seen.append(("task", watermark))

    def on_stream_watermark(
        self, stream: SystemStream, watermark: int, collector: Any, coordinator: Any
    ) -> None:
        _Recorder.seen.append((stream.stream, watermark))


def test_writers_all_idle_before_any_watermark_give_the_task_no_watermark() -> None:
    """Every writer of the task's partition said idle before it had a watermark (their
    inputs never got a message): the task has no watermark yet, and ``on_watermark`` is not
    called with the marker's placeholder, a time 292 million years before the epoch; the
    first real watermark is the first one given."""
    _Recorder.seen = []
    runner = TestRunner(_Recorder, {"streams.mid.samza.msg.serde": "string"})
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    for task in ("t0", "t1"):
        runner.broker.append(
            "mid", 0, None, encode_control(WatermarkMessage(task, 2, NO_WATERMARK, True))
        )
    runner.broker.append("mid", 0, None, encode_control(WatermarkMessage("t0", 2, 500)))
    for task in ("t0", "t1"):
        runner.broker.append("mid", 0, None, encode_control(EndOfStreamMessage(task, 2)))
    runner.run(timeout=20)
    assert _Recorder.seen == [("task", 500), ("mid", 500), ("mid", END_WATERMARK)]


def test_a_partition_whose_writers_are_all_idle_without_watermarks_has_none() -> None:
    partition = PartitionControl()
    partition.watermark_from("t0", 2, NO_WATERMARK, idle=True)
    partition.watermark_from("t1", 2, NO_WATERMARK, idle=True)
    assert (partition.idle, partition.watermark) == (True, None)
    partition.watermark_from("t1", 2, 40)  # active again: its watermark, t0 idle
    assert (partition.idle, partition.watermark) == (False, 40)
