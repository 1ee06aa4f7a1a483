"""Bootstrap inputs, the pure part and the queues: which partitions a task is behind on at
start-up, where the consumer marks a partition caught up, when a task's bootstrap is done, and
the held queues that keep its other inputs out of the choice until then."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence

import pytest

from samzapy import IncomingMessageEnvelope, SystemStreamPartition
from samzapy.api.envelope import END_OF_STREAM_OFFSET
from samzapy.container.bootstrap import CaughtUp, Heads, TaskBootstrap, lagging
from samzapy.container.consumers import SystemConsumers
from samzapy.container.inputs import NO_OFFSET, ControlEnvelope, Envelope, InputQueue, TaskInputs
from samzapy.control.wire import WatermarkMessage
from samzapy.system.inmemory import InMemoryBroker, InMemorySystemAdmin
from samzapy.system.inmemory.consumer import InMemorySystemConsumer
from samzapy.system.ports import OffsetBounds, SystemConsumer


def ssp(stream: str, partition: int = 0) -> SystemStreamPartition:
    return SystemStreamPartition("mem", stream, partition)


def compare(a: str, b: str) -> int:
    return int(a) - int(b)


def message(ssp_: SystemStreamPartition, offset: int) -> IncomingMessageEnvelope:
    return IncomingMessageEnvelope(ssp_, str(offset), None, offset)


P = ssp("profiles")


# -- 1. which partitions a task is behind on at start-up ----------------------------------------


@pytest.mark.parametrize(
    ("resume", "default", "bounds", "behind"),
    [
        # empty at start: nothing to read
        (None, "oldest", OffsetBounds(None, "0"), False),
        (None, "oldest", OffsetBounds(None, "7"), False),  # emptied by retention
        # no checkpoint: oldest reads up to the head, upcoming starts there
        (None, "oldest", OffsetBounds("0", "5"), True),
        (None, "upcoming", OffsetBounds("0", "5"), False),
        # a checkpoint before, at, past the head
        ("3", "upcoming", OffsetBounds("0", "5"), True),
        ("5", "oldest", OffsetBounds("0", "5"), False),
        ("9", "oldest", OffsetBounds("0", "5"), False),
        # retention overtook the checkpoint: still behind
        ("1", "oldest", OffsetBounds("3", "5"), True),
    ],
)
def test_a_partition_is_behind_unless_empty_or_its_start_is_at_its_head(
    resume: str | None, default: str, bounds: OffsetBounds, behind: bool
) -> None:
    got = lagging({P: resume}, {P: default}, {P: bounds}, {"mem": compare})
    assert got == ({P: bounds.upcoming} if behind else {})


# -- 2. where the consumer marks a partition caught up ------------------------------------------


def heads(head: str) -> Heads:
    admin = InMemorySystemAdmin(InMemoryBroker.for_namespace("boot-arithmetic"))
    return Heads({P: head}, {"mem": admin})


def marked(head: str, batch: list[Envelope]) -> list[str]:
    """The batch with the marker ``heads(head).mark`` puts in, as offsets and ``caught-up``."""
    bookkeeping = heads(head)
    bookkeeping.mark(P, batch)
    assert P not in bookkeeping  # marked once
    return ["caught-up" if isinstance(e, CaughtUp) else e.offset for e in batch]


def test_a_batch_reaches_the_head_with_the_message_before_it_or_an_end() -> None:
    assert not heads("5").reached(P, message(P, 3))
    assert heads("5").reached(P, message(P, 4))
    assert heads("5").reached(P, message(P, 9))  # gaps: offsets past the head
    end = IncomingMessageEnvelope(P, END_OF_STREAM_OFFSET, None, None)
    assert heads("5").reached(P, end)
    assert not heads("5").reached(ssp("views"), message(ssp("views"), 4))  # not waited on


def test_the_marker_goes_after_the_last_message_before_the_head() -> None:
    batch: list[Envelope] = [message(P, i) for i in range(3, 8)]
    assert marked("5", batch) == ["3", "4", "caught-up", "5", "6", "7"]  # 5.. came later
    # Messages the serdes dropped (the one before the head among them): after what is left.
    assert marked("5", [message(P, 2), message(P, 3)]) == ["2", "3", "caught-up"]
    # A control message at no offset (an idle watermark) is not past the head.
    idle = ControlEnvelope(P, NO_OFFSET, WatermarkMessage("event-time", 1, 7, True))
    assert marked("5", [idle, message(P, 4), message(P, 5)]) == ["", "4", "caught-up", "5"]
    # Before an end-of-stream.
    ended: list[Envelope] = [message(P, 3), ControlEnvelope.end_of_stream(P)]
    assert marked("9", ended) == ["3", "caught-up", END_OF_STREAM_OFFSET]
    assert not CaughtUp(P).is_end_of_stream


@pytest.mark.parametrize(
    ("position", "passed"), [(None, False), ("4", False), ("5", True), ("9", True)]
)
def test_a_position_at_or_past_the_head_passed_it(position: str | None, passed: bool) -> None:
    bookkeeping = heads("5")
    assert bookkeeping.passed(P, position) is passed
    assert (P in bookkeeping) is not passed
    assert not bookkeeping.passed(ssp("views"), "9")  # not waited on


# -- 3. when a task's bootstrap is done ---------------------------------------------------------


def test_done_once_its_last_lagging_partition_caught_up() -> None:
    a, b, c = ssp("profiles", 0), ssp("profiles", 1), ssp("rates")
    boot = TaskBootstrap([a, b, c], [a, b])
    assert not boot.done
    assert boot.caught_up(c) is False  # was not behind
    assert boot.caught_up(a) is False  # b still is
    assert boot.caught_up(a) is False  # twice: no effect
    assert boot.caught_up(b) is True
    assert boot.done
    assert boot.caught_up(b) is False  # done already: said once
    assert TaskBootstrap([a], []).done
    # A lagging partition that is not a bootstrap partition of the task is ignored.
    assert TaskBootstrap([a], [ssp("views")]).done


def test_a_task_behind_holds_its_other_inputs_until_it_releases_them() -> None:
    p, v = ssp("profiles"), ssp("views")
    queues = {s: InputQueue(s, 10) for s in (p, v)}
    queues[v].queue.append(message(v, 0))
    inputs = TaskInputs(queues.values(), space_freed=lambda: None)
    boot = TaskBootstrap([p], [p])
    assert boot.start(inputs, now=10.0) is False
    assert inputs.choose() is None  # the view waits
    assert boot.caught_up(p)
    assert boot.release(inputs, processed=7, now=10.25) == {"messages": 7, "elapsed_ms": 250}
    taken = inputs.choose()
    assert taken is not None and taken.system_stream_partition == v
    # Nothing behind: done at once, nothing held.
    queues[v].queue.append(message(v, 1))
    fresh = TaskInputs(queues.values(), space_freed=lambda: None)
    assert TaskBootstrap([p], []).start(fresh, now=0.0) is True
    again = fresh.choose()
    assert again is not None and again.offset == "1"


# -- held queues --------------------------------------------------------------------------------


def test_held_queues_are_out_of_the_choice_until_released() -> None:
    p, v = ssp("profiles"), ssp("views")
    queues = {s: InputQueue(s, 10) for s in (p, v)}
    inputs = TaskInputs(queues.values(), space_freed=lambda: None)
    inputs.hold_all_but({p})
    queues[v].queue.extend(message(v, i) for i in range(3))
    # The views are waiting, the profiles not yet: nothing to take, but the task has not ended.
    assert inputs.choose() is None
    assert inputs.only() is queues[p]
    assert not inputs.all_ended
    assert inputs.buffered == 3
    assert inputs.head() == (v, "0")
    queues[p].queue.append(message(p, 0))
    assert inputs.head() == (p, "0")  # the next message the choice takes
    taken = inputs.choose()
    assert taken is not None and taken.system_stream_partition == p
    inputs.end(p)  # the bootstrap partition ended: the held views remain
    assert not inputs.all_ended
    inputs.release()
    assert [env.offset for env in iter(inputs.choose, None)] == ["0", "1", "2"]
    inputs.end(v)
    assert inputs.all_ended


def test_a_held_partition_may_end_before_it_is_released() -> None:
    p, v = ssp("profiles"), ssp("views")
    inputs = TaskInputs([InputQueue(s, 10) for s in (p, v)], space_freed=lambda: None)
    inputs.hold_all_but({p})
    inputs.end(v)
    inputs.end(p)
    assert inputs.all_ended


# -- the consumer's markers ---------------------------------------------------------------------


class Rig:
    """A consumer coroutine over one memory partition, with a bootstrap head."""

    def __init__(self, records: int, head: str, consumer: SystemConsumer | None = None) -> None:
        self.broker = InMemoryBroker.for_namespace(f"boot-{uuid.uuid4().hex[:8]}")
        self.broker.create_stream("profiles", 1)
        for i in range(records):
            self.broker.append("profiles", 0, None, i)
        self.ssp = SystemStreamPartition("memory", "profiles", 0)
        self.queue = InputQueue(self.ssp, 100)
        self.consumer = consumer or InMemorySystemConsumer(self.broker)
        self.consumer.register(self.ssp, None, "oldest")
        self.consumers = SystemConsumers(
            {"memory": self.consumer},
            {self.ssp: [self.queue]},
            {},
            compare_offsets={"memory": compare},
            poll_timeout=0.001,
            drop_deserialization_errors=False,
            heads=Heads({self.ssp: head}, {"memory": InMemorySystemAdmin(self.broker)}),
        )
        self._run: asyncio.Future[None] | None = None

    async def __aenter__(self) -> Rig:
        await self.consumer.start()
        self._run = asyncio.ensure_future(self.consumers.run("memory"))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._run is not None
        self._run.cancel()
        await asyncio.gather(self._run, return_exceptions=True)
        await self.consumer.stop()

    async def queued(self, count: int) -> list[str]:
        """What the queue holds once it holds ``count`` envelopes (or after a while):
        offsets, and ``caught-up`` for a marker."""
        for _ in range(200):
            if len(self.queue.queue) >= count:
                break
            await asyncio.sleep(0.001)
        return ["caught-up" if isinstance(e, CaughtUp) else e.offset for e in self.queue.queue]


async def test_the_consumer_marks_the_head_once_in_offset_order() -> None:
    rig = Rig(3, head="3")
    rig.broker.append("profiles", 0, None, "later")  # arrived after the head was read
    async with rig:
        assert await rig.queued(5) == ["0", "1", "2", "caught-up", "3"]
        rig.broker.append("profiles", 0, None, "later still")
        assert await rig.queued(6) == ["0", "1", "2", "caught-up", "3", "4"]


async def test_a_marker_comes_with_the_message_before_the_head_in_a_later_batch() -> None:
    rig = Rig(2, head="4")
    async with rig:
        assert await rig.queued(3) == ["0", "1"]  # not there yet: no marker
        rig.broker.append("profiles", 0, None, 2)
        rig.broker.append("profiles", 0, None, 3)
        assert await rig.queued(5) == ["0", "1", "2", "3", "caught-up"]


async def test_an_end_before_the_head_is_marked_before_the_end() -> None:
    rig = Rig(2, head="4")
    rig.broker.end_partition("profiles", 0)
    async with rig:
        assert await rig.queued(4) == ["0", "1", "caught-up", END_OF_STREAM_OFFSET]


class PositionPastTheHead(SystemConsumer):
    """Polls return nothing: the last offsets were transaction markers, but the consumer's
    position has moved past them."""

    def __init__(self, position: str) -> None:
        self._position = position
        self.asked = 0

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        pass

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        await asyncio.sleep(0)
        return {}

    async def position(self, ssp: SystemStreamPartition) -> str | None:
        self.asked += 1
        return self._position


@pytest.mark.parametrize(("position", "marked"), [("5", True), ("9", True), ("4", False)])
async def test_a_position_past_the_head_marks_it_when_no_message_comes(
    position: str, marked: bool
) -> None:
    consumer = PositionPastTheHead(position)
    async with Rig(0, head="5", consumer=consumer) as rig:
        assert await rig.queued(1) == (["caught-up"] if marked else [])
    assert consumer.asked >= 1
    if marked:  # marked once, then asked no more
        assert consumer.asked == 1


class GappyBatch(PositionPastTheHead):
    """One poll brings ``offsets`` (a compacted log: the offsets between are gone), then
    nothing; the position is 7, past them all."""

    def __init__(self, partition: SystemStreamPartition, offsets: list[int]) -> None:
        super().__init__("7")
        self._batch: list[IncomingMessageEnvelope] | None = [message(partition, o) for o in offsets]
        self._ssp = partition

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        await asyncio.sleep(0)
        batch, self._batch = self._batch, None
        return {self._ssp: batch} if batch else {}


@pytest.mark.parametrize("offsets", [[0, 1, 6], [0, 1]])
async def test_a_task_that_resumes_in_a_gap_before_the_head_gets_the_marker(
    offsets: list[int],
) -> None:
    """A partition two tasks share: the second resumes at 3, inside a gap that runs to the
    head (5) or past it. The marker reaches its queue although none of the messages before
    it does, and its queue starts with the first message at or past where it resumes."""
    p = ssp("profiles")
    early, late = InputQueue(p, 100), InputQueue(p, 100, start_offset="3")
    broker = InMemoryBroker.for_namespace(f"boot-{uuid.uuid4().hex[:8]}")
    consumers = SystemConsumers(
        {"mem": GappyBatch(p, offsets)},
        {p: [early, late]},
        {},
        compare_offsets={"mem": compare},
        poll_timeout=0.001,
        drop_deserialization_errors=False,
        heads=Heads({p: "5"}, {"mem": InMemorySystemAdmin(broker)}),
    )
    run = asyncio.ensure_future(consumers.run("mem"))
    for _ in range(200):
        if any(isinstance(e, CaughtUp) for e in late.queue):
            break
        await asyncio.sleep(0.001)
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    def shown(queue: InputQueue) -> list[str]:
        return ["caught-up" if isinstance(e, CaughtUp) else e.offset for e in queue.queue]

    after = [str(o) for o in offsets if o >= 3]
    assert shown(early) == [*(str(o) for o in offsets if o < 3), "caught-up", *after]
    assert shown(late) == ["caught-up", *after]
