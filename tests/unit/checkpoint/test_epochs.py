"""Owner epochs keep a task's checkpoint from moving behind its owner's back; exactly-once
checkpoints live in a partition per task (here over the memory system)."""

from __future__ import annotations

import asyncio
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from leases import SwitchedLease
from structlog.testing import capture_logs

from samzapy import SystemStreamPartition, TaskFencedError, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.registry import checkpoint_manager
from samzapy.checkpoint.stream import StreamCheckpointManager
from samzapy.checkpoint.transactional import (
    AtLeastOnceCheckpointManager,
    TransactionalCheckpointManager,
    task_partition,
)
from samzapy.checkpoint.writer import TaskCheckpointWriter
from samzapy.config import load_config, resolve
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory

TASK = TaskName("Partition 1")
IN = SystemStreamPartition("kafka", "words", 1)
STREAM = "__samzapy_checkpoint_job_1"


@pytest.fixture
def factory() -> Iterator[InMemorySystemFactory]:
    namespace = f"epochs-{uuid.uuid4().hex}"
    yield InMemorySystemFactory("memory", {"namespace": namespace})
    InMemoryBroker.drop_namespace(namespace)


async def read(factory: InMemorySystemFactory, task: TaskName = TASK) -> Checkpoint | None:
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    try:
        return await manager.read_last(task)
    finally:
        await manager.stop()


async def test_a_taking_container_claims_the_task_and_a_stale_owner_no_longer_counts(
    factory: InMemorySystemFactory,
) -> None:
    first = StreamCheckpointManager(factory, STREAM)
    await first.start()
    old_owner = TaskCheckpointWriter(first, TASK, None)
    assert old_owner.epoch == 1
    await old_owner.write(Checkpoint({IN: "10"}))
    # Another container takes the task: it reads epoch 1 and claims epoch 2 at once.
    second = StreamCheckpointManager(factory, STREAM)
    await second.start()
    found = await second.read_last(TASK)
    new_owner = TaskCheckpointWriter(second, TASK, found)
    assert new_owner.epoch == 2
    await new_owner.claim()
    # The old owner, not told yet, goes on writing: behind and ahead of the new owner.
    with capture_logs() as logs:
        await old_owner.write(Checkpoint({IN: "5"}))
        await old_owner.write(Checkpoint({IN: "90"}))
        assert await read(factory) == Checkpoint({IN: "10"}, epoch=2)
    ignored = [e for e in logs if e["event"] == "stale_checkpoint_ignored"]
    assert [(e["epoch"], e["newest_epoch"]) for e in ignored] == [(1, 2), (1, 2)]
    await new_owner.write(Checkpoint({IN: "20"}))
    assert await read(factory) == Checkpoint({IN: "20"}, epoch=2)
    await first.stop()
    await second.stop()


async def test_a_checkpoint_written_before_epochs_counts_as_epoch_0(
    factory: InMemorySystemFactory,
) -> None:
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    await manager.write(TASK, Checkpoint({IN: "3"}))  # no epoch: an older samzapy
    writer = TaskCheckpointWriter(manager, TASK, await manager.read_last(TASK))
    assert writer.epoch == 1
    await writer.claim()
    assert await read(factory) == Checkpoint({IN: "3"}, epoch=1)
    await manager.stop()


async def test_a_writer_whose_lease_is_gone_writes_nothing(factory: InMemorySystemFactory) -> None:
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    lease = SwitchedLease()
    writer = TaskCheckpointWriter(manager, TASK, None, lease=lease)
    await writer.write(Checkpoint({IN: "1"}))
    lease.break_()
    with pytest.raises(TaskFencedError, match="may belong to another container by now") as info:
        await writer.write(Checkpoint({IN: "2"}))
    assert info.value.task_name == TASK and info.value.epoch == 1
    assert await read(factory) == Checkpoint({IN: "1"}, epoch=1)
    await manager.stop()


async def test_a_writer_waits_out_a_held_lease(factory: InMemorySystemFactory) -> None:
    """Held: the checkpoint waits; resumed, it is written; held again and broken, it is not."""
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    lease = SwitchedLease()
    writer = TaskCheckpointWriter(manager, TASK, None, lease=lease)
    lease.hold()
    writing = asyncio.ensure_future(writer.write(Checkpoint({IN: "1"})))
    await asyncio.sleep(0.05)
    assert not writing.done() and await read(factory) is None
    lease.resume()
    assert await writing is True
    assert await read(factory) == Checkpoint({IN: "1"}, epoch=1)
    lease.hold()
    writing = asyncio.ensure_future(writer.write(Checkpoint({IN: "2"})))
    await asyncio.sleep(0.05)
    lease.break_()
    with pytest.raises(TaskFencedError):
        await writing
    assert await read(factory) == Checkpoint({IN: "1"}, epoch=1)
    await manager.stop()


async def test_exactly_once_checkpoints_have_a_partition_per_task_and_fall_back(
    factory: InMemorySystemFactory,
) -> None:
    # The job ran at-least-once before: task 1 has a checkpoint in the old stream.
    old = StreamCheckpointManager(factory, STREAM)
    await old.start()
    await old.write(TASK, Checkpoint({IN: "7"}, epoch=3))
    await old.stop()
    manager = TransactionalCheckpointManager(factory, STREAM, 4, fallback_stream=STREAM)
    for task in (TaskName("Partition 0"), TASK):
        manager.register(task)
    await manager.start()
    assert factory.broker.partition_count(STREAM + "-txn") == 4
    assert await manager.read_last(TASK) == Checkpoint({IN: "7"}, epoch=3)
    assert await manager.read_last(TaskName("Partition 0")) is None
    stream, partition, key, _ = manager.record(TASK, Checkpoint({IN: "8"}, epoch=4))
    assert (str(stream), partition, key) == (f"memory.{STREAM}-txn", 1, b"Partition 1")
    await manager.stop()


def test_exactly_once_needs_group_by_partition_task_names() -> None:
    assert task_partition(TaskName("Partition 12")) == 12
    with pytest.raises(Exception, match="group-by-partition task names"):
        task_partition(TaskName("custom"))


async def test_a_commit_with_nothing_new_keeps_an_idle_tasks_checkpoint_age_low(
    factory: InMemorySystemFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """checkpoint-age-seconds says how old the work a restart would do again is: an idle task
    whose checkpoint covers all it processed is current at each commit, not an hour old."""
    from samzapy.checkpoint import writer as writer_module
    from samzapy.container import gauges

    now = [1000.0]
    clock = types.SimpleNamespace(monotonic=lambda: now[0])
    monkeypatch.setattr(writer_module, "time", clock)
    monkeypatch.setattr(gauges, "time", clock)
    manager = StreamCheckpointManager(factory, STREAM)
    await manager.start()
    writer = TaskCheckpointWriter(manager, TASK, None)
    age = gauges._age(types.SimpleNamespace(finished=False), writer, since=now[0])
    now[0] += 5
    assert age() == 5  # since the start, before the first commit
    assert await writer.write(Checkpoint({IN: "10"})) is True
    assert age() == 0
    now[0] += 3600  # an hour idle, a commit every minute finding nothing new
    assert await writer.write(Checkpoint({IN: "10"})) is False
    assert age() == 0
    assert writer.written == 1
    now[0] += 60  # a task that processed more and has not committed it yet ages
    assert age() == 60
    await manager.stop()


async def _write_txn(
    factory: InMemorySystemFactory, task: TaskName, checkpoint: Checkpoint
) -> None:
    """Write ``checkpoint`` to the exactly-once stream, as a task's transaction does."""
    manager = TransactionalCheckpointManager(factory, STREAM, 4)
    manager.register(task)
    await manager.start()
    producer = factory.get_producer()
    await producer.start()
    producer.send(*manager.record(task, checkpoint))
    await producer.stop()
    await manager.stop()


async def test_a_job_switched_between_guarantees_resumes_from_the_highest_owner_epoch(
    factory: InMemorySystemFactory,
) -> None:
    """Each guarantee keeps its checkpoints in a stream of its own: whichever the job runs
    under, a task resumes from the checkpoint of the highest owner epoch in either, not from
    what the stream of its guarantee held when the job last ran under it."""
    other = TaskName("Partition 2")
    # At-least-once first (epoch 3), then exactly-once (which claimed epoch 4 and went on).
    old = StreamCheckpointManager(factory, STREAM)
    await old.start()
    await old.write(TASK, Checkpoint({IN: "7"}, epoch=3))
    await old.stop()
    await _write_txn(factory, TASK, Checkpoint({IN: "90"}, epoch=4))
    await _write_txn(factory, other, Checkpoint({IN: "5"}, epoch=2))
    # Back to at-least-once: it reads the exactly-once checkpoints of a higher epoch too.
    back = checkpoint_manager(_config(), {"memory": factory}, "ns", task_count=4)
    assert isinstance(back, AtLeastOnceCheckpointManager)
    for task in (TASK, other, TaskName("Partition 0")):
        back.register(task)
    with capture_logs() as logs:
        await back.start()
    assert await back.read_last(TASK) == Checkpoint({IN: "90"}, epoch=4)
    assert await back.read_last(other) == Checkpoint({IN: "5"}, epoch=2)
    assert await back.read_last(TaskName("Partition 0")) is None
    [taken] = [e for e in logs if e["event"] == "checkpoints_taken_from"]
    assert taken["tasks"] == ["Partition 1", "Partition 2"]
    # It claims epoch 5 and goes on, in its own stream.
    await TaskCheckpointWriter(back, TASK, await back.read_last(TASK)).write(
        Checkpoint({IN: "120"})
    )
    await back.stop()
    # Exactly-once again: the at-least-once checkpoint is the newer one now.
    again = TransactionalCheckpointManager(factory, STREAM, 4, fallback_stream=STREAM)
    again.register(TASK)
    await again.start()
    assert await again.read_last(TASK) == Checkpoint({IN: "120"}, epoch=5)
    await again.stop()


def _config() -> Any:
    """An at-least-once job checkpointing to the stream ``STREAM`` names (job ``job``, id
    ``1``) on the memory system."""
    return resolve(
        load_config(
            base={
                "job.name": "job",
                "job.id": "1",
                "task.class": "app.tasks:WordCount",
                "task.inputs": ["memory.words"],
                "task.checkpoint.factory": "stream",
                "task.checkpoint.system": "memory",
                "systems.memory.samza.factory": "memory",
            },
            env={},
        )
    )
