"""A reader that closed the pipe early (`samzapy ... | head`) ends a command's output quietly.

docs/deploy.md: "`samzapy tail ... | head` and Ctrl-C exit 0 quietly"; samzapy/cli/process.py:
every command leaves "quietly once its reader has closed the pipe". The reader here closes
its end before the command writes anything, so every write fails, whatever the buffering:
with PYTHONUNBUFFERED=1 (the Docker image's) at the write, otherwise at the last flush.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_run import HERE, ROOT, job_yaml, samzapy, write_partitions


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
    """A job that has run: its checkpoints are there to show."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(5)]})
    job = job_yaml(tmp_path, "Copy")
    assert samzapy("run", str(job), cwd=tmp_path).returncode == 0
    return job


@pytest.mark.parametrize("unbuffered", [True, False])
@pytest.mark.parametrize(
    "command",
    [("validate", "{job}"), ("checkpoint", "show", "{job}"), ("tail", "{job}", "in")],
)
def test_a_closed_pipe_is_exit_0_and_nothing_on_stderr(
    file_job: Path, command: tuple[str, ...], unbuffered: bool
) -> None:
    args = [arg.format(job=file_job) for arg in command]
    proc = into_closed_pipe(*args, cwd=file_job.parent, unbuffered=unbuffered)
    assert (proc.returncode, proc.stderr) == (0, "")
