"""An input partition told idle before it had a watermark, at event times before the epoch:
the idle marker it gets, and what a writer that reads only such partitions tells its
intermediate stream, carry a time below every event time, so a reader whose other upstream
task stands at -60 ms is not moved on to -1 (which would make its messages at -59 late).
"""

from __future__ import annotations

import asyncio
import uuid

from samzapy import SystemStreamPartition
from samzapy.api.system import SystemStream
from samzapy.container.consumers import InputSerdes, SystemConsumers
from samzapy.container.inputs import ControlEnvelope, InputQueue
from samzapy.control.reconcile import PartitionControl, TaskControl
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.consumer import InMemorySystemConsumer


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
