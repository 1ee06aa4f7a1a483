"""Applications through the real command: `samzapy run`, `plan` and `validate` of app.class."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from test_run import events, read_jsonl, samzapy, signalled, write_partitions


def app_yaml(tmp_path: Path, app: str, **extra: object) -> Path:
    cfg = {
        "job.name": "clitest",
        "app.class": f"apps:{app}",
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        **extra,
    }
    path = tmp_path / "app.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def test_an_application_runs_to_the_end_of_its_input_with_exact_counts(tmp_path: Path) -> None:
    inputs = {p: [{"k": f"k{(p + i) % 7}", "n": i} for i in range(50)] for p in range(3)}
    write_partitions(tmp_path / "data", "in", inputs)
    proc = samzapy("run", str(app_yaml(tmp_path, "CountByKey")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    started = [e for e in events(proc.stdout) if e["event"] == "container_started"]
    assert started[0]["app_class"] == "apps:CountByKey"
    assert started[0]["inputs"] == ["files.in", "mem.clitest-1-partition_by-by-k"]
    final: dict[str, int] = {}
    for record in read_jsonl(tmp_path / "data" / "out" / "0.jsonl"):
        assert record["count"] == final.get(record["key"], 0) + 1
        final[record["key"]] = record["count"]
    assert final == dict(Counter(m["k"] for ms in inputs.values() for m in ms))


def test_a_rerun_reads_its_new_input_through_a_memory_intermediate_stream(
    tmp_path: Path,
) -> None:
    """The memory intermediate stream is new in each run, the checkpoints (files) are not:
    the second run's copies of its new messages are read, not skipped as if the first run's
    offsets there still stood."""
    write_partitions(tmp_path / "data", "in", {0: [{"k": f"k{i % 3}"} for i in range(40)]})
    job = app_yaml(tmp_path, "CountByKey")
    first = samzapy("run", str(job))
    assert first.returncode == 0, first.stdout + first.stderr
    with (tmp_path / "data" / "in" / "0.jsonl").open("a") as more:
        more.writelines(json.dumps({"k": "new"}) + "\n" for _ in range(10))
    second = samzapy("run", str(job))
    assert second.returncode == 0, second.stdout + second.stderr
    out = list(read_jsonl(tmp_path / "data" / "out" / "0.jsonl"))
    assert len(out) == 50
    assert [r["count"] for r in out if r["key"] == "new"] == list(range(1, 11))
    logged = events(second.stdout)
    (went_back,) = [e["ssps"] for e in logged if e["event"] == "stream_went_back"]
    assert went_back == ["mem.clitest-1-partition_by-by-k#0"]


def test_a_stop_drains_the_memory_intermediate_stream_and_a_rerun_loses_nothing(
    tmp_path: Path,
) -> None:
    """SIGTERM mid-run, twice: stage 1 has checkpointed messages whose copies wait in the
    memory intermediate stream, which ends with the process. The stop processes them first
    (and no more input), so each rerun finds every message either done or still to do."""
    inputs = {p: [{"k": f"k{i % 5}", "p": p, "n": i} for i in range(1500)] for p in range(2)}
    write_partitions(tmp_path / "data", "in", inputs)
    job = app_yaml(tmp_path, "SlowRelay", **{"task.commit.ms": 100})
    ready, out_file = tmp_path / "ready", tmp_path / "data" / "out" / "0.jsonl"
    written = 0
    for _ in range(2):  # the first run, then a rerun, each stopped mid-run
        ready.unlink(missing_ok=True)
        # Commits run meanwhile (every 100 ms) while stage 2 lags behind stage 1.
        code, out, err = signalled(job, ready, signal.SIGTERM, {}, after_s=0.3)
        assert code == 0, out + err
        (drained,) = [e for e in events(out) if e["event"] == "intermediate_streams_drained"]
        assert drained["streams"] == ["mem.clitest-1-partition_by-by-k"]
        assert written < len(read_jsonl(out_file)) < 3000  # stopped mid-run, after progress
        written = len(read_jsonl(out_file))
    rerun = samzapy("run", str(job))
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    seen = Counter((r["p"], r["n"]) for r in read_jsonl(out_file))
    assert seen == {(p, i): 1 for p in range(2) for i in range(1500)}


def test_a_drain_past_task_shutdown_ms_logs_drain_timed_out_and_the_stop_goes_on(
    tmp_path: Path,
) -> None:
    """The memory intermediate stream holds more than its second stage can take within
    task.shutdown.ms: the stop waits that long, logs drain_timed_out with what was left, and
    goes on to commit and exit 0 (what the stream still held is lost, as documented)."""
    inputs = {p: [{"k": f"k{i % 5}", "p": p, "n": i} for i in range(1500)] for p in range(2)}
    write_partitions(tmp_path / "data", "in", inputs)
    job = app_yaml(tmp_path, "FanOutRelay", **{"task.shutdown.ms": 200})
    started = time.monotonic()
    code, out, err = signalled(job, tmp_path / "ready", signal.SIGTERM, {}, after_s=0.3)
    took = time.monotonic() - started
    assert code == 0, out + err
    logged = events(out)
    names = [e["event"] for e in logged]
    assert "intermediate_streams_drained" not in names, names
    (timed_out,) = [e for e in logged if e["event"] == "drain_timed_out"]
    assert timed_out["streams"] == ["mem.clitest-1-partition_by-by-k"]
    assert timed_out["shutdown_ms"] == 200 and timed_out["left"], timed_out
    assert names.index("drain_timed_out") < names.index("job_finished"), names
    assert took < 30, f"took {took:.1f} s"


def test_operator_counts_leave_out_the_messages_dropped_on_a_failure(tmp_path: Path) -> None:
    """docs/api.md, Metrics: messages-out are "the messages it passed on or sent". Under
    task.drop.process.errors a message the map's function fails on goes no further: neither
    the map's messages-out nor the send_to's count it, whose messages-out is what it wrote."""
    inputs = {p: [{"k": f"k{i % 5}", "bad": i % 10 == 3} for i in range(40)] for p in range(2)}
    write_partitions(tmp_path / "data", "in", inputs)
    job = app_yaml(
        tmp_path, "CountByKey", **{"task.drop.process.errors": True, "metrics.reporters": ["log"]}
    )
    proc = samzapy("run", str(job))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    written = len(list(read_jsonl(tmp_path / "data" / "out" / "0.jsonl")))
    bad = sum(m["bad"] for ms in inputs.values() for m in ms)
    assert written == 80 - bad
    last = [e["metrics"] for e in events(proc.stdout) if e["event"] == "metrics_reported"][-1]
    assert last["container"]["process-errors"] == bad
    tasks = [group for name, group in last.items() if name.startswith("task.")]

    def total(metric: str) -> int:
        return sum(group[metric] for group in tasks)

    assert total("map-1-messages-in") == 80
    assert total("map-1-messages-out") == written
    assert total("send_to-1-messages-in") == total("send_to-1-messages-out") == written


def test_a_failing_function_exits_1_naming_operator_partition_and_offset(tmp_path: Path) -> None:
    msgs = [{"k": "a", "n": i} for i in range(20)]
    msgs[7]["bad"] = True
    write_partitions(tmp_path / "data", "in", {0: msgs})
    proc = samzapy("run", str(app_yaml(tmp_path, "CountByKey")))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (failed,) = [e for e in events(proc.stdout) if e["event"] == "task_failed"]
    # the message reached Tally through the intermediate stream: its offset there
    assert failed["operator"] == "map-1"
    assert failed["ssp"] == "mem.clitest-1-partition_by-by-k#0"
    assert failed["offset"] == "7"
    assert "ValueError" in failed["error"]


def test_plan_prints_the_graph_and_json_only_json(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [], 1: [], 2: [], 3: []})
    job = app_yaml(tmp_path, "CountByKey")
    text = samzapy("plan", str(job), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "by-k (partition_by) <- stream:in -> mem.clitest-1-partition_by-by-k" in text.stdout
    assert "partitions 4 (largest input partition count)" in text.stdout
    doc = json.loads(samzapy("plan", str(job), "--format", "json", cwd=tmp_path).stdout)
    assert [o["kind"] for o in doc["operators"]] == ["partition_by", "map", "send_to"]
    (stream,) = doc["intermediate_streams"]
    assert (stream["physical_name"], stream["partitions"]) == ("clitest-1-partition_by-by-k", 4)
    assert stream["upstream"] == ["files.in"]
    sized = samzapy(
        "plan", str(job), "--format", "json", "--set", "job.intermediate.stream.partitions=6"
    )
    assert json.loads(sized.stdout)["intermediate_streams"][0]["partitions"] == 6


def test_plan_json_stays_json_when_describe_prints_and_sys_exit_in_describe_is_exit_2(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: []})
    chatty = samzapy("plan", str(app_yaml(tmp_path, "ChattyCountByKey")), "--format", "json")
    assert chatty.returncode == 0, chatty.stderr
    assert json.loads(chatty.stdout)["operators"]  # the print went to stderr
    assert "describing the graph" in chatty.stderr
    for command in ("plan", "validate"):
        exits = samzapy(command, str(app_yaml(tmp_path, "ExitsInDescribe")))
        assert exits.returncode == 2, (command, exits.stderr)
        assert "describe() of apps:ExitsInDescribe failed: SystemExit" in exits.stderr


def test_validate_and_run_report_a_bad_graph_with_the_files_other_problems(tmp_path: Path) -> None:
    job = app_yaml(tmp_path, "TwoIds", **{"task.commit.ms": "soon"})
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 2
    assert "app.class: apps:TwoIds: op_id 'x' is used twice" in checked.stderr
    assert "task.commit.ms" in checked.stderr
    proc = samzapy("run", str(job))
    assert proc.returncode == 2
    (invalid,) = [e for e in events(proc.stdout) if e["event"] == "config_invalid"]
    assert any("op_id 'x' is used twice" in p for p in invalid["problems"])


def test_validate_and_run_report_a_broadcast_without_a_serde(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"k": "a"}]})
    job = app_yaml(tmp_path, "BroadcastWithoutSerde")
    problem = "app.class: apps:BroadcastWithoutSerde: broadcast 'everyone' was given serde None"
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 2
    assert problem in checked.stderr
    assert "set systems.mem.samza.msg.serde" in checked.stderr
    proc = samzapy("run", str(job))
    assert proc.returncode == 2
    (invalid,) = [e for e in events(proc.stdout) if e["event"] == "config_invalid"]
    assert any(problem in p for p in invalid["problems"])
    fixed = app_yaml(tmp_path, "BroadcastWithoutSerde", **{"systems.mem.samza.msg.serde": "json"})
    assert samzapy("validate", str(fixed), cwd=tmp_path).returncode == 0


def test_a_missing_job_name_is_reported_once_for_an_application(tmp_path: Path) -> None:
    # The planner needs it for the intermediate streams' names, and says what the check says.
    job = app_yaml(tmp_path, "CountByKey")
    job.write_text(
        json.dumps({k: v for k, v in json.loads(job.read_text()).items() if k != "job.name"})
    )
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 2
    assert checked.stderr.splitlines().count("job.name is required") == 1, checked.stderr
    assert "app.class" not in checked.stderr


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            {"task.inputs": ["elsewhere.in"]},
            "task.inputs comes from the application (app.class): leave it out of the job file",
        ),
        (
            {"task.inputs": ["elsewhere.in"], "task.broadcast.inputs": ["elsewhere.b#0"]},
            "task.inputs and task.broadcast.inputs come from the application (app.class): "
            "leave them out of the job file",
        ),
    ],
)
def test_task_inputs_in_an_applications_job_file_is_one_problem(
    tmp_path: Path, extra: dict[str, object], problem: str
) -> None:
    job = app_yaml(tmp_path, "CountByKey", **extra)
    checked = samzapy("validate", str(job), cwd=tmp_path)
    assert checked.returncode == 2
    assert checked.stderr.splitlines() == [problem]


def test_task_class_and_app_class_together_are_refused(tmp_path: Path) -> None:
    job = app_yaml(tmp_path, "CountByKey", **{"task.class": "jobs:Copy"})
    proc = samzapy("validate", str(job), cwd=tmp_path)
    assert proc.returncode == 2
    assert "task.class and app.class are both set" in proc.stderr


def test_an_application_enriches_views_from_a_bootstrapped_table_and_plans_it(
    tmp_path: Path,
) -> None:
    profiles = [{"id": f"m{i}", "name": f"member {i}"} for i in range(50)]
    views = [{"member": f"m{i % 60}", "page": f"/{i}"} for i in range(300)]
    write_partitions(tmp_path / "data", "profiles", {0: profiles})
    write_partitions(tmp_path / "data", "views", {0: views})
    job = app_yaml(tmp_path, "EnrichViews")
    proc = samzapy("run", str(job))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = read_jsonl(tmp_path / "data" / "out" / "0.jsonl")
    # every view, in order, each with its member's name: the profiles were read first
    assert [(o["page"], o["name"]) for o in out] == [
        (v["page"], f"member {int(v['member'][1:])}" if int(v["member"][1:]) < 50 else None)
        for v in views
    ]
    assert any(e["event"] == "bootstrap_completed" for e in events(proc.stdout))
    text = samzapy("plan", str(job), cwd=tmp_path).stdout
    assert "stream_table_join-1 (stream_table_join) <- map-2" in text
    assert "    table profiles" in text
    assert "send_to_table-1 (send_to_table) <- map-1 -> table:profiles" in text
    assert "tables:\n  profiles: rocksdb store profiles, changelogged" in text
