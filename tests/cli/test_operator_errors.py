"""Mistakes and surprises an operator meets, through the real `samzapy` command: the exit code
and the one line they see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from test_run import HERE, ROOT, events, job_yaml, read_jsonl, samzapy, write_partitions


def config_problems(proc: subprocess.CompletedProcess[str]) -> list[str]:
    (event,) = [e for e in events(proc.stdout) if e["level"] == "error"]
    assert event["event"] == "config_invalid"
    assert event["exit_code"] == 2
    return list(event["problems"])


def test_store_changelog_on_the_file_system_is_refused_before_the_job_starts(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(
        tmp_path,
        "Copy",
        **{"stores.counts.factory": "inmemory", "stores.counts.changelog": "files.counts-log"},
    )
    line = (
        "stores.counts.changelog: system 'files' (samza.factory file) does not keep message "
        "keys, which a store changelog needs to restore the store; use a system whose "
        "samza.factory is memory or kafka"
    )

    run = samzapy("run", str(job))
    assert run.returncode == 2, run.stdout
    assert config_problems(run) == [line]
    assert not (tmp_path / "data" / "counts-log").exists()

    validate = samzapy("validate", str(job))
    assert validate.returncode == 2
    assert validate.stderr.splitlines() == [line]


def test_corrupt_checkpoint_names_the_file_and_the_remedy(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}, {"n": 2}]})
    job = job_yaml(tmp_path, "Copy")
    assert samzapy("run", str(job)).returncode == 0
    checkpoint = tmp_path / "checkpoints" / "Partition_0.json"
    checkpoint.write_text(checkpoint.read_text()[:25])  # a torn write, a full disk

    proc = samzapy("run", str(job))

    assert proc.returncode == 1, proc.stdout
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "job_failed"]
    assert failed["error"].startswith(f"corrupt checkpoint {checkpoint}: ")
    assert failed["error"].endswith(
        "; restarting fails the same way until it is fixed: restore Partition_0.json from a "
        f"backup, or move it out of {checkpoint.parent} to start the task over (its inputs at "
        "their offset defaults, samza.offset.default; its logged stores empty)"
    )
    # The remedy works: moved away, the task starts over from the oldest line.
    checkpoint.rename(tmp_path / "Partition_0.json.corrupt")
    assert samzapy("run", str(job)).returncode == 0
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == [{"n": 1}, {"n": 2}] * 2


def test_file_output_reaches_the_file_within_a_second_long_before_a_commit(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(5)]})
    job = job_yaml(tmp_path, "Copy", **{"systems.files.follow": True, "task.commit.ms": 600_000})
    out = tmp_path / "data" / "out" / "0.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Start-up included; without the linger the lines wait for a commit 10 minutes away.
        wait_for_lines(out, 5, within=15, proc=proc)
        # A line that arrives while the job runs shows up the same way (`tail -f` works).
        with open(tmp_path / "data" / "in" / "0.jsonl", "a") as f:
            f.write(json.dumps({"n": 5}) + "\n")
        wait_for_lines(out, 6, within=3, proc=proc)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert proc.returncode == 0
    assert read_jsonl(out) == [{"n": i} for i in range(6)]


def wait_for_lines(path: Path, count: int, *, within: float, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + within
    while len(read_jsonl(path)) < count:
        assert proc.poll() is None, f"the job exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} has not got {count} lines after {within} s"
        time.sleep(0.05)


def test_a_send_beyond_a_declared_streams_partitions_fails_in_the_tasks_call(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}], 1: [{"n": 2}]})
    job = job_yaml(
        tmp_path, "Copy", **{"streams.out.samza.system": "files", "streams.out.partitions": 1}
    )

    proc = samzapy("run", str(job))

    assert proc.returncode == 1, proc.stdout
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "task_failed"]
    assert (failed["task"], failed["ssp"], failed["offset"]) == ("Partition 1", "files.in#1", "0")
    assert failed["error"] == (
        "process() of task 'Partition 1' failed on files.in#1 at offset 0: "
        "StreamSystemError('partition 1 is out of range for files.out, which has 1 partitions: "
        "send to a partition from 0 to 0, or give the stream more partitions "
        "(streams.out.partitions, used when samzapy creates the stream)')"
    )


def test_a_send_beyond_a_new_streams_partitions_names_the_task_message_and_remedy(
    tmp_path: Path,
) -> None:
    # files.out is not declared: it is created on the first send, with one partition. The
    # send fails only then, after the call that made it returned; it still names its message.
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}], 1: [{"n": 2}]})
    job = job_yaml(tmp_path, "Copy")

    proc = samzapy("run", str(job))

    assert proc.returncode == 1, proc.stdout
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "task_failed"]
    assert (failed["task"], failed["ssp"], failed["offset"]) == ("Partition 1", "files.in#1", "0")
    assert failed["error"].startswith(
        "a send of task 'Partition 1' (processing files.in#1 at offset 0) failed: partition 1 "
        "is out of range for files.out, which has 1 partitions"
    )
    assert "(streams.out.partitions, used when samzapy creates the stream)" in failed["error"]


UNEXPECTED_FAILURE = """
import sys

from samzapy.cli.main import main
from samzapy.coordinator.job_runner import JobRunner


async def run(self):
    raise RuntimeError("disk on fire")


JobRunner.run = run
sys.exit(main(["run", sys.argv[1]]))
"""


def test_an_unexpected_failure_s_job_failed_line_says_what_failed(tmp_path: Path) -> None:
    """A failure samzapy did not translate (a bug, an error a library raised as is): its
    job_failed line carries the error and its type, as every other job_failed does, so that
    docs/deploy.md's "why the job stopped" filter shows it, not only exit_code."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.run(
        [sys.executable, "-c", UNEXPECTED_FAILURE, str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "job_failed"]
    assert failed["error"] == "disk on fire"
    assert failed["error_type"] == "RuntimeError"
    assert failed["exit_code"] == 1
    assert failed["exception"], "the traceback of a failure nobody expected is kept"
