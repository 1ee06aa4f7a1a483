"""Task applications through the real command: `samzapy run`, `validate` and `plan` of an
app.class that is a TaskApplication."""

from __future__ import annotations

import json
from pathlib import Path

from test_run import events, read_jsonl, samzapy, write_partitions


def task_app_yaml(tmp_path: Path, app: str, **extra: object) -> Path:
    cfg = {
        "job.name": "clitest",
        "app.class": f"task_apps:{app}",
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        **extra,
    }
    path = tmp_path / "app.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def final_counts(tmp_path: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted((tmp_path / "data" / "out").glob("*.jsonl")):
        for record in read_jsonl(path):
            found[record["key"]] = record["count"]
    return found


def test_a_task_application_runs_and_a_rerun_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """Its tasks count into a RocksDB table; the rerun reads only the input added since (its
    checkpoint), and the table it kept carries the counts on."""
    write_partitions(tmp_path / "data", "in", {0: [{"k": "a"}, {"k": "b"}, {"k": "a"}]})
    job = task_app_yaml(tmp_path, "CountKeys")
    first = samzapy("run", str(job))
    assert first.returncode == 0, first.stdout + first.stderr
    (started,) = [e for e in events(first.stdout) if e["event"] == "container_started"]
    assert started["app_class"] == "task_apps:CountKeys"
    assert started["task_class"] == "task_apps:RunningCount"
    assert started["inputs"] == ["files.in"]
    assert final_counts(tmp_path) == {"a": 2, "b": 1}
    with (tmp_path / "data" / "in" / "0.jsonl").open("a") as more:
        more.write(json.dumps({"k": "a"}) + "\n")
    second = samzapy("run", str(job))
    assert second.returncode == 0, second.stdout + second.stderr
    (finished,) = [e for e in events(second.stdout) if e["event"] == "job_finished"]
    assert finished["processed"] == 1
    assert final_counts(tmp_path) == {"a": 3, "b": 1}


def test_validate_and_plan_show_what_the_task_application_describes(tmp_path: Path) -> None:
    job = task_app_yaml(tmp_path, "CountKeys")
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "task.inputs" in checked.stdout and "files.in" in checked.stdout
    assert "stores.counts.factory: rocksdb" in checked.stdout
    text = samzapy("plan", str(job), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        "application: task_apps:CountKeys",
        "inputs:",
        "  in: files.in [msg json]",
        "task: task_apps:RunningCount",
        "outputs:",
        "  out: files.out [key string, msg json]",
        "intermediate streams: none",
        "tables:",
        "  counts: rocksdb store counts",
        "stores:",
        "  counts",
    ]
    as_json = json.loads(samzapy("plan", str(job), "--format", "json", cwd=tmp_path).stdout)
    assert as_json["task_class"] == "task_apps:RunningCount"
    assert as_json["operators"] == []
    assert [s["stream_id"] for s in as_json["outputs"]] == ["out"]
    assert [t["table_id"] for t in as_json["tables"]] == ["counts"]
    assert as_json["stores"] == ["counts"]


def test_a_factory_returning_no_task_exits_2_naming_app_class(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"k": "a"}]})
    job = task_app_yaml(tmp_path, "NoTask")
    proc = samzapy("run", str(job))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (invalid,) = [e for e in events(proc.stdout) if e["event"] == "config_invalid"]
    (problem,) = invalid["problems"]
    assert problem.startswith("app.class: task_apps:NoTask's task factory task_apps:")
    assert "returned 'a string', which is not a task" in problem
    assert samzapy("validate", str(job), cwd=tmp_path).returncode == 2
