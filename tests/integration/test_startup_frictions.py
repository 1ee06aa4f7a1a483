"""Start-up as an operator meets it, through `samzapy run`: a missing input topic is a
configuration problem (exit 2 at once, ``input_missing`` saying how to create it); a broker
that does not answer is reported at once with the deadline and again every 10 s; SIGTERM or
Ctrl-C during that wait stops the process at once, with the exit of any stop; a session
timeout the broker refuses fails the job naming the key."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    create_topic,
    job_file,
    name,
    wait_for,
)


def events(run: Job) -> list[dict[str, Any]]:
    return run.events()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("coordinator", ["kafka-group", "static"])
def test_a_missing_input_topic_exits_2_at_once_saying_how_to_create_it(
    kafka_bootstrap: str, tmp_path: Path, coordinator: str
) -> None:
    source = name("absent")
    job = job_file(tmp_path, kafka_bootstrap, source, **{"job.coordinator.factory": coordinator})
    started = time.monotonic()
    run = Job(job, "out", tmp_path / "job.log")
    code = run.wait(30)
    took = time.monotonic() - started
    assert code == 2, run.tail()
    assert took < 5, f"took {took:.1f} s"
    [missing] = [e for e in events(run) if e["event"] == "input_missing"]
    assert missing["system"] == "kafka" and missing["stream"] == source
    assert f"--topic {source}" in missing["hint"] and kafka_bootstrap in missing["hint"]
    assert missing["exit_code"] == 2


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("coordinator", "sig", "remind"),
    [("kafka-group", signal.SIGTERM, True), ("static", signal.SIGINT, False)],
)
def test_an_unreachable_broker_is_reported_every_10_s_and_a_signal_stops_the_wait(
    tmp_path: Path, coordinator: str, sig: int, remind: bool
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    cfg = {
        "job.name": "unreachable",
        "job.id": uuid.uuid4().hex[:8],
        "task.class": "kafka_jobs:Tag",
        "task.inputs": ["kafka.in"],
        "job.coordinator.factory": coordinator,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": address,
        "systems.kafka.connect.timeout.ms": 60000,
    }
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(cfg))
    run = Job(job, "out", tmp_path / "job.log")
    awaited = "broker_still_unreachable" if remind else "broker_unreachable"
    wait_for(lambda: any(e["event"] == awaited for e in events(run)), 25, awaited, run.proc)
    seen = events(run)
    first = next(e for e in seen if e["event"] == "broker_unreachable")
    assert first["bootstrap_servers"] == address
    assert 50 <= first["gives_up_in_s"] <= 60
    if remind:  # every 10 s (the static case saves the wait: the same code says it)
        reminder = next(e for e in seen if e["event"] == "broker_still_unreachable")
        assert reminder["outage_s"] >= 9 and reminder["gives_up_in_s"] < first["gives_up_in_s"]
    asked = time.monotonic()
    run.proc.send_signal(sig)
    try:
        code = run.proc.wait(10)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        raise AssertionError(f"the signal did not stop the wait:\n{run.tail()}") from None
    run.handle.close()
    assert time.monotonic() - asked < 5
    assert code == 0, run.tail()
    last = events(run)[-1]
    assert last["event"] == "container_exited"
    assert last["stopped_by"] == signal.Signals(sig).name


@pytest.mark.timeout(90)
def test_a_session_timeout_the_broker_refuses_fails_the_job_naming_the_key(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``samzapy validate`` takes any timeout from 1 s (a broker's bounds are its own); the
    broker refuses a join below its ``group.min.session.timeout.ms`` (6 s by default): the job
    fails saying which key to change and to what."""
    source = name("in")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"job.coordinator.factory": "kafka-group", "job.coordinator.session.timeout.ms": 3000},
    )
    run = Job(job, "out", tmp_path / "job.log")
    assert run.wait(60) == 1, run.tail()
    failed = [e for e in events(run) if e["level"] == "error"]
    assert failed, run.tail()
    text = json.dumps(failed)
    assert "job.coordinator.session.timeout.ms 3000" in text, text
    assert "group.min.session.timeout.ms" in text, text
