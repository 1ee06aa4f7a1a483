"""`samzapy run` with output on a memory system: its streams live in the process, so at exit
the run says what each held and that it is gone (`memory_stream_discarded`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_run import events, job_yaml, samzapy, write_partitions


def discarded(stdout: str) -> list[dict]:
    return [e for e in events(stdout) if e["event"] == "memory_stream_discarded"]


def test_a_tasks_memory_output_is_reported_at_exit_with_its_messages(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}, {"n": 2}], 1: [{"n": 3}]})
    memory = {
        "systems.mem.samza.factory": "memory",
        "streams.out.samza.system": "mem",
        "streams.out.partitions": 2,
    }
    job = job_yaml(tmp_path, "CopyToMemory", **memory)
    proc = samzapy("run", str(job))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (event,) = discarded(proc.stdout)
    assert event["level"] == "warning"
    assert (event["system"], event["stream"], event["kind"]) == ("mem", "out", "output")
    assert (event["messages"], event["partitions"]) == (3, 2)
    assert "gone once it exits" in event["reason"]
    lines = [e["event"] for e in events(proc.stdout)]
    assert lines[-1] == "container_exited"  # the process's last line stays last


def test_checkpoints_on_a_memory_system_are_reported_as_checkpoints(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    cfg = json.loads(job.read_text())
    del cfg["task.checkpoint.dir"]
    cfg.update(
        {
            "task.checkpoint.factory": "stream",
            "task.checkpoint.system": "mem",
            "systems.mem.samza.factory": "memory",
        }
    )
    job.write_text(json.dumps(cfg))
    proc = samzapy("run", str(job))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(e["system"], e["stream"], e["kind"]) for e in discarded(proc.stdout)] == [
        ("mem", "__samzapy_checkpoint_clitest_1", "checkpoints")
    ]


def test_an_applications_memory_output_is_reported_but_not_its_intermediate_stream(
    tmp_path: Path,
) -> None:
    inputs = {0: [{"k": "a"}, {"k": "b"}, {"k": "a"}]}
    write_partitions(tmp_path / "data", "in", inputs)
    job = {
        "job.name": "clitest",
        "app.class": "apps:CountByKeyToMemory",
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
    }
    path = tmp_path / "app.yaml"
    path.write_text(json.dumps(job))
    proc = samzapy("run", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [(e["stream"], e["kind"], e["messages"]) for e in discarded(proc.stdout)] == [
        ("counts", "output", 3)
    ]


@pytest.mark.parametrize(
    ("keys", "where"),
    [
        ({"task.checkpoint.factory": "memory"}, "task.checkpoint.factory is memory"),
        (
            {"task.checkpoint.factory": "stream", "task.checkpoint.system": "mem"},
            "the checkpoint stream is on system 'mem', a memory system",
        ),
    ],
)
def test_checkpoints_that_die_with_the_process_are_warned_of_before_the_run(
    tmp_path: Path, keys: dict[str, str], where: str
) -> None:
    job = {
        "job.name": "clitest",
        "task.class": "jobs:CopyToMemory",
        "task.inputs": ["files.in"],
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        "systems.mem.samza.factory": "memory",
        **keys,
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job))
    checked = samzapy("validate", str(path))
    assert checked.returncode == 0, checked.stderr
    (line,) = [line for line in checked.stderr.splitlines() if "checkpoints_in_memory" in line]
    assert where in line and "a restart does not resume" in line
