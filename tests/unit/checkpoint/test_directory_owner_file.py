"""A local directory's owner file (checkpoint/owner_file.py): the file checkpoints' directory
claimed by the first job to start on it, refused to any other, adopted when an older samzapy
left it without one."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from samzapy.api.errors import CheckpointError, JobCollisionError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint import owner_file
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.owner_file import (
    CHECKPOINT_DIRECTORY,
    OWNER_FILE,
    claim_directory,
    owner_document,
)
from samzapy.checkpoint.ports import Checkpoint

ONE = JobIdentity("twin", "1")
TWO = JobIdentity("twin", "2")
TASK = TaskName.for_partition(0)
IN_0 = SystemStreamPartition("files", "in", 0)


def start(directory: Path, job: JobIdentity | None, **kwargs: bool) -> FileCheckpointManager:
    manager = FileCheckpointManager(directory, owner=job, **kwargs)
    asyncio.run(manager.start())
    return manager


def test_the_first_job_claims_the_directory_and_another_job_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoints"
    first = start(directory, ONE)
    asyncio.run(first.write(TASK, Checkpoint({IN_0: "41"})))
    assert json.loads((directory / OWNER_FILE).read_text()) == {
        "job.id": "1",
        "job.name": "twin",
        "version": 1,
    }
    assert sorted(p.name for p in directory.iterdir()) == [OWNER_FILE, "Partition_0.json"]
    # Another container of the same job (or its restart) shares it.
    again = start(directory, ONE)
    assert asyncio.run(again.read_last(TASK)) == Checkpoint({IN_0: "41"})
    with pytest.raises(JobCollisionError) as refused:
        start(directory, TWO)
    assert str(refused.value) == (
        f"task.checkpoint.dir: checkpoint directory {directory} belongs to another job "
        "(job.name 'twin' job.id '1'), as its owner file .samzapy-owner says; this job "
        "(job.name 'twin' job.id '2') would resume from that job's checkpoints and write over "
        "them: set task.checkpoint.dir to a directory of its own, or change job.name (the "
        "other job's checkpoints are untouched)"
    )
    assert json.loads((directory / OWNER_FILE).read_bytes()) == json.loads(owner_document(ONE))


def test_a_directory_without_owner_file_is_adopted_with_its_checkpoints(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoints"
    older = start(directory, None)  # as an older samzapy wrote it: no owner file
    asyncio.run(older.write(TASK, Checkpoint({IN_0: "7"})))
    assert not (directory / OWNER_FILE).exists()
    adopted = start(directory, TWO)
    assert asyncio.run(adopted.read_last(TASK)) == Checkpoint({IN_0: "7"})
    assert json.loads((directory / OWNER_FILE).read_text())["job.id"] == "2"


def test_a_reader_that_must_not_claim_writes_nothing_and_still_refuses(tmp_path: Path) -> None:
    """``samzapy checkpoint show``: no owner file written, another job's directory refused."""
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    start(directory, ONE, claim_owner=False)
    assert list(directory.iterdir()) == []
    assert claim_directory(tmp_path / "missing", ONE, CHECKPOINT_DIRECTORY, claim=False) is None
    assert not (tmp_path / "missing").exists()
    start(directory, ONE)
    with pytest.raises(JobCollisionError, match="belongs to another job"):
        start(directory, TWO, claim_owner=False)


def test_of_two_jobs_claiming_at_once_the_first_link_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process claims the directory between this one's look and its claim: its
    owner file stays, and this job is refused (never both running on it)."""
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    real = owner_file.read_owner_file
    looks = []

    def racing(path: Path, kind: owner_file.DirectoryKind) -> JobIdentity | None:
        looks.append(path)
        if len(looks) == 1:  # this process looked and found none; then the other claimed
            assert real(path, kind) is None
            assert claim_directory(path, ONE, kind) == ONE
            return None
        return real(path, kind)

    monkeypatch.setattr(owner_file, "read_owner_file", racing)
    with pytest.raises(JobCollisionError, match=r"another job \(job.name 'twin' job.id '1'\)"):
        claim_directory(directory, TWO, CHECKPOINT_DIRECTORY)
    assert json.loads((directory / OWNER_FILE).read_text())["job.id"] == "1"
    assert [p.name for p in directory.iterdir()] == [OWNER_FILE]  # no temporary file left


def test_a_damaged_owner_file_is_a_checkpoint_error_naming_it(tmp_path: Path) -> None:
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    (directory / OWNER_FILE).write_text('{"job.name": "twin"')
    with pytest.raises(CheckpointError, match=r"corrupt owner file .*\.samzapy-owner: "):
        start(directory, ONE)


def test_a_file_system_without_hard_links_gets_the_owner_file_created_exclusively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")  # FAT, some network file systems

    monkeypatch.setattr(owner_file.os, "link", no_links)
    directory = tmp_path / "checkpoints"
    assert claim_directory(directory, ONE, CHECKPOINT_DIRECTORY) == ONE
    assert (directory / OWNER_FILE).read_bytes() == owner_document(ONE)
    assert [p.name for p in directory.iterdir()] == [OWNER_FILE]  # no temporary file left
    assert claim_directory(directory, ONE, CHECKPOINT_DIRECTORY) == ONE
    with pytest.raises(JobCollisionError):
        claim_directory(directory, TWO, CHECKPOINT_DIRECTORY)
