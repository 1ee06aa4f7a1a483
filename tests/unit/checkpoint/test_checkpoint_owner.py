"""The checkpoint stream's owner record: two jobs whose names map to one stream never share it
(here over the memory system)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from samzapy.api.errors import JobCollisionError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import decode_checkpoint
from samzapy.checkpoint.owner import (
    JobIdentity,
    is_typed_key,
    owner_record,
    read_owner,
)
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import StreamCheckpointManager, checkpoint_stream_name
from samzapy.checkpoint.transactional import TransactionalCheckpointManager
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory, InMemorySystemProducer
from samzapy.system.ports import SystemProducer

A = JobIdentity("a_b", "1")
B = JobIdentity("a", "b_1")
STREAM = checkpoint_stream_name(A.name, A.id)
TASK = TaskName.for_partition(0)
IN_0 = SystemStreamPartition("kafka", "in", 0)


class Factory(InMemorySystemFactory):
    """The memory system; ``before_send``: a record another job sends just before this
    process's next one (a job claiming the stream at the same moment)."""

    def __init__(self, namespace: str) -> None:
        super().__init__("cp", {"namespace": namespace})
        self.before_send: tuple[bytes, bytes] | None = None

    def get_producer(self) -> SystemProducer:
        factory = self

        class Producer(InMemorySystemProducer):
            def send(
                self, stream: SystemStream, partition: int, key: object, value: object
            ) -> None:
                first, factory.before_send = factory.before_send, None
                if first is not None:
                    super().send(stream, partition, *first)
                super().send(stream, partition, key, value)

        return Producer(self.broker)


@pytest.fixture
def factory() -> Iterator[Factory]:
    namespace = f"checkpoint-owner-{uuid.uuid4().hex}"
    yield Factory(namespace)
    InMemoryBroker.drop_namespace(namespace)


def test_the_colliding_jobs_of_the_brief_share_a_stream_name() -> None:
    assert checkpoint_stream_name(B.name, B.id) == STREAM


def test_an_owner_key_is_never_a_task_name_and_every_claim_has_its_own_key() -> None:
    first, second = owner_record(A)[0], owner_record(A)[0]
    assert is_typed_key(first) and first != second
    assert not is_typed_key(str(TASK).encode())
    assert read_owner(first, owner_record(A)[1], "test") == A


def test_a_samzapy_from_before_the_owner_record_reads_it_as_no_tasks_checkpoint() -> None:
    """A container of an older samzapy still running beside this one (a rolling upgrade of a
    kafka-group job, whose tasks move at each step) reads every record as a task's checkpoint:
    the task its key names, the document its value holds. The owner record must be one, of
    a task no job has, else that container stops with 'corrupt checkpoint'."""
    key, value = owner_record(A)
    task, checkpoint = decode_checkpoint(value, "test")  # what the older reader does
    assert task == TaskName(key.decode("utf-8"))  # and checks against the key
    assert checkpoint == Checkpoint({})
    assert not str(task).startswith("Partition")


async def start(
    factory: Factory, job: JobIdentity | None, **kwargs: object
) -> StreamCheckpointManager:
    manager = StreamCheckpointManager(factory, STREAM, owner=job, **kwargs)  # type: ignore[arg-type]
    manager.register(TASK)
    await manager.start()
    return manager


def records(factory: Factory) -> list[tuple[object, object]]:
    return list(factory.broker.records(STREAM, 0))


async def test_the_first_job_claims_the_stream_and_the_colliding_one_is_refused(
    factory: Factory,
) -> None:
    first = await start(factory, A)
    await first.write(TASK, Checkpoint({IN_0: "41"}))
    await first.stop()
    before = records(factory)
    with pytest.raises(JobCollisionError) as caught:
        await start(factory, B)
    message = str(caught.value)
    for text in ("'a_b'", "'1'", "'a'", "'b_1'", f"cp.{STREAM}", "change job.name or job.id"):
        assert text in message
    assert records(factory) == before  # nothing written: A's checkpoint untouched
    again = await start(factory, A)  # the owner itself runs on, writing no second claim
    assert await again.read_last(TASK) == Checkpoint({IN_0: "41"})
    await again.stop()
    assert records(factory) == before


async def test_a_stream_without_an_owner_record_is_adopted(factory: Factory) -> None:
    older = await start(factory, None)  # as an older samzapy wrote it
    await older.write(TASK, Checkpoint({IN_0: "7"}))
    await older.stop()
    adopting = await start(factory, A)
    assert await adopting.read_last(TASK) == Checkpoint({IN_0: "7"})
    await adopting.stop()
    with pytest.raises(JobCollisionError):
        await start(factory, B)


async def test_of_two_jobs_claiming_at_once_the_first_record_wins(factory: Factory) -> None:
    # B writes its claim between A's read (no owner yet) and A's own claim.
    factory.before_send = owner_record(B)
    with pytest.raises(JobCollisionError, match=r"belongs to another job \(job\.name 'a' "):
        await start(factory, A)
    await (await start(factory, B)).stop()
    claims = [read_owner(k, v, "t") for k, v in records(factory)]  # type: ignore[arg-type]
    assert claims == [B, A]


async def test_two_starts_at_once_one_runs(factory: Factory) -> None:
    results = await asyncio.gather(start(factory, A), start(factory, B), return_exceptions=True)
    refused = [r for r in results if isinstance(r, JobCollisionError)]
    assert len(refused) == 1
    for result in results:
        if isinstance(result, StreamCheckpointManager):
            await result.stop()


async def test_a_reader_that_must_not_claim_writes_nothing_but_still_refuses(
    factory: Factory,
) -> None:
    reader = await start(factory, B, claim_owner=False)
    await reader.stop()
    assert records(factory) == []
    await (await start(factory, A)).stop()
    with pytest.raises(JobCollisionError):
        await start(factory, B, claim_owner=False)


async def test_exactly_once_claims_the_at_least_once_stream_first(factory: Factory) -> None:
    def manager(job: JobIdentity) -> TransactionalCheckpointManager:
        return TransactionalCheckpointManager(factory, STREAM, 1, fallback_stream=STREAM, owner=job)

    await manager(A).own()
    assert [read_owner(k, v, "t") for k, v in records(factory)] == [A]  # type: ignore[arg-type]
    with pytest.raises(JobCollisionError):
        await manager(B).own()
