"""The group's offset of a partition whose task processed all its consumer handed over: the
consumer's position when further than one past the last processed (past a transaction's
marker, which no reader gets), also from a commit that leaves the checkpoint as it was; never
past a message queued or in flight, and never back while the checkpoint stays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Mapping

import pytest
from leases import SwitchedLease

from samzapy import SystemStreamPartition, TaskName
from samzapy.checkpoint.group import GroupOffsets
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import StreamCheckpointManager
from samzapy.checkpoint.transactional import TransactionalCheckpointManager
from samzapy.checkpoint.writer import TaskCheckpointWriter, TransactionalCheckpointWriter
from samzapy.container.commit import fetched_positions
from samzapy.container.inputs import InputQueue
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import GroupOffsetCommitter, SystemConsumer, TransactionalProducer

TASK = TaskName("Partition 0")
IN = SystemStreamPartition("kafka", "in", 0)
STREAM = "__samzapy_checkpoint_job_1"


class Committer(GroupOffsetCommitter):
    def __init__(self) -> None:
        self.commits: list[dict[SystemStreamPartition, int]] = []

    async def commit(self, offsets: Mapping[SystemStreamPartition, int]) -> None:
        self.commits.append(dict(offsets))

    async def stop(self) -> None:
        return None


class Positions(SystemConsumer):
    """A consumer that is only a position."""

    def __init__(self) -> None:
        self.at: dict[SystemStreamPartition, int] = {}

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def poll(self, ssps, max_messages, timeout):  # type: ignore[no-untyped-def] # noqa: ASYNC109
        return {}

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        return self.at.get(ssp)


class Transactions(TransactionalProducer):
    """What a task's transactions hold: the records sent and the group offsets."""

    def __init__(self) -> None:
        self.open: list[object] = []
        self.committed: list[list[object]] = []

    @property
    def pending(self) -> bool:
        return any(not isinstance(what, dict) for what in self.open)

    def send(self, stream, partition, key, value):  # type: ignore[no-untyped-def]
        self.open.append("checkpoint" if stream.stream.endswith("-txn") else value)

    async def send_offsets(
        self, group_id: str, offsets: Mapping[SystemStreamPartition, int]
    ) -> None:
        self.open.append(dict(offsets))

    async def flush(self) -> None:
        return None

    async def begin(self) -> None:
        return None

    async def commit(self) -> None:
        self.committed.append(self.open)
        self.open = []

    async def abort(self) -> None:
        self.open = []


@pytest.fixture
def factory() -> Iterator[InMemorySystemFactory]:
    namespace = f"group-positions-{uuid.uuid4().hex}"
    yield InMemorySystemFactory("memory", {"namespace": namespace})
    InMemoryBroker.drop_namespace(namespace)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_only_a_partition_with_nothing_queued_or_in_flight_has_a_position() -> None:
    consumer = Positions()
    tracker, queue = OffsetTracker("10"), InputQueue(IN, 100)
    fetched = fetched_positions([(IN, consumer, tracker, queue)])
    assert fetched() == {}  # the consumer cannot tell (stopped, resetting)
    consumer.at[IN] = 12
    assert fetched() == {IN: 12}
    queue.queue.append(object())  # type: ignore[arg-type] # fetched, not processed yet
    assert fetched() == {}
    queue.queue.clear()
    entry = tracker.invoked("11")
    assert fetched() == {}  # in flight
    tracker.completed(entry)
    assert fetched() == {IN: 12}


async def test_the_group_goes_past_a_marker_and_stays_there_while_the_checkpoint_does(
    factory: InMemorySystemFactory,
) -> None:
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    committer = Committer()
    group = GroupOffsets(committer, system="kafka", group_id="samzapy.j.1")
    position: dict[SystemStreamPartition, int] = {}
    writer = TaskCheckpointWriter(manager, TASK, None, group=group, fetched=lambda: position)
    # Message 10 processed; the consumer has yet to read the marker at 11.
    assert await writer.write(Checkpoint({IN: "10"}))
    await settle()
    assert committer.commits == [{IN: 11}]
    # It read the marker: the next commit, with nothing new to checkpoint, moves the group.
    position[IN] = 12
    assert not await writer.write(Checkpoint({IN: "10"}))
    await settle()
    assert committer.commits == [{IN: 11}, {IN: 12}]
    assert writer.written == 1  # the checkpoint itself was not written again
    # Nothing moved: nothing is committed.
    assert not await writer.write(Checkpoint({IN: "10"}))
    # The position cannot be read (the consumer stopped, a new message queued): the group
    # keeps what it found for the same checkpointed offset.
    position.clear()
    assert not await writer.write(Checkpoint({IN: "10"}))
    assert await writer.write(Checkpoint({IN: "10"}, changelog_offsets={"s": "1"}))
    await settle()
    assert committer.commits == [{IN: 11}, {IN: 12}, {IN: 12}]
    # Another checkpointed offset (here a reset back): one past it again.
    assert await writer.write(Checkpoint({IN: "5"}))
    await settle()
    assert committer.commits[-1] == {IN: 6}
    await group.stop()
    await manager.stop()


async def test_under_exactly_once_a_position_past_a_marker_commits_a_transaction(
    factory: InMemorySystemFactory,
) -> None:
    manager = TransactionalCheckpointManager(factory, STREAM, 1)
    producer = Transactions()
    group = GroupOffsets(Committer(), system="kafka", group_id="samzapy.j.1")
    position: dict[SystemStreamPartition, int] = {}
    writer = TransactionalCheckpointWriter(
        manager, producer, TASK, None, group=group, fetched=lambda: position
    )
    assert await writer.write(Checkpoint({IN: "10"}))
    assert producer.committed == [["checkpoint", {IN: 11}]]
    position[IN] = 12  # past the marker: a transaction carries the new offset
    assert await writer.write(Checkpoint({IN: "10"}))
    assert producer.committed[-1] == ["checkpoint", {IN: 12}]
    assert not await writer.write(Checkpoint({IN: "10"}))  # nothing moved: no transaction
    position.clear()  # nor when the position cannot be read
    assert not await writer.write(Checkpoint({IN: "10"}))
    assert len(producer.committed) == 2


async def test_a_container_unsure_it_owns_the_task_moves_the_group_no_more(
    factory: InMemorySystemFactory,
) -> None:
    """As it writes no checkpoint: the task's new owner may have committed further."""
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    committer = Committer()
    group = GroupOffsets(committer, system="kafka", group_id="samzapy.j.1")
    lease = SwitchedLease()
    position: dict[SystemStreamPartition, int] = {}
    writer = TaskCheckpointWriter(
        manager, TASK, None, lease=lease, group=group, fetched=lambda: position
    )
    assert await writer.write(Checkpoint({IN: "10"}))
    position[IN] = 12
    lease.hold()
    assert not await writer.write(Checkpoint({IN: "10"}))
    lease.break_()
    assert not await writer.write(Checkpoint({IN: "10"}))
    await settle()
    assert committer.commits == [{IN: 11}]
    await group.stop()
    await manager.stop()
