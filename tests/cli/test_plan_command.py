"""`samzapy plan` through the real command, as docs/api.md ("samzapy plan") describes it: a
count it cannot look up, a job that is not an application."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from test_run import samzapy, write_partitions
from test_run_apps import app_yaml


def closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_partition_count_it_cannot_look_up_is_unknown_and_null_in_json(tmp_path: Path) -> None:
    """ "`samzapy plan` looks the inputs up through their systems for up to 10 seconds, says so
    with `partitions_rule`, and shows the count as unknown (`null` in JSON) when they cannot
    be reached": here a broker that is down, given up on after connect.timeout.ms."""
    job = app_yaml(
        tmp_path,
        "CountByKeyOnKafka",
        **{
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}",
            "systems.kafka.connect.timeout.ms": 1000,
        },
    )
    text = samzapy("plan", str(job), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    # Why, on stderr (docs/deploy.md: plan logs there "at warning and above").
    assert "broker_unreachable" in text.stderr
    assert (
        "  kafka.clitest-1-partition_by-by-k: partition_by by-k, partitions unknown (largest "
        "input partition count), upstream kafka.in [key string, msg json]"
    ) in text.stdout.splitlines()
    as_json = samzapy("plan", str(job), "--format", "json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    (stream,) = json.loads(as_json.stdout)["intermediate_streams"]
    assert stream["partitions"] is None
    assert stream["partitions_rule"] == "largest input partition count"


def test_a_job_of_a_task_class_is_refused_with_exit_2(tmp_path: Path) -> None:
    """ "A job file with `task.class` instead [...] exits 2 with the problems on stderr"."""
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "clitest",
                "task.class": "jobs:Copy",
                "task.inputs": ["files.in"],
                "systems.files.samza.factory": "file",
                "systems.files.path": str(tmp_path / "data"),
            }
        )
    )
    proc = samzapy("plan", str(job), "--format", "json", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [
        f"{job}: samzapy plan is for applications (app.class); this job runs the task class "
        "jobs:Copy"
    ]


def test_a_job_validate_refuses_gets_no_plan_but_the_same_problems(tmp_path: Path) -> None:
    """ "A job file with `task.class` instead, or a problem in the file or the application,
    exits 2 with the problems on stderr, as `samzapy validate` does": every problem validate
    finds, those of what `run` builds before it starts (a system's client options, a
    reporter) included. A system that cannot be built is not shown as a count unknown."""
    job = app_yaml(
        tmp_path,
        "CountByKeyOnKafka",
        **{
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}",
            "systems.kafka.consumer.fetch.max.wait.mss": 100,
            "metrics.reporters": ["nosuchreporters:Reporter"],
        },
    )
    validated = samzapy("validate", str(job), cwd=tmp_path)
    assert validated.returncode == 2
    problems = validated.stderr.splitlines()
    assert [p.split(" ")[0] for p in problems] == [
        "systems.kafka.consumer.fetch.max.wait.mss",
        "metrics.reporters:",
    ]
    for fmt in ("text", "json"):
        planned = samzapy("plan", str(job), "--format", fmt, cwd=tmp_path)
        assert (planned.returncode, planned.stdout) == (2, ""), planned.stderr
        assert planned.stderr.splitlines() == problems


def test_a_key_in_a_misspelt_namespace_is_warned_of_on_stderr(tmp_path: Path) -> None:
    """docs/configuration.md: a first segment close to a namespace's "gets a
    `key_outside_namespaces` warning from `validate` and `run`"; docs/deploy.md: `plan` logs
    on stderr "at warning and above", as `validate` does."""
    write_partitions(tmp_path / "data", "in", {0: []})
    job = app_yaml(tmp_path, "CountByKey", **{"metric.reporters": ["log"]})
    for command in ("validate", "plan"):
        proc = samzapy(command, str(job), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        (warning,) = [line for line in proc.stderr.splitlines() if "key_outside_namespaces" in line]
        assert "did_you_mean=metrics.reporters" in warning
