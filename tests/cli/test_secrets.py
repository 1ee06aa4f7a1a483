"""Secrets never leave the process: a job with SASL settings fails, and its password is nowhere.

Each run goes through the real `samzapy` command, in both log formats (console with rich's
tracebacks when rich is installed) and through `samzapy validate`. The job's inputs are files;
its `secure` Kafka system carries the SASL settings, the password from the environment (and a
key the job declares secret in `job.redacted.keys`), so the resolved configuration, and with it
the password, sits in the local variables of the frames the failure's traceback passes
through; the failing task module also puts the password in its exception's message as it is
imported (a configuration error: exit 2, its traceback logged at debug level).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_run import events, job_yaml, samzapy, write_partitions

PASSWORD = "Hunter2-s3cret-Pa55"
TOKEN = "tok-9f8e7d6c5b4a"


def secure_job(tmp_path: Path, task: str) -> Path:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    return job_yaml(
        tmp_path,
        "unused",
        **{
            "task.class": task,
            "systems.secure.samza.factory": "kafka",
            "systems.secure.bootstrap.servers": "127.0.0.1:9",
            "systems.secure.security.protocol": "SASL_PLAINTEXT",
            "systems.secure.sasl.mechanism": "PLAIN",
            "systems.secure.sasl.plain.username": "samzapy",
            "systems.secure.sasl.plain.password": "${KAFKA_PASSWORD}",
            "app.api.token": TOKEN,
            "job.redacted.keys": ["app.api.token"],
        },
    )


def assert_no_secret(text: str) -> None:
    for secret in (PASSWORD, TOKEN):
        assert secret not in text
        assert json.dumps(secret)[1:-1] not in text


ENV = {"KAFKA_PASSWORD": PASSWORD}


@pytest.mark.parametrize("log_format", ["json", "console"])
def test_a_failing_job_with_sasl_settings_never_shows_its_password(
    tmp_path: Path, log_format: str
) -> None:
    job = secure_job(tmp_path, "failing_task:Task")
    done = samzapy("run", str(job), "--log-format", log_format, "--log-level", "debug", env=ENV)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "cannot log in as samzapy with '<redacted>'" in output
    assert "Traceback" in output or '"exc_info"' in output or '"exception"' in output, output
    assert_no_secret(output)
    # Tracebacks without their frames' local variables (rich's and structlog's show them).
    assert "resolved = " not in output and "'locals'" not in output and '"locals"' not in output
    if log_format == "json":
        assert len([e for e in events(done.stdout) if e["event"] == "config_invalid"]) == 1


def test_validate_prints_the_config_with_secrets_redacted(tmp_path: Path) -> None:
    job = secure_job(tmp_path, "jobs:Copy")
    done = samzapy("validate", str(job), env=ENV)
    assert done.returncode == 0, done.stderr
    assert_no_secret(done.stdout + done.stderr)
    assert "systems.secure.sasl.plain.password: <redacted>" in done.stdout
    assert "app.api.token: <redacted>" in done.stdout
    assert "systems.secure.sasl.plain.username: samzapy" in done.stdout


def test_validate_redacts_a_task_module_failure_naming_the_password(tmp_path: Path) -> None:
    done = samzapy("validate", str(secure_job(tmp_path, "failing_task:Task")), env=ENV)
    assert done.returncode == 2
    assert "cannot log in as samzapy with '<redacted>'" in done.stderr
    assert_no_secret(done.stdout + done.stderr)


def test_a_secret_of_the_wrong_type_is_not_repeated_in_the_error(tmp_path: Path) -> None:
    job = secure_job(tmp_path, "jobs:Copy")
    cfg = json.loads(job.read_text())
    cfg["systems.secure.sasl.plain.password"] = [PASSWORD]
    job.write_text(json.dumps(cfg))
    for args in (["validate", str(job)], ["run", str(job)]):
        done = samzapy(*args, env=ENV)
        assert done.returncode == 2
        output = done.stdout + done.stderr
        assert "systems.secure.sasl.plain.password must be a string, got a list" in output
        assert_no_secret(output)


def test_redacted_keys_given_as_one_comma_separated_string(tmp_path: Path) -> None:
    # A list-of-strings key takes one string of items separated by commas: so does this one
    # (the same patterns scrub the log lines, tests/unit/cli/test_logging.py).
    job = secure_job(tmp_path, "jobs:Copy")
    cfg = json.loads(job.read_text())
    cfg["job.redacted.keys"] = "app.other.*, app.api.token"
    job.write_text(json.dumps(cfg))
    done = samzapy("validate", str(job), env=ENV)
    assert done.returncode == 0, done.stderr
    assert_no_secret(done.stdout + done.stderr)
    assert "app.api.token: <redacted>" in done.stdout
