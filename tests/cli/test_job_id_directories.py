"""Two jobs of one ``job.name`` and different ``job.id`` on one host: their local directories
(the default ``file`` checkpoint directory, the store directory) are named by ``job.name``
alone, so the second job to start finds the first's owner file there and refuses to start
(docs/configuration.md, "Two jobs, one set of names"), through the real command."""

from __future__ import annotations

import json
from pathlib import Path

from test_run import events, read_jsonl, samzapy, write_partitions

OWNER = ".samzapy-owner"


def job_file(tmp_path: Path, task: str, **extra: object) -> Path:
    """A job ``twin`` on the file system, with the default directories (relative to
    ``tmp_path``, the runs' working directory) unless ``extra`` says."""
    cfg = {
        "job.name": "twin",
        "task.class": f"jobs:{task}",
        "task.inputs": ["files.in"],
        "task.checkpoint.factory": "file",
        "systems.files.samza.factory": "file",
        "systems.files.path": "data",
        **extra,
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(cfg))
    return path


def run(tmp_path: Path, job: Path, job_id: str, *overrides: str) -> tuple[int, list[dict]]:
    proc = samzapy("run", str(job), "--set", f"job.id={job_id}", *overrides, cwd=tmp_path)
    return proc.returncode, events(proc.stdout)


def failure(logged: list[dict]) -> dict:
    (failed,) = [e for e in logged if e["event"] == "job_failed"]
    return failed


def test_a_job_of_another_id_refuses_the_default_checkpoint_directory(tmp_path: Path) -> None:
    """Job id 2 would otherwise resume from job id 1's checkpoints (its tasks have the same
    names) and read nothing; it exits 1 before any task runs, and job id 1 goes on."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(10)]})
    job = job_file(tmp_path, "Copy")
    code, _ = run(tmp_path, job, "1")
    assert code == 0
    code, logged = run(tmp_path, job, "2")
    assert code == 1
    directory = Path("state") / "twin" / "checkpoints"
    owner = json.loads((tmp_path / directory / OWNER).read_text())
    assert owner == {"job.id": "1", "job.name": "twin", "version": 1}
    failed = failure(logged)
    assert failed["error_type"] == "JobCollisionError"
    assert failed["error"] == (
        f"task.checkpoint.dir: checkpoint directory {directory} belongs to another job "
        "(job.name 'twin' job.id '1'), as its owner file .samzapy-owner says; this job "
        "(job.name 'twin' job.id '2') would resume from that job's checkpoints and write over "
        "them: set task.checkpoint.dir to a directory of its own, or change job.name (the "
        "other job's checkpoints are untouched)"
    )
    assert "container_started" not in [e["event"] for e in logged]
    assert len(read_jsonl(tmp_path / "data" / "out" / "0.jsonl")) == 10
    # Job id 1 again: its own directory, resumed after its checkpoint.
    with open(tmp_path / "data" / "in" / "0.jsonl", "a") as partition:
        partition.write('{"n": 10}\n')
    code, logged = run(tmp_path, job, "1")
    assert code == 0
    (finished,) = [e for e in logged if e["event"] == "job_finished"]
    assert finished["processed"] == 1


STORE = {
    "stores.counts.factory": "rocksdb",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "json",
}


def test_a_job_of_another_id_refuses_the_store_directory(tmp_path: Path) -> None:
    """Job id 2, checkpointing in a directory of its own, would otherwise open job id 1's
    RocksDB store (and, having no checkpoint, empty it and remove the snapshot job id 1's
    checkpoint names); it exits 1 before any task runs."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    job = job_file(tmp_path, "CountInStore", **STORE)
    code, _ = run(tmp_path, job, "1", "--set", "task.checkpoint.dir=checkpoints-1")
    assert code == 0
    code, logged = run(tmp_path, job, "2", "--set", "task.checkpoint.dir=checkpoints-2")
    assert code == 1
    assert json.loads((tmp_path / "state" / "twin" / OWNER).read_text())["job.id"] == "1"
    failed = failure(logged)
    assert failed["error_type"] == "JobCollisionError"
    assert failed["error"] == (
        f"job.logged.store.base.dir: store directory {Path('state') / 'twin'} belongs to "
        "another job (job.name 'twin' job.id '1'), as its owner file .samzapy-owner "
        "says; this job (job.name 'twin' job.id '2') would open that job's stores and write "
        "over them: set job.logged.store.base.dir to a directory of its own, or change "
        "job.name (the other job's stores are untouched)"
    )
    assert "container_started" not in [e["event"] for e in logged]
    counts = [m["count"] for m in read_jsonl(tmp_path / "data" / "out" / "0.jsonl")]
    assert counts == [1, 2, 3]


def test_directories_an_older_samzapy_wrote_are_adopted(tmp_path: Path) -> None:
    """A directory without an owner file is the first job's to start on it, with what it
    holds (a running deployment keeps its checkpoints and stores)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    job = job_file(tmp_path, "CountInStore", **STORE)
    assert run(tmp_path, job, "1")[0] == 0
    directories = (tmp_path / "state" / "twin", tmp_path / "state" / "twin" / "checkpoints")
    for directory in directories:
        (directory / OWNER).unlink()  # as an older samzapy left them
    with open(tmp_path / "data" / "in" / "0.jsonl", "a") as partition:
        partition.write('{"n": 3}\n')
    assert run(tmp_path, job, "1")[0] == 0
    counts = [m["count"] for m in read_jsonl(tmp_path / "data" / "out" / "0.jsonl")]
    assert counts == [1, 2, 3, 4]  # resumed after its checkpoint, with its store
    for directory in directories:
        assert json.loads((directory / OWNER).read_text())["job.id"] == "1"
