"""``samzapy checkpoint set`` against a container that starts at the same moment, interleaved
step by step: the container reads the task's checkpoint (epoch N) before ``set`` writes, and
claims the task after. ``set`` writes under an epoch that container cannot also claim, so
the move stands, and ``set`` says so when the job's group gained a member meanwhile."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from pathlib import Path

import pytest

from samzapy import SystemStreamPartition, TaskName
from samzapy.api.errors import CheckpointError
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.ports import Checkpoint
from samzapy.cli import checkpoint_tool
from samzapy.cli.checkpoint_plan import parse_target, plan_task
from samzapy.cli.checkpoint_tool import JobRunningError, _Job, _set, _write
from samzapy.config import ResolvedConfig, load_config, resolve
from samzapy.container.checkpoints import ContainerCheckpoints, checkpoint_namespace
from samzapy.container.systems import system_factory

P0 = TaskName("Partition 0")
IN_0 = SystemStreamPartition("files", "in", 0)


def file_job(tmp_path: Path, **extra: str | None) -> ResolvedConfig:
    """A job on a file system; ``extra`` keys set (None: left out)."""
    data = tmp_path / "data" / "in"
    data.mkdir(parents=True)
    (data / "0.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(3)))
    job = {
        "job.name": "race",
        "task.class": "jobs:Copy",  # never imported: no container runs
        "task.inputs": ["files.in"],
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        **extra,
    }
    job = {key: value for key, value in job.items() if value is not None}
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job))
    return resolve(load_config(path))


async def checkpointed(tmp_path: Path, checkpoint: Checkpoint) -> None:
    manager = FileCheckpointManager(tmp_path / "checkpoints")
    await manager.start()
    await manager.write(P0, checkpoint)


def read(tmp_path: Path) -> Checkpoint | None:
    return asyncio.run(FileCheckpointManager(tmp_path / "checkpoints").read_last(P0))


def test_a_container_that_read_before_set_wrote_cannot_claim_over_the_move(tmp_path: Path) -> None:
    """The container read epoch 1 and claims under 2; ``set`` wrote under 3, so the claim
    does not count (the file manager refuses it: the container stops) and the move stands.
    Under 2, the container's claim of its old offsets would have replaced the move."""
    config = file_job(tmp_path)
    asyncio.run(checkpointed(tmp_path, Checkpoint({IN_0: "1"}, epoch=1)))
    factories = {name: system_factory(config, name) for name in config.systems}

    async def interleaved() -> Checkpoint:
        # 1. A container starts and reads the checkpoint, epoch 1.
        container = ContainerCheckpoints(
            config, factories, checkpoint_namespace(config), task_count=1
        )
        found = await container.start([P0])
        container.writer(P0, found[P0])
        # 2. set plans and writes.
        job = _Job(config)
        await job.start()
        try:
            planned_from = await job.read_checkpoints()
        finally:
            await job.stop()
        move = plan_task(P0, planned_from[P0], {IN_0: "-1"}, job.counts)
        await _write(job, planned_from, [move])
        # 3. The container claims the task, under the epoch after the one it read.
        try:
            with pytest.raises(CheckpointError, match="was written under epoch 3, after this"):
                await container.claim()
        finally:
            await container.stop()
        return move.new

    moved = asyncio.run(interleaved())
    assert moved.epoch == 3
    assert read(tmp_path) == moved


def test_on_a_checkpoint_stream_the_claim_of_a_container_that_read_before_set_wrote_is_ignored(
    tmp_path: Path,
) -> None:
    """The same on a checkpoint stream (a memory system's): the container's claim under 2
    lands after the move under 3, and readers keep the highest epoch, not the latest record
    (as they would on a tie): a restart resumes from the move."""
    namespace = f"race-{uuid.uuid4().hex[:8]}"
    config = file_job(
        tmp_path,
        **{
            "task.checkpoint.factory": "stream",
            "task.checkpoint.dir": None,
            "task.checkpoint.system": "mem",
            "systems.mem.samza.factory": "memory",
            "systems.mem.namespace": namespace,
        },
    )
    factories = {name: system_factory(config, name) for name in config.systems}

    def checkpoints() -> ContainerCheckpoints:
        return ContainerCheckpoints(config, factories, checkpoint_namespace(config), task_count=1)

    async def interleaved() -> tuple[Checkpoint, Checkpoint | None]:
        first = checkpoints()  # a first run of the job checkpointed offset 1, under epoch 1
        await first.start([P0])
        await first.writer(P0, None).write(Checkpoint({IN_0: "1"}))
        await first.stop()
        container = checkpoints()  # 1. a container reads epoch 1
        found = await container.start([P0])
        container.writer(P0, found[P0])
        job = _Job(config)  # 2. set plans and writes
        await job.start()
        try:
            planned_from = await job.read_checkpoints()
        finally:
            await job.stop()
        move = plan_task(P0, planned_from[P0], {IN_0: "-1"}, job.counts)
        await _write(job, planned_from, [move])
        await container.claim()  # 3. the container claims under epoch 2, after the move
        await container.stop()
        restart = checkpoints()
        try:
            return move.new, (await restart.start([P0])).get(P0)
        finally:
            await restart.stop()

    moved, resumed = asyncio.run(interleaved())
    assert resumed == moved
    assert moved.epoch == 3


def test_set_fails_when_a_member_joined_while_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No member when ``set`` looked, one after it wrote: it started meanwhile and may run
    from the offsets it read before the move. ``set`` says so (exit 1, JobRunningError)."""
    config = file_job(tmp_path)
    asyncio.run(checkpointed(tmp_path, Checkpoint({IN_0: "1"}, epoch=1)))
    looks: list[str] = []

    async def members(job: _Job) -> list[tuple[str, str, str]]:
        now = await FileCheckpointManager(tmp_path / "checkpoints").read_last(P0)
        looks.append("before" if now == Checkpoint({IN_0: "1"}, epoch=1) else "written")
        return [] if len(looks) == 1 else [("m-1", "samzapy-race", "/10.0.0.7")]

    monkeypatch.setattr(checkpoint_tool._Job, "live_members", members)
    out = io.StringIO()
    with pytest.raises(
        JobRunningError,
        match=r"^wrote 1 checkpoint\(s\), but consumer group 'samzapy\.race\.1' of job 'race' "
        r"gained 1 member\(s\) while set ran: m-1 \(client samzapy-race, host /10\.0\.0\.7\)\. "
        r"A container that started meanwhile may run from the offsets it read before the move "
        r"\(they no longer count at its next start\): stop every container of the job, then "
        r"run this again$",
    ):
        asyncio.run(
            _set(config, parse_target("oldest", is_file=False), out, dry_run=False, reset=False)
        )
    assert looks == ["before", "written"]
    assert read(tmp_path) == Checkpoint({IN_0: "-1"}, epoch=3)
    assert "wrote 1 checkpoint(s): Partition 0 (epoch 3)" in out.getvalue()
