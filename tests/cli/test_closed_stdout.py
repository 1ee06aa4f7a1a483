"""A reader that closed the pipe early (`samzapy ... | head`) ends a command's output quietly.

docs/deploy.md: "`samzapy tail ... | head` and Ctrl-C exit 0 quietly"; samzapy/cli/process.py:
every command leaves "quietly once its reader has closed the pipe". The reader here closes
its end before the command writes anything, so every write fails, whatever the buffering:
with PYTHONUNBUFFERED=1 (the Docker image's) at the write, otherwise at the last flush.
`run`, whose stdout is its log, stops as on SIGTERM instead and exits 1 (docs/deploy.md,
"Exit codes").
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_run import HERE, ROOT, job_yaml, read_jsonl, samzapy, started, write_partitions
from test_run_apps import app_yaml

from samzapy import SystemStreamPartition, TaskName
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.ports import Checkpoint


def into_closed_pipe(
    *args: str, cwd: Path, unbuffered: bool = True
) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))}
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run(
            [sys.executable, "-m", "samzapy", *args],
            cwd=cwd,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.fixture
def file_job(tmp_path: Path) -> Path:
    """A job that has read its input: its checkpoint is there to show."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(5)]})

    async def checkpointed() -> None:
        manager = FileCheckpointManager(tmp_path / "checkpoints")
        await manager.start()
        ssp = SystemStreamPartition("files", "in", 0)
        await manager.write(TaskName("Partition 0"), Checkpoint({ssp: "4"}, epoch=1))

    asyncio.run(checkpointed())
    return job_yaml(tmp_path, "Copy")


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize(
    "command",
    [
        ("validate", "{job}"),
        ("plan", "{app}"),
        ("plan", "{app}", "--format", "json"),
        ("checkpoint", "show", "{job}"),
        ("checkpoint", "set", "{job}", "--to", "upcoming", "--dry-run"),
        ("tail", "{job}", "in"),
        ("--help",),
        ("--version",),
        ("checkpoint", "set", "--help"),
    ],
    ids=" ".join,
)
def test_a_closed_pipe_is_exit_0_and_nothing_on_stderr(
    file_job: Path, command: tuple[str, ...], unbuffered: bool
) -> None:
    app = app_yaml(file_job.parent, "CountByKey")
    args = [arg.format(job=file_job, app=app) for arg in command]
    proc = into_closed_pipe(*args, cwd=file_job.parent, unbuffered=unbuffered)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_set_into_a_closed_pipe_still_writes_what_was_asked(file_job: Path) -> None:
    """Its reader gone, set goes on: the checkpoints are moved, as without a pipe."""
    proc = into_closed_pipe(
        "checkpoint", "set", str(file_job), "--to", "oldest", cwd=file_job.parent
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    shown = samzapy("checkpoint", "show", str(file_job), cwd=file_job.parent)
    assert '"offsets": {"files.in#0": "-1"}' in shown.stdout, shown.stderr


def last_checkpoint(tmp_path: Path) -> str:
    saved = json.loads((tmp_path / "checkpoints" / "Partition_0.json").read_text())
    return str(saved["offsets"][0]["offset"])


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
def test_run_into_a_closed_pipe_stops_before_any_message_and_exits_1(
    tmp_path: Path, unbuffered: bool
) -> None:
    """Its log's reader gone from the start, the job stops at start-up, processing
    nothing: a job nobody can watch is not left running (exit 1, for a restart)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(5)]})
    job = job_yaml(tmp_path, "Copy")
    proc = into_closed_pipe("run", str(job), cwd=tmp_path, unbuffered=unbuffered)
    assert (proc.returncode, proc.stderr) == (1, "")
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == []


def test_run_whose_log_reader_leaves_stops_cleanly_and_commits_what_it_processed(
    tmp_path: Path,
) -> None:
    """`samzapy run job.yaml | head -3` on a job that keeps running: the next log line
    after head has its lines finds the pipe closed. It had raised BrokenPipeError in the
    event loop's callbacks, printed `--- Logging error ---` tracebacks to stderr, and left the
    job running with its signal handlers broken: a SIGTERM no longer stopped it."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(20)]})
    ready = tmp_path / "ready"
    job = job_yaml(
        tmp_path,
        "CountSignals",
        **{
            "systems.files.follow": True,
            "task.commit.ms": 600000,
            "task.progress.interval.ms": 100,  # a log line soon after the pipe closes
        },
    )
    proc = started(job, ready, {"SAMZAPY_TEST_READY_AFTER": "20", "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()  # head -1
        code = proc.wait(timeout=30)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (code, err) == (1, "")
    assert last_checkpoint(tmp_path) == "19"
    assert len(read_jsonl(tmp_path / "data" / "out" / "0.jsonl")) == 20


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (("checkpoint", "show", "{job}"), 0),  # names the tasks without a checkpoint
        (("validate", "{bad}"), 2),  # prints the problems
        (("tail", "{job}", "nope"), 2),  # names the stream it does not know
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else str(value),
)
def test_a_closed_stderr_leaves_the_exit_code_alone(
    tmp_path: Path, command: tuple[str, ...], code: int
) -> None:
    """What a command says on stderr, its reader gone (`2>&1 | head` once head has its
    lines): the BrokenPipeError had ended the command, exit 1 whatever its outcome."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    bad = tmp_path / "bad.yaml"
    bad.write_text('{"job.name": "bad", "task.inputs": "nope"}')
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "samzapy", *(a.format(job=job, bad=bad) for a in command)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=write_end,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == code
