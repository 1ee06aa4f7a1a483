"""``samzapy validate`` and ``samzapy run`` report the same problems for the same file.

Each bad job file of the table goes through both real commands: validate prints its problems
on stderr, run logs them as one ``config_invalid`` event, both exit 2, and the two lists are
equal (and hold what the table expects, so that two empty lists cannot pass). Every problem
is pure configuration: run must refuse the file before it connects anywhere (the kafka
system points at a closed port, so a run that went on would fail otherwise, with exit 1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

UNSET = "SAMZAPY_PARITY_UNSET_VAR"

TASKS = """\
from samzapy import StreamTask


class Copy(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass


class NotATask:
    pass


class NotAnApp:
    pass
"""

BASE: dict[str, Any] = {
    "job.name": "parity",
    "task.class": "paritytasks:Copy",
    "task.inputs": ["files.in"],
    "systems.files.samza.factory": "file",
    "systems.files.path": "data",
}
KAFKA: dict[str, Any] = {
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9",
    "systems.kafka.connect.timeout.ms": 1000,
}
TYPO = "unknown key 'task.comit.ms'; did you mean 'task.commit.ms'?"
NOT_A_TASK = (
    "task.class: 'paritytasks:NotATask' is not a task: it must subclass samzapy.StreamTask or "
    "samzapy.AsyncStreamTask"
)
CONSUMER_TYPO = (
    r"systems\.kafka\.consumer\.fetch\.max\.wait\.mss is not an option of the Kafka consumer "
    r"\(AIOKafkaConsumer has no 'fetch\.max\.wait\.mss'\); did you mean "
    r"consumer\.fetch\.max\.wait\.ms or .*"
)

# case -> (the job file's keys, or None for no file; the problems, as regular expressions)
CASES: dict[str, tuple[dict[str, Any] | None, list[str]]] = {
    "misspelt kafka consumer and producer options": (
        {
            **BASE,
            **KAFKA,
            "systems.kafka.consumer.fetch.max.wait.mss": 100,
            "systems.kafka.producer.lingr.ms": 5,
        },
        [
            CONSUMER_TYPO,
            r"systems\.kafka\.producer\.lingr\.ms is not an option of the Kafka producer .*; "
            r"did you mean producer\.linger\.ms\?",
        ],
    ),
    "kafka options the client refuses only once built": (
        {
            **BASE,
            **KAFKA,
            "systems.kafka.consumer.isolation.level": "read_comitted",
            "systems.kafka.consumer.max.poll.records": 0,
            "systems.kafka.producer.acks": 1,
            "systems.kafka.producer.enable.idempotence": True,
        },
        [
            r"systems\.kafka\.consumer\.isolation\.level must be one of read_uncommitted, "
            r"read_committed, got 'read_comitted'",
            r"systems\.kafka\.consumer\.max\.poll\.records must be an integer >= 1, got 0",
            r"systems\.kafka\.producer\.acks must be all \(or -1\) when "
            r"producer\.enable\.idempotence is true, got 1: set one of them differently",
        ],
    ),
    "a consumer's own security protocol": (
        {**BASE, **KAFKA, "systems.kafka.consumer.security.protocol": "SSL"},
        [
            r"systems\.kafka\.consumer\.security\.protocol cannot be set: set the system's "
            r"security\.protocol, sasl\.\* and ssl\.\* keys instead"
        ],
    ),
    "a reporter listed twice": (
        {**BASE, "metrics.reporters": ["prometheus", "prometheus"], "metrics.prometheus.port": 0},
        [r"metrics\.reporters lists 'prometheus' twice: each reporter runs once, list it once"],
    ),
    "a kafka option samzapy manages, next to a misspelt key": (
        {**BASE, **KAFKA, "systems.kafka.consumer.group.id": "mine", "task.comit.ms": 5},
        [
            re.escape(TYPO),
            r"systems\.kafka\.consumer\.group\.id cannot be set: samzapy assigns partitions "
            r"itself and keeps offsets in its checkpoints",
        ],
    ),
    "bad task.class and another bad key": (
        {**BASE, "task.class": "paritytasks:NotATask", "task.comit.ms": 5},
        [re.escape(TYPO), re.escape(NOT_A_TASK)],
    ),
    "unknown key set to an unset variable's null default": (
        {**BASE, "task.comit.ms": f"${{{UNSET}:-null}}"},
        [re.escape(TYPO)],
    ),
    "misspelt kafka option set to an unset variable's null default": (
        {**BASE, **KAFKA, "systems.kafka.consumer.fetch.max.wait.mss": f"${{{UNSET}:-null}}"},
        [CONSUMER_TYPO],
    ),
    "bad app.class and another bad key": (
        {
            **{k: v for k, v in BASE.items() if k not in ("task.class", "task.inputs")},
            "app.class": "paritytasks:NotAnApp",
            "task.commit.ms": "soon",
        },
        [
            r"app\.class: 'paritytasks:NotAnApp' is not an application: it must subclass "
            r"samzapy\.StreamApplication or samzapy\.TaskApplication",
            re.escape("task.commit.ms must be an integer >= -1, got 'soon'"),
        ],
    ),
    "container id outside job.container.count": (
        {
            **BASE,
            "job.coordinator.factory": "static",
            "job.container.count": 2,
            "job.container.id": "7",
        },
        [r"job\.container\.id must be an integer from 0 to job\.container\.count - 1 \(1\), .*"],
    ),
    "a pod's name naming another container of a job of one": (
        {**BASE, "job.coordinator.factory": "static", "job.container.id": "samzapy-5"},
        [r"job\.container\.id must be an integer from 0 to job\.container\.count - 1 \(0\), .*"],
    ),
    "a checkpoint system beside file checkpoints": (
        {
            **BASE,
            "task.checkpoint.factory": "file",
            "task.checkpoint.dir": "checkpoints",
            "task.checkpoint.system": "files",
        },
        [
            r"task\.checkpoint\.system is set \('files'\), but task\.checkpoint\.factory is "
            r"'file', which keeps no checkpoint stream: .*; set one of those, or leave "
            r"task\.checkpoint\.system out"
        ],
    ),
    "a checkpoint directory with checkpoints off": (
        {**BASE, "task.checkpoint.dir": "checkpoints"},
        [
            r"task\.checkpoint\.dir is set \('checkpoints'\), but task\.checkpoint\.factory is "
            r"unset \(checkpoints are off\), which keeps no checkpoint files: "
            r"task\.checkpoint\.dir is only for task\.checkpoint\.factory file; set that, or "
            r"leave task\.checkpoint\.dir out"
        ],
    ),
    "missing file": (None, [r"job file 'job\.yaml' does not exist or is not a file"]),
}


def samzapy(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samzapy", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def job_dir(tmp_path: Path, keys: dict[str, Any] | None) -> Path:
    (tmp_path / "paritytasks.py").write_text(TASKS)
    (tmp_path / "data" / "in").mkdir(parents=True)
    (tmp_path / "data" / "in" / "0.jsonl").write_text('{"n": 1}\n')
    if keys is not None:
        (tmp_path / "job.yaml").write_text(json.dumps(keys))  # JSON is YAML
    return tmp_path


def environment(variable: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != UNSET}
    if variable is not None:
        env[UNSET] = variable
    return env


def run_problems(proc: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    (event,) = [e for e in lines if e["level"] == "error"]
    assert event["event"] == "config_invalid"
    assert event["exit_code"] == 2
    return list(event["problems"])


# Every case with the variable unset; those that read it, with it set too: a misspelt key is
# reported whatever its value.
RUNS = [(case, None) for case in CASES] + [
    (case, "5000") for case, (keys, _) in CASES.items() if f"${{{UNSET}" in json.dumps(keys)
]


@pytest.mark.parametrize(("case", "variable"), RUNS)
def test_validate_and_run_report_the_same_problems(
    tmp_path: Path, case: str, variable: str | None
) -> None:
    keys, expected = CASES[case]
    cwd, env = job_dir(tmp_path, keys), environment(variable)

    validate = samzapy(cwd, env, "validate", "job.yaml")
    run = samzapy(cwd, env, "run", "job.yaml")

    assert (validate.returncode, run.returncode) == (2, 2), validate.stderr + run.stdout
    assert validate.stdout == ""
    problems = validate.stderr.splitlines()
    assert run_problems(run) == problems
    assert len(problems) == len(expected), problems
    for pattern, problem in zip(expected, problems, strict=True):
        assert re.fullmatch(pattern, problem), problem


def test_a_good_file_passes_both(tmp_path: Path) -> None:
    cwd, env = job_dir(tmp_path, BASE), environment(None)

    validate = samzapy(cwd, env, "validate", "job.yaml")
    assert validate.returncode == 0, validate.stderr
    assert "task.class: paritytasks:Copy" in validate.stdout
    run = samzapy(cwd, env, "run", "job.yaml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "config_invalid" not in run.stdout


def test_a_good_kafka_system_is_checked_without_a_broker(tmp_path: Path) -> None:
    keys = {**BASE, **KAFKA, "systems.kafka.consumer.fetch.max.wait.ms": 100}
    validate = samzapy(job_dir(tmp_path, keys), environment(None), "validate", "job.yaml")
    assert validate.returncode == 0, validate.stderr
    assert "fetch.max.wait.ms: 100" in validate.stdout
