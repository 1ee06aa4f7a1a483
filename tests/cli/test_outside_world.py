"""What only the commands that reach the outside world find out (docs/configuration.md, "Other
checks": "What needs the outside world is found only by `run`": an input stream that does
not exist, or a metrics port already in use; docs/deploy.md, "samzapy tail": "a system it
cannot reach (a broker down) exits 1, saying what failed")."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_run import events, job_yaml, samzapy, write_partitions


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 that another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_a_metrics_port_in_use_passes_validate_and_stops_run_with_exit_2(
    tmp_path: Path, taken_port: int
) -> None:
    """A port already in use fails the job at start with a configuration error: one
    ``config_invalid`` line naming ``metrics.prometheus.port``, exit 2, nothing read or
    written; ``validate``, which starts nothing, cannot see it."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(
        tmp_path,
        "Copy",
        **{"metrics.reporters": ["prometheus"], "metrics.prometheus.port": taken_port},
    )
    assert samzapy("validate", str(job)).returncode == 0
    proc = samzapy("run", str(job))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [invalid] = [e for e in events(proc.stdout) if e["event"] == "config_invalid"]
    [problem] = invalid["problems"]
    assert problem.startswith(
        f"metrics.prometheus.port: cannot serve Prometheus metrics on 127.0.0.1:{taken_port}"
    )
    assert "choose another port" in problem
    assert not (tmp_path / "checkpoints").exists()
    assert not (tmp_path / "data" / "out").exists()


def test_tail_of_a_kafka_system_it_cannot_reach_exits_1_saying_what_failed(
    tmp_path: Path, free_ports: Callable[[int], list[int]]
) -> None:
    """Nothing listens at the job's brokers: tail tries for the system's
    ``connect.timeout.ms``, then exits 1 (not 2: the job file is right) with one line on
    stderr that names the servers and the key that allows more time, and prints nothing."""
    [port] = free_ports(1)
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "tail-unreachable",
                "task.class": "jobs:Copy",
                "task.inputs": ["kafka.views"],
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": f"127.0.0.1:{port}",
                "systems.kafka.connect.timeout.ms": 1000,
            }
        )
    )
    proc = samzapy("tail", str(job), "views", timeout=60)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    [failed] = [line for line in proc.stderr.splitlines() if line.startswith("samzapy tail:")]
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in failed
    assert "systems.kafka.connect.timeout.ms, now 1000" in failed
    assert "Traceback" not in proc.stderr
