"""`samzapy run` against a Kafka port where nothing listens: aiokafka's own error lines come out
as ``library_log`` events (its logger, warning at most, its own level kept), never raw lines."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from test_run import samzapy

pytestmark = pytest.mark.timeout(120)


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kafka_job(tmp_path: Path, bootstrap: str) -> Path:
    cfg = {
        "job.name": "library-logs",
        "task.class": "jobs:Copy",
        "task.inputs": ["kafka.nowhere"],
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.connect.timeout.ms": 3000,
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(cfg))
    return path


def every_line_json(stdout: str) -> list[dict[str, Any]]:
    lines = stdout.splitlines()
    raw = [line for line in lines if not line.startswith("{")]
    assert raw == [], "raw lines in the log"
    return [json.loads(line) for line in lines]


def test_aiokafka_errors_are_library_log_warnings_with_their_logger(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    proc = samzapy("run", str(kafka_job(tmp_path, bootstrap)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == ""
    events = every_line_json(proc.stdout)
    names = [e["event"] for e in events]
    assert names[-1] == "job_failed"
    library = [e for e in events if e.get("logger", "samzapy").split(".")[0] != "samzapy"]
    assert library, "aiokafka logged nothing: the test shows nothing"
    assert {e["event"] for e in library} <= {"library_log", "library_log_suppressed"}
    first = library[0]
    assert first["event"] == "library_log"
    assert first["logger"].split(".")[0] == "aiokafka"
    assert (first["level"], first["library_level"]) == ("warning", "error")
    assert bootstrap in first["message"]
    # A dynamic member of the job's group (no job.container.id): <host>-<pid>.
    assert first["job"] == "library-logs"
    host, _, pid = first["container"].rpartition("-")
    assert host == socket.gethostname() and pid.isdigit(), first["container"]
    # The client's retries, one a few hundred ms, are one line and one count, not a line each.
    assert names.count("library_log") == 1, names
    reported = [e for e in library if e["event"] == "library_log_suppressed"]
    assert all(e["suppressed"] >= 1 and e["level"] == "warning" for e in reported)
    assert names.index("library_log_suppressed") < names.index("job_failed")


def test_at_log_level_error_a_healthy_jobs_library_lines_are_left_out(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    proc = samzapy("run", str(kafka_job(tmp_path, bootstrap)), "--log-level", "error")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert [e["event"] for e in every_line_json(proc.stdout)] == ["job_failed"]


def test_samzapy_tail_shows_them_as_console_lines_on_stderr(tmp_path: Path) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    job = kafka_job(tmp_path, bootstrap)
    proc = samzapy(
        "tail", str(job), "kafka.nowhere", "--set", "systems.kafka.connect.timeout.ms=2000"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout == ""
    *logged, last = proc.stderr.splitlines()
    assert last.startswith(f"samzapy tail: cannot reach Kafka at {bootstrap}")
    library = [line for line in logged if "[aiokafka" in line]
    assert library and "library_log " in library[0] and "library_level=error" in library[0]
    assert all("library_log" in line for line in library)
    assert all(" [warning  ] " in line for line in logged), logged
