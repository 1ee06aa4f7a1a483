"""Only the systems a job uses are connected: a configured system no input, declared stream,
changelog or dead-letter stream is on is left alone at start-up, and connected by the first
send to it."""

from __future__ import annotations

import time
from pathlib import Path

from test_run import events, job_yaml, read_jsonl, samzapy, write_partitions


def test_a_configured_kafka_system_the_job_does_not_use_is_never_connected(
    tmp_path: Path,
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(20)]})
    job = job_yaml(
        tmp_path,
        "Copy",
        **{
            # Nothing listens there: connecting would retry for a minute, then fail the job.
            "systems.elsewhere.samza.factory": "kafka",
            "systems.elsewhere.bootstrap.servers": "127.0.0.1:1",
            "systems.elsewhere.connect.timeout.ms": 60_000,
        },
    )
    began = time.monotonic()
    proc = samzapy("run", str(job), timeout=50)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert time.monotonic() - began < 45  # generous: a connection attempt would take 60 s
    assert read_jsonl(tmp_path / "data" / "out" / "0.jsonl") == [{"n": i} for i in range(20)]
    logged = events(proc.stdout)
    assert not [e for e in logged if e["event"] in ("broker_unreachable", "system_connected")]
