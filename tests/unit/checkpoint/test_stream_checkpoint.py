"""The stream checkpoint manager over the memory system, with a recording admin."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy.api.errors import CheckpointError, ConfigError, StreamSystemError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import encode_checkpoint
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import (
    MAX_STREAM_NAME_LENGTH,
    StreamCheckpointManager,
    checkpoint_stream_name,
)
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import (
    InMemorySystemAdmin,
    InMemorySystemFactory,
    InMemorySystemProducer,
)
from samzapy.system.ports import OffsetBounds, SystemAdmin, SystemProducer

STREAM = "__samzapy_checkpoint_job_1"
SYSTEM = "cp"
TASK = TaskName.for_partition(0)
OTHER_TASK = TaskName.for_partition(1)
IN_0 = SystemStreamPartition("kafka", "in", 0)
RECORD_SOURCE = rf"record at offset {{}} of checkpoint stream cp\.{STREAM}#0"


class RecordingAdmin(InMemorySystemAdmin):
    """The memory admin, recording calls; ``extra_upcoming`` claims records that never come."""

    def __init__(self, broker: InMemoryBroker, calls: list[tuple[Any, ...]], extra: int) -> None:
        super().__init__(broker)
        self.calls = calls
        self.extra = extra

    async def stop(self) -> None:
        self.calls.append(("admin.stop",))

    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        self.calls.append(("create_stream", stream, partitions, replication_factor, config))
        await super().create_stream(stream, partitions)

    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        bounds = await super().offset_bounds(ssps)
        return {
            ssp: OffsetBounds("0", str(int(b.upcoming) + self.extra)) if self.extra else b
            for ssp, b in bounds.items()
        }


class FailingProducer(InMemorySystemProducer):
    async def flush(self) -> None:
        raise StreamSystemError("broker unreachable")


class RecordingFactory(InMemorySystemFactory):
    def __init__(self, namespace: str) -> None:
        super().__init__(SYSTEM, {"namespace": namespace})
        self.calls: list[tuple[Any, ...]] = []
        self.extra_upcoming = 0
        self.failing_producer = False

    def get_admin(self) -> SystemAdmin:
        return RecordingAdmin(self.broker, self.calls, self.extra_upcoming)

    def get_producer(self) -> SystemProducer:
        if self.failing_producer:
            return FailingProducer(self.broker)
        return super().get_producer()


@pytest.fixture
def factory() -> Iterator[RecordingFactory]:
    namespace = f"stream-checkpoint-{uuid.uuid4().hex}"
    yield RecordingFactory(namespace)
    InMemoryBroker.drop_namespace(namespace)


async def started(
    factory: RecordingFactory, replication_factor: int | None = 3, **kwargs: Any
) -> StreamCheckpointManager:
    manager = StreamCheckpointManager(factory, STREAM, replication_factor, **kwargs)
    await manager.start()
    return manager


def document(task: TaskName, offset: str) -> bytes:
    return encode_checkpoint(task, Checkpoint(offsets={IN_0: offset}))


class TestCheckpointStreamName:
    def test_names_the_job_and_its_id(self) -> None:
        assert checkpoint_stream_name("job", "1") == "__samzapy_checkpoint_job_1"

    def test_characters_kafka_refuses_become_underscores(self) -> None:
        assert (
            checkpoint_stream_name("my job/v2:ünï", "a.b-c_d")
            == "__samzapy_checkpoint_my_job_v2__n__a.b-c_d"
        )

    def test_a_name_kafka_accepts_is_kept_up_to_its_limit(self) -> None:
        job = "j" * (MAX_STREAM_NAME_LENGTH - len("__samzapy_checkpoint__1"))
        assert checkpoint_stream_name(job, "1") == f"__samzapy_checkpoint_{job}_1"
        assert len(checkpoint_stream_name(job, "1")) == MAX_STREAM_NAME_LENGTH

    def test_a_longer_name_is_cut_and_keeps_jobs_apart(self) -> None:
        first = checkpoint_stream_name("j" * 300, "1")
        second = checkpoint_stream_name("j" * 300, "2")
        assert len(first) == len(second) == MAX_STREAM_NAME_LENGTH
        assert first.startswith("__samzapy_checkpoint_jjj")
        assert first != second


class TestStart:
    async def test_creates_a_compacted_one_partition_stream(
        self, factory: RecordingFactory
    ) -> None:
        manager = await started(factory)
        assert factory.calls == [
            ("create_stream", STREAM, 1, 3, {"cleanup.policy": "compact"}),
        ]
        assert factory.broker.partition_count(STREAM) == 1
        await manager.stop()

    async def test_default_replication_factor_is_left_to_the_system(
        self, factory: RecordingFactory
    ) -> None:
        manager = await started(factory, replication_factor=-1)
        assert factory.calls[0][3] is None
        await manager.stop()

    @pytest.mark.parametrize("value", [0, -2, True])
    def test_a_replication_factor_below_one_is_refused(
        self, factory: RecordingFactory, value: int
    ) -> None:
        with pytest.raises(
            ConfigError, match=r"replication\.factor must be -1 .* or an integer >= 1"
        ):
            StreamCheckpointManager(factory, STREAM, value)

    async def test_an_existing_stream_is_read_not_created(self, factory: RecordingFactory) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "7"))
        manager = await started(factory)
        assert [call[0] for call in factory.calls] == []
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "7"})
        await manager.stop()

    async def test_a_stream_with_several_partitions_is_refused(
        self, factory: RecordingFactory
    ) -> None:
        factory.broker.create_stream(STREAM, 3)
        manager = StreamCheckpointManager(factory, STREAM)
        with pytest.raises(
            CheckpointError, match=rf"checkpoint stream cp\.{STREAM} has 3 partitions, expected 1"
        ):
            await manager.start()
        assert factory.calls == [("admin.stop",)]  # a failed start releases the admin

    async def test_logs_what_it_read(self, factory: RecordingFactory) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "1"))
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "2"))
        factory.broker.append(STREAM, 0, b"Partition 1", document(OTHER_TASK, "3"))
        with capture_logs() as logs:
            manager = await started(factory)
        assert [entry for entry in logs if entry["event"] == "checkpoints_read"] == [
            {
                "event": "checkpoints_read",
                "log_level": "info",
                "stream": f"cp.{STREAM}#0",
                "tasks": 2,
                "records": 3,
            }
        ]
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "2"})
        await manager.stop()

    async def test_a_bounded_stream_ends_the_read(self, factory: RecordingFactory) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "4"))
        factory.broker.end_partition(STREAM, 0)
        factory.extra_upcoming = 5  # the admin promises records the partition never holds
        manager = await started(factory)
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "4"})
        await manager.stop()

    async def test_records_that_never_come_are_an_error(self, factory: RecordingFactory) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "4"))
        factory.extra_upcoming = 2
        with pytest.raises(
            CheckpointError,
            match=rf"reading checkpoint stream cp\.{STREAM}#0 received nothing for 0 s after 1 "
            r"records; expected records up to offset 3",
        ):
            await started(factory, read_timeout=0)


class TestRecords:
    async def test_a_write_is_a_keyed_record_holding_the_file_document(
        self, factory: RecordingFactory
    ) -> None:
        manager = await started(factory)
        await manager.write(TASK, Checkpoint(offsets={IN_0: "5"}))
        assert factory.broker.records(STREAM, 0) == [(b"Partition 0", document(TASK, "5"))]
        await manager.stop()

    async def test_a_tombstone_deletes_the_task_s_checkpoint(
        self, factory: RecordingFactory
    ) -> None:
        manager = await started(factory)
        await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}))
        await manager.write(OTHER_TASK, Checkpoint(offsets={IN_0: "2"}))
        await manager.stop()
        factory.broker.append(STREAM, 0, b"Partition 0", None)
        reopened = await started(factory)
        assert await reopened.read_last(TASK) is None
        assert await reopened.read_last(OTHER_TASK) == Checkpoint(offsets={IN_0: "2"})
        await reopened.write(TASK, Checkpoint(offsets={IN_0: "3"}))
        await reopened.stop()
        last = await started(factory)
        assert await last.read_last(TASK) == Checkpoint(offsets={IN_0: "3"})
        await last.stop()

    @pytest.mark.parametrize(
        ("key", "value", "problem"),
        [
            (b"Partition 0", b'{"version": 1, "task": "Partit', "Unterminated string"),
            (b"Partition 0", "text", "expected a JSON document as bytes, got str"),
            (None, b"{}", "key: expected the task name as UTF-8 bytes, got None"),
            (b"\xff", b"{}", "key: 'utf-8' codec can't decode"),
        ],
    )
    async def test_a_corrupt_record_is_an_error_naming_stream_and_offset(
        self, factory: RecordingFactory, key: Any, value: Any, problem: str
    ) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "1"))
        factory.broker.append(STREAM, 0, key, value)
        with pytest.raises(
            CheckpointError, match=f"corrupt checkpoint {RECORD_SOURCE.format(1)}: .*{problem}"
        ):
            await started(factory)

    async def test_a_document_of_another_task_is_corrupt(self, factory: RecordingFactory) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(OTHER_TASK, "1"))
        with pytest.raises(
            CheckpointError,
            match=f"corrupt checkpoint {RECORD_SOURCE.format(0)}: its key is task 'Partition 0' "
            "but the document holds task 'Partition 1'; restarting fails the same way: to start "
            r"the job over \(every task at its offset defaults, its logged stores empty\), give "
            f"it a new job.id, which reads a new checkpoint stream instead of {STREAM} "
            r"\(on the old job's host, also a job.logged.store.base.dir of its own",
        ):
            await started(factory)

    async def test_write_before_start_is_an_error(self, factory: RecordingFactory) -> None:
        manager = StreamCheckpointManager(factory, STREAM)
        with pytest.raises(CheckpointError, match="has not started"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}))

    async def test_a_failed_flush_is_an_error_and_keeps_the_previous_checkpoint(
        self, factory: RecordingFactory
    ) -> None:
        factory.broker.create_stream(STREAM, 1)
        factory.broker.append(STREAM, 0, b"Partition 0", document(TASK, "1"))
        factory.failing_producer = True
        manager = await started(factory)
        with pytest.raises(
            CheckpointError,
            match=rf"checkpoint of task 'Partition 0' to cp\.{STREAM}#0: broker unreachable",
        ):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "2"}))
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "1"})

    async def test_stop_stops_the_admin(self, factory: RecordingFactory) -> None:
        manager = await started(factory)
        await manager.stop()
        assert factory.calls[-1] == ("admin.stop",)
        with pytest.raises(CheckpointError, match="has not started"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}))
