"""One contract test class over every checkpoint manager (see samzapy/checkpoint/ports.py).

Managers are built through ``checkpoint_manager_for``, as the container builds them; a
"reopen" builds a second manager over the same storage, as a restarted process would.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from samzapy.api.errors import CheckpointError, ConfigError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.file import FileCheckpointManager, task_file_name, task_name_from_file
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.checkpoint.registry import checkpoint_manager_for
from samzapy.checkpoint.stream import StreamCheckpointManager
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.kafka import KafkaSystemFactory
from samzapy.system.ports import SystemFactory

TASK = TaskName.for_partition(0)
OTHER_TASK = TaskName.for_partition(1)
IN_0 = SystemStreamPartition("kafka", "page-views", 0)
IN_1 = SystemStreamPartition("kafka", "page-views", 1)
CLICKS = SystemStreamPartition("file", "clicks", 0)


def file_names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


class ManagerSource:
    """Builds managers over one storage location (a directory, a memory namespace or a
    checkpoint stream of a system)."""

    def __init__(
        self, factory: str, tmp_path: Path, system_factory: SystemFactory | None = None
    ) -> None:
        self.factory = factory
        self.directory = tmp_path / "checkpoints"
        self.namespace = f"contract-{uuid.uuid4().hex}"
        self.job_id = uuid.uuid4().hex  # a checkpoint stream of its own on a shared system
        self.system_factory = system_factory

    async def open(self) -> CheckpointManager:
        manager = checkpoint_manager_for(
            self.factory,
            job_name="job",
            job_id=self.job_id,
            checkpoint_dir=str(self.directory),
            namespace=self.namespace,
            system_factory=self.system_factory,
            replication_factor=1,
        )
        manager.register(TASK)
        manager.register(OTHER_TASK)
        await manager.start()
        return manager


def memory_stream_source(request: pytest.FixtureRequest, tmp_path: Path) -> ManagerSource:
    """The stream manager over the memory system (its broker namespace is the source's)."""
    source = ManagerSource("stream", tmp_path)
    source.system_factory = InMemorySystemFactory("checkpoints", {"namespace": source.namespace})
    return source


def kafka_source(request: pytest.FixtureRequest, tmp_path: Path) -> ManagerSource:
    """The kafka manager over the session's broker; the source's job id gives every test a
    checkpoint topic of its own."""
    bootstrap = request.getfixturevalue("kafka_bootstrap")
    system = KafkaSystemFactory("kafka", {"bootstrap.servers": bootstrap})
    return ManagerSource("kafka", tmp_path, system)


#: How each parametrized source is built. A stream manager over another system plugs in
#: here, as ``kafka`` does.
SOURCES: dict[str, Callable[[pytest.FixtureRequest, Path], ManagerSource]] = {
    "file": lambda request, tmp_path: ManagerSource("file", tmp_path),
    "kafka": kafka_source,
    "memory": lambda request, tmp_path: ManagerSource("memory", tmp_path),
    "stream-memory": memory_stream_source,
}


@pytest.fixture(params=sorted(SOURCES))
async def source(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ManagerSource]:
    built = SOURCES[request.param](request, tmp_path)
    yield built
    InMemoryCheckpointManager.drop_namespace(built.namespace)
    InMemoryBroker.drop_namespace(built.namespace)


@pytest.fixture
async def manager(source: ManagerSource) -> AsyncIterator[CheckpointManager]:
    opened = await source.open()
    yield opened
    await opened.stop()


class TestCheckpointContract:
    async def test_read_last_is_none_before_any_write(self, manager: CheckpointManager) -> None:
        assert await manager.read_last(TASK) is None

    async def test_write_then_read_returns_offsets_and_extra(
        self, manager: CheckpointManager
    ) -> None:
        checkpoint = Checkpoint(
            offsets={IN_0: "42", IN_1: "7", CLICKS: "0"},
            partition_counts={
                SystemStream("kafka", "page-views"): 2,
                SystemStream("kafka", "clicks"): 1,
            },
            changelog_offsets={"counts": "12"},
            control={"partitions": {}, "watermarks": [1, 2]},
            snapshots={"counts": "12-9f2c01ab"},
        )
        await manager.write(TASK, checkpoint)
        assert await manager.read_last(TASK) == checkpoint
        assert await manager.read_last(OTHER_TASK) is None

    async def test_latest_write_wins(self, manager: CheckpointManager) -> None:
        await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}, changelog_offsets={"n": "1"}))
        await manager.write(TASK, Checkpoint(offsets={IN_0: "2", IN_1: "5"}))
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "2", IN_1: "5"})

    async def test_tasks_are_kept_apart(self, manager: CheckpointManager) -> None:
        await manager.write(TASK, Checkpoint(offsets={IN_0: "10"}))
        await manager.write(OTHER_TASK, Checkpoint(offsets={IN_1: "20"}))
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "10"})
        assert await manager.read_last(OTHER_TASK) == Checkpoint(offsets={IN_1: "20"})

    async def test_a_new_manager_reads_what_an_earlier_one_wrote(
        self, source: ManagerSource
    ) -> None:
        first = await source.open()
        await first.write(TASK, Checkpoint(offsets={IN_0: "99"}, changelog_offsets={"k": "v"}))
        await first.stop()
        second = await source.open()
        assert await second.read_last(TASK) == Checkpoint(
            offsets={IN_0: "99"}, changelog_offsets={"k": "v"}
        )
        await second.stop()

    async def test_a_new_manager_reads_the_latest_checkpoint_of_each_task(
        self, source: ManagerSource
    ) -> None:
        first = await source.open()
        await first.write(TASK, Checkpoint(offsets={IN_0: "1"}))
        await first.write(OTHER_TASK, Checkpoint(offsets={IN_1: "5"}))
        await first.write(TASK, Checkpoint(offsets={IN_0: "2"}, changelog_offsets={"n": "2"}))
        await first.stop()
        second = await source.open()
        await second.write(OTHER_TASK, Checkpoint(offsets={IN_1: "6"}))
        await second.stop()
        third = await source.open()
        assert await third.read_last(TASK) == Checkpoint(
            offsets={IN_0: "2"}, changelog_offsets={"n": "2"}
        )
        assert await third.read_last(OTHER_TASK) == Checkpoint(offsets={IN_1: "6"})
        await third.stop()

    async def test_written_checkpoint_is_a_copy(self, manager: CheckpointManager) -> None:
        offsets = {IN_0: "1"}
        control: dict[str, object] = {"list": [1]}
        await manager.write(TASK, Checkpoint(offsets=offsets, control=control))
        offsets[IN_0] = "2"
        control["list"] = [2]
        assert await manager.read_last(TASK) == Checkpoint(
            offsets={IN_0: "1"}, control={"list": [1]}
        )

    async def test_control_state_that_is_not_json_is_refused(
        self, manager: CheckpointManager
    ) -> None:
        with pytest.raises(CheckpointError, match="control state must be JSON-serializable"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}, control={"x": object()}))
        assert await manager.read_last(TASK) is None

    async def test_offsets_must_be_strings(self, manager: CheckpointManager) -> None:
        with pytest.raises(CheckpointError, match=r"offset of kafka.page-views#0 must be a str"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: 5}))  # type: ignore[dict-item]


class TestFileCheckpointManager:
    async def test_atomic_write_leaves_only_the_task_files(self, tmp_path: Path) -> None:
        manager = FileCheckpointManager(tmp_path / "cp")
        await manager.start()
        for offset in range(3):
            await manager.write(TASK, Checkpoint(offsets={IN_0: str(offset)}))
        await manager.write(OTHER_TASK, Checkpoint(offsets={IN_1: "0"}))
        assert file_names(tmp_path / "cp") == [
            "Partition_0.json",
            "Partition_1.json",
        ]

    async def test_failed_write_keeps_the_previous_file_and_no_temporary(
        self, tmp_path: Path
    ) -> None:
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        (tmp_path / "Partition_0.json").mkdir()  # os.replace cannot put a file over it
        with pytest.raises(CheckpointError, match=r"cannot write checkpoint .*Partition_0\.json"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}))
        assert file_names(tmp_path) == ["Partition_0.json"]

    async def test_a_checkpoint_of_a_higher_epoch_is_never_written_over(
        self, tmp_path: Path
    ) -> None:
        """A job that owns the task under epoch 1 must not undo a checkpoint written under
        epoch 2 (samzapy checkpoint set while it ran): its write fails, naming both."""
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        await manager.write(TASK, Checkpoint(offsets={IN_0: "108"}, epoch=1))
        await FileCheckpointManager(tmp_path).write(TASK, Checkpoint(offsets={IN_0: "-1"}, epoch=2))
        with pytest.raises(CheckpointError, match=r"under epoch 2, after .* under epoch 1"):
            await manager.write(TASK, Checkpoint(offsets={IN_0: "109"}, epoch=1))
        assert await manager.read_last(TASK) == Checkpoint(offsets={IN_0: "-1"}, epoch=2)
        await manager.write(TASK, Checkpoint(offsets={IN_0: "3"}, epoch=2))  # the same: fine
        await manager.write(TASK, Checkpoint(offsets={IN_0: "4"}))  # no epoch: not checked
        assert (await manager.read_last(TASK)).offsets == {IN_0: "4"}  # type: ignore[union-attr]

    async def test_corrupt_file_is_an_error_naming_it(self, tmp_path: Path) -> None:
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        await manager.write(TASK, Checkpoint(offsets={IN_0: "3"}))
        path = tmp_path / "Partition_0.json"
        path.write_text('{"version": 1, "task": "Partition 0", "offs')
        with pytest.raises(CheckpointError, match=r"corrupt checkpoint .*Partition_0\.json"):
            await manager.read_last(TASK)

    @pytest.mark.parametrize(
        "content",
        [
            "[]",
            '{"version": 2, "task": "Partition 0", "offsets": []}',
            '{"version": 1, "task": "Partition 0", "offsets": [{"system": "k"}]}',
            '{"version": 1, "task": "Partition 0", "offsets": '
            '[{"system": "k", "stream": "s", "partition": "0", "offset": "1"}]}',
            '{"version": 1, "task": "Partition 9", "offsets": []}',
            '{"version": 1, "task": "Partition 0", "offsets": [], '
            '"extra": {"partition_counts": {"no-system": 1}}}',
            '{"version": 1, "task": "Partition 0", "offsets": [], '
            '"extra": {"changelog_offsets": {"counts": 12}}}',
            '{"version": 1, "task": "Partition 0", "offsets": [], "extra": {"control": []}}',
            '{"version": 1, "task": "Partition 0", "offsets": [], '
            '"extra": {"snapshots": ["counts"]}}',
        ],
    )
    async def test_malformed_documents_are_errors(self, tmp_path: Path, content: str) -> None:
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        (tmp_path / "Partition_0.json").write_text(content)
        with pytest.raises(
            CheckpointError,
            match=r"corrupt checkpoint .*Partition_0\.json: .*; restarting fails the same way "
            r"until it is fixed: restore Partition_0\.json from a backup, or move it out of ",
        ):
            await manager.read_last(TASK)

    async def test_document_format(self, tmp_path: Path) -> None:
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        checkpoint = Checkpoint(
            offsets={IN_1: "8", CLICKS: "3"},
            partition_counts={SystemStream("kafka", "page-views"): 2},
            changelog_offsets={"counts": "12"},
            control={"a": 1},
            snapshots={"counts": "12-9f2c01ab"},
        )
        await manager.write(TASK, checkpoint)
        assert json.loads((tmp_path / "Partition_0.json").read_text()) == {
            "version": 1,
            "task": "Partition 0",
            "offsets": [
                {"system": "file", "stream": "clicks", "partition": 0, "offset": "3"},
                {"system": "kafka", "stream": "page-views", "partition": 1, "offset": "8"},
            ],
            "extra": {
                "partition_counts": {"kafka.page-views": 2},
                "changelog_offsets": {"counts": "12"},
                "control": {"a": 1},
                "snapshots": {"counts": "12-9f2c01ab"},
            },
        }

    @pytest.mark.parametrize(
        ("extra", "expected"),
        [
            # Written before snapshots: none.
            (
                '{"changelog_offsets": {"counts": "12"}, "epoch": 3}',
                Checkpoint(offsets={}, changelog_offsets={"counts": "12"}, epoch=3, snapshots={}),
            ),
            # Written by a later version: what this one does not know is ignored.
            (
                '{"partition_counts": {"kafka.a.b": 3}, "later": 1}',
                Checkpoint(offsets={}, partition_counts={SystemStream("kafka", "a.b"): 3}),
            ),
        ],
    )
    async def test_documents_of_other_versions_load(
        self, tmp_path: Path, extra: str, expected: Checkpoint
    ) -> None:
        manager = FileCheckpointManager(tmp_path)
        await manager.start()
        (tmp_path / "Partition_0.json").write_text(
            f'{{"version": 1, "task": "Partition 0", "offsets": [], "extra": {extra}}}'
        )
        assert await manager.read_last(TASK) == expected

    @pytest.mark.parametrize(
        ("task", "file_name"),
        [
            ("Partition 0", "Partition_0.json"),
            ("Partition_0", "Partition%5F0.json"),
            ("a/b", "a%2Fb.json"),
            ("..", "%2E..json"),
            ("tâche 100%", "t%C3%A2che_100%25.json"),
        ],
    )
    def test_task_file_names_are_safe_and_reversible(self, task: str, file_name: str) -> None:
        assert task_file_name(task) == file_name
        assert task_name_from_file(file_name) == task

    async def test_unwritable_directory_is_an_error(self, tmp_path: Path) -> None:
        blocker = tmp_path / "file"
        blocker.write_text("")
        manager = FileCheckpointManager(blocker / "cp")
        with pytest.raises(CheckpointError, match="cannot create checkpoint directory"):
            await manager.start()


class TestInMemoryCheckpointManager:
    async def test_checkpoints_and_history_outlive_the_manager(self) -> None:
        namespace = f"memory-{uuid.uuid4().hex}"
        manager = InMemoryCheckpointManager(namespace)
        await manager.write(TASK, Checkpoint(offsets={IN_0: "1"}))
        await manager.write(TASK, Checkpoint(offsets={IN_0: "2"}))
        await manager.write(OTHER_TASK, Checkpoint(offsets={IN_1: "5"}))
        del manager
        assert InMemoryCheckpointManager.checkpoints_for(namespace) == {
            TASK: Checkpoint(offsets={IN_0: "2"}),
            OTHER_TASK: Checkpoint(offsets={IN_1: "5"}),
        }
        assert InMemoryCheckpointManager.history_for(namespace) == [
            (TASK, Checkpoint(offsets={IN_0: "1"})),
            (TASK, Checkpoint(offsets={IN_0: "2"})),
            (OTHER_TASK, Checkpoint(offsets={IN_1: "5"})),
        ]
        InMemoryCheckpointManager.drop_namespace(namespace)
        assert InMemoryCheckpointManager.checkpoints_for(namespace) == {}


class CustomManager(CheckpointManager):
    def __init__(self, *, job_name: str, job_id: str, checkpoint_dir: str, namespace: str) -> None:
        self.args = (job_name, job_id, checkpoint_dir, namespace)

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        return None

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        return None


def build(factory: str, checkpoint_dir: str = "/tmp/x") -> CheckpointManager:
    return checkpoint_manager_for(
        factory, job_name="j", job_id="1", checkpoint_dir=checkpoint_dir, namespace="ns"
    )


class TestCheckpointRegistry:
    def test_short_names(self) -> None:
        assert isinstance(build("memory"), InMemoryCheckpointManager)
        file_manager = build("file", "/tmp/cp")
        assert isinstance(file_manager, FileCheckpointManager)
        assert file_manager.directory == Path("/tmp/cp")

    def test_custom_class_gets_the_job_arguments(self) -> None:
        manager = build(f"{__name__}:CustomManager")
        assert isinstance(manager, CustomManager)
        assert manager.args == ("j", "1", "/tmp/x", "ns")

    @pytest.mark.parametrize(
        ("factory", "message"),
        [
            ("nope", "unknown checkpoint manager 'nope'"),
            ("no.such.module:Manager", "cannot import module"),
            (f"{__name__}:TestCheckpointRegistry", "is not a .*CheckpointManager subclass"),
            (f"{__name__}:Missing", "has no attribute 'Missing'"),
        ],
    )
    def test_errors_name_the_key(self, factory: str, message: str) -> None:
        with pytest.raises(ConfigError, match=f"task.checkpoint.factory.*{message}") as info:
            build(factory)
        assert info.value.key == "task.checkpoint.factory"

    def test_file_needs_a_directory(self) -> None:
        with pytest.raises(ConfigError, match="no checkpoint directory"):
            build("file", "")

    @pytest.mark.parametrize("factory", ["kafka", "stream"])
    def test_stream_managers_need_the_checkpoint_system(self, factory: str) -> None:
        with pytest.raises(
            ConfigError,
            match=f"task.checkpoint.factory is {factory} but no .*system.* set "
            "task.checkpoint.system",
        ) as info:
            build(factory)
        assert info.value.key == "task.checkpoint.system"

    @pytest.mark.parametrize("factory", ["kafka", "stream"])
    def test_stream_managers_use_the_job_s_checkpoint_stream(self, factory: str) -> None:
        system = InMemorySystemFactory("cp", {"namespace": "registry"})
        manager = checkpoint_manager_for(
            factory,
            job_name="my job",
            job_id="2",
            checkpoint_dir="",
            namespace="ns",
            system_factory=system,
            replication_factor=3,
        )
        assert isinstance(manager, StreamCheckpointManager)
        assert manager.system_factory is system
        assert manager.stream == "__samzapy_checkpoint_my_job_2"
        assert manager.replication_factor == 3

    def test_default_replication_factor_is_the_system_s(self) -> None:
        system = InMemorySystemFactory("cp", {"namespace": "registry"})
        manager = checkpoint_manager_for(
            "stream",
            job_name="j",
            job_id="1",
            checkpoint_dir="",
            namespace="ns",
            system_factory=system,
        )
        assert isinstance(manager, StreamCheckpointManager)
        assert manager.replication_factor is None

    def test_custom_class_gets_the_system_when_it_names_it(self) -> None:
        system = InMemorySystemFactory("cp", {"namespace": "registry"})
        manager = checkpoint_manager_for(
            f"{__name__}:SystemAwareManager",
            job_name="j",
            job_id="1",
            checkpoint_dir="/tmp/x",
            namespace="ns",
            system_factory=system,
            replication_factor=2,
        )
        assert isinstance(manager, SystemAwareManager)
        assert manager.args == (system, 2)


class SystemAwareManager(CheckpointManager):
    def __init__(
        self,
        *,
        job_name: str,
        job_id: str,
        checkpoint_dir: str,
        namespace: str,
        system_factory: SystemFactory | None,
        replication_factor: int,
    ) -> None:
        self.args = (system_factory, replication_factor)

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        return None

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        return None
