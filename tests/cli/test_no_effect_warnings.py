"""docs/configuration.md ("What a job sets and never uses"): a task's hook without the
interface that has it called, and a key that does nothing beside the others, get one warning
each from `validate` and `run`, which go on."""

from __future__ import annotations

from pathlib import Path

from test_run import events, job_yaml, samzapy, write_partitions


def test_a_close_without_closable_task_and_a_window_interval_are_warned_of(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    job = job_yaml(
        tmp_path,
        "CloseWithoutClosable",
        **{"task.window.ms": 1000, "task.transaction.timeout.ms": 120000},
    )
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stderr.splitlines()
    (never,) = [line for line in lines if "method_never_called" in line]
    assert "method=close" in never and "add ClosableTask to its bases" in never
    keys = sorted(
        line.split("key=")[1].split()[0] for line in lines if "key_without_effect" in line
    )
    assert keys == ["task.transaction.timeout.ms", "task.window.ms"]

    ran = samzapy("run", str(job), cwd=tmp_path)
    # The close that would fail is indeed never called: the job ends cleanly.
    assert ran.returncode == 0, ran.stderr + ran.stdout
    logged = events(ran.stdout)
    assert [e["method"] for e in logged if e["event"] == "method_never_called"] == ["close"]
    assert sorted(e["key"] for e in logged if e["event"] == "key_without_effect") == keys
    assert not [e for e in logged if e["event"] in ("task_failed", "job_failed")]


def test_a_task_with_its_interfaces_and_only_keys_it_uses_gets_no_warning(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: []})
    job = job_yaml(tmp_path, "FailOnClose", **{"task.commit.ms": 1000})
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "never_called" not in checked.stderr and "without_effect" not in checked.stderr
