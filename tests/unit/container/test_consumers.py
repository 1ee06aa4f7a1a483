"""The consumers' poll rule and back-pressure: a partition is polled only while each of its
queues is at most half full, for as much as the fullest of them has room for; with no room
the consumer waits until a task drains a queue to half; ended partitions are polled no more;
a partition with an idle timeout that delivers nothing for that long is told idle."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from samzapy import IncomingMessageEnvelope, SystemStreamPartition
from samzapy.container.consumers import InputSerdes, SystemConsumers
from samzapy.container.inputs import NO_OFFSET, ControlEnvelope, InputQueue, TaskInputs
from samzapy.control.wire import WatermarkMessage
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.consumer import InMemorySystemConsumer
from samzapy.system.ports import SystemConsumer

CAPACITY = 10


class RecordingConsumer(SystemConsumer):
    """The memory consumer, noting each poll with the queue lengths it was asked under."""

    def __init__(self, inner: InMemorySystemConsumer, queues: Mapping[Any, InputQueue]) -> None:
        self.inner = inner
        self.queues = queues
        self.polls: list[tuple[list[int], int, list[int]]] = []

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        self.inner.register(ssp, offset, default)

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        lengths = [len(q.queue) for q in self.queues.values()]
        self.polls.append(([s.partition for s in ssps], max_messages, lengths))
        return await self.inner.poll(ssps, max_messages, timeout)


class Rig:
    def __init__(self, records: int, *, ended: bool = False) -> None:
        broker = InMemoryBroker.for_namespace(f"poll-{uuid.uuid4().hex[:8]}")
        broker.create_stream("in", 2)
        for p in range(2):
            for i in range(records):
                broker.append("in", p, None, i)
        if ended:
            broker.end_stream("in")
        self.ssps = [SystemStreamPartition("memory", "in", p) for p in range(2)]
        self.queues = {ssp: InputQueue(ssp, CAPACITY) for ssp in self.ssps}
        self.consumer = RecordingConsumer(InMemorySystemConsumer(broker), self.queues)
        for ssp in self.ssps:
            self.consumer.register(ssp, None, "oldest")
        self.consumers = SystemConsumers(
            {"memory": self.consumer},
            {ssp: [q] for ssp, q in self.queues.items()},
            {},
            compare_offsets={"memory": lambda a, b: int(a) - int(b)},
            poll_timeout=0.001,
            drop_deserialization_errors=False,
        )
        self.inputs = TaskInputs(self.queues.values(), space_freed=self.consumers.space_freed)

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0)


async def test_polls_only_while_queues_have_room_then_waits_for_space() -> None:
    rig = Rig(100)
    await rig.consumer.start()
    run = asyncio.ensure_future(rig.consumers.run("memory"))
    await rig.settle()
    # Polls ask only for partitions at most half full, for the room of the fullest.
    for partitions, room, lengths in rig.consumer.polls:
        assert partitions, "a poll always names partitions"
        assert all(lengths[p] <= CAPACITY // 2 for p in partitions)
        assert room == min(CAPACITY - lengths[p] for p in partitions)
    # Both queues are now above half: the consumer waits, it does not spin.
    assert all(len(q.queue) > CAPACITY // 2 for q in rig.queues.values())
    polls = len(rig.consumer.polls)
    await rig.settle()
    assert len(rig.consumer.polls) == polls
    # A task drains partition 0 to half: only partition 0 is polled.
    while len(rig.queues[rig.ssps[0]].queue) > CAPACITY // 2:
        env = rig.inputs.choose()
        while env is not None and env.system_stream_partition != rig.ssps[0]:
            env = rig.inputs.choose()
    await rig.settle()
    assert len(rig.consumer.polls) > polls
    assert rig.consumer.polls[polls][0] == [0]
    assert all(len(q.queue) <= CAPACITY for q in rig.queues.values())
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


async def test_memory_stays_bounded_and_messages_arrive_in_order() -> None:
    rig = Rig(500, ended=True)
    await rig.consumer.start()
    run = asyncio.ensure_future(rig.consumers.run("memory"))
    seen: dict[int, list[int]] = {0: [], 1: []}
    ends = 0
    while ends < 2:
        await asyncio.sleep(0)
        assert all(len(q.queue) <= CAPACITY for q in rig.queues.values())
        env = rig.inputs.choose()
        if isinstance(env, ControlEnvelope):
            assert env.is_end_of_stream
            rig.inputs.end(env.system_stream_partition)
            ends += 1
        elif env is not None:
            seen[env.system_stream_partition.partition].append(env.message)
    assert seen == {0: list(range(500)), 1: list(range(500))}
    await asyncio.wait_for(run, 5)  # every partition ended: the coroutine returns


async def test_a_partition_its_tasks_ended_is_polled_no_more() -> None:
    rig = Rig(3)
    rig.queues[rig.ssps[1]].ended = True
    await rig.consumer.start()
    run = asyncio.ensure_future(rig.consumers.run("memory"))
    await rig.settle()
    assert rig.consumer.polls and all(p == [0] for p, _, _ in rig.consumer.polls)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


async def test_a_partition_that_delivers_nothing_for_its_idle_timeout_is_told_idle() -> None:
    broker = InMemoryBroker.for_namespace(f"idle-{uuid.uuid4().hex[:8]}")
    broker.create_stream("in", 1)
    broker.append("in", 0, None, 1_000)
    broker.append("in", 0, None, 2_000)
    ssp = SystemStreamPartition("memory", "in", 0)
    queue = InputQueue(ssp, CAPACITY)
    consumer = InMemorySystemConsumer(broker)
    consumer.register(ssp, None, "oldest")
    timed = InputSerdes(None, None, lateness_ms=0, event_time=lambda k, m: m, idle_ms=50)
    consumers = SystemConsumers(
        {"memory": consumer},
        {ssp: [queue]},
        {ssp: timed},
        compare_offsets={"memory": lambda a, b: int(a) - int(b)},
        poll_timeout=0.005,
        drop_deserialization_errors=False,
    )

    def taken(count: int) -> list[Any]:
        items = list(queue.queue)[:count]
        for _ in items:
            queue.queue.popleft()
        return [
            (e.offset, e.message)
            if isinstance(e, ControlEnvelope)
            else (e.offset, e.message, e.timestamp)
            for e in items
        ]

    async def until(count: int) -> None:
        for _ in range(400):
            if len(queue.queue) >= count:
                return
            await asyncio.sleep(0.005)

    await consumer.start()
    run = asyncio.ensure_future(consumers.run("memory"))
    await until(3)
    assert taken(3) == [
        ("0", 1_000, 1_000),
        ("1", 2_000, 2_000),
        ("1", WatermarkMessage("event-time", 1, 2_000)),
    ]
    await until(1)  # 50 ms after its task took them
    assert taken(1) == [(NO_OFFSET, WatermarkMessage("event-time", 1, 2_000, idle=True))]
    await asyncio.sleep(0.2)
    assert not queue.queue  # told once
    broker.append("in", 0, None, 7_000)
    await until(3)
    assert taken(3) == [
        (NO_OFFSET, WatermarkMessage("event-time", 1, 2_000)),  # active again, first
        ("2", 7_000, 7_000),
        ("2", WatermarkMessage("event-time", 1, 7_000)),
    ]
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)


async def test_a_partition_waiting_in_its_full_queue_is_not_told_idle() -> None:
    """docs/configuration.md, ``samza.watermark.idle.ms``: idleness is a partition that has
    nothing to deliver, as in Flink (whose idleness clock pauses under back-pressure), not
    one whose task is behind. Partition 0 has a backlog: its queue stays above half full, so
    it is not polled for longer than its idle timeout while partition 1 (empty) is. Told idle,
    the marker would follow its queued messages and let the task's readers downstream of a
    partition_by leave it out of their minimum while the rest of its backlog is still to come
    (then late there, and dropped)."""
    broker = InMemoryBroker.for_namespace(f"backlog-{uuid.uuid4().hex[:8]}")
    broker.create_stream("in", 2)
    for i in range(100):
        broker.append("in", 0, None, i)
    ssps = [SystemStreamPartition("memory", "in", p) for p in range(2)]
    queues = {ssp: InputQueue(ssp, CAPACITY) for ssp in ssps}
    consumer = InMemorySystemConsumer(broker)
    for ssp in ssps:
        consumer.register(ssp, None, "oldest")
    timed = InputSerdes(None, None, lateness_ms=0, event_time=lambda k, m: m, idle_ms=50)
    clock = [0.0]
    consumers = SystemConsumers(
        {"memory": consumer},
        {ssp: [q] for ssp, q in queues.items()},
        {ssp: timed for ssp in ssps},
        compare_offsets={"memory": lambda a, b: int(a) - int(b)},
        poll_timeout=0.001,
        drop_deserialization_errors=False,
        now=lambda: clock[0],
    )
    await consumer.start()
    run = asyncio.ensure_future(consumers.run("memory"))
    for _ in range(20):
        await asyncio.sleep(0.002)
    backlog = queues[ssps[0]].queue
    assert len(backlog) > CAPACITY // 2  # full: partition 0 is polled no more
    clock[0] = 1.0  # 1 s: partition 0 delivered nothing for 20 idle timeouts, partition 1 never
    for _ in range(20):
        await asyncio.sleep(0.002)
    idle = [
        e.system_stream_partition.partition
        for q in queues.values()
        for e in q.queue
        if isinstance(e, ControlEnvelope) and getattr(e.message, "idle", False)
    ]
    assert idle == [1]  # partition 1 has nothing; partition 0 is not idle, only behind
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
