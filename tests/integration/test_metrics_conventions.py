"""A real container's /metrics follows Prometheus' conventions, and its counters survive a
rebalance (tests/prometheus_conventions.py has the rules).

One `samzapy run` of a kafka-group job serves /metrics; a second container of the same job
joins, so the first gives up tasks (a rebalance); the first container's scrape after it must
still follow every rule, and every counter it exported before must not have gone down: a
counter is monotonic for the life of the process, which is what Prometheus' rate() assumes.
At SIGTERM the last `metrics_reported` event holds the tasks' metrics too.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from prometheus_conventions import problems  # noqa: E402
from test_kafka_jobs import Job, create_topic, job_file, name, output_count, produce, wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
        return text


def counters(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        if family.type == "counter"
        for s in family.samples
        if s.name.endswith("_total")
    }


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_metrics_follow_the_conventions_and_counters_survive_a_rebalance(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, out, PARTITIONS))
    items = [(i % PARTITIONS, None, str(i).encode()) for i in range(400)]
    asyncio.run(produce(kafka_bootstrap, source, items))
    job_id = uuid.uuid4().hex[:8]
    ports = [free_port(), free_port()]

    def config(n: int) -> Path:
        path = job_file(
            tmp_path,
            kafka_bootstrap,
            source,
            **{
                "job.id": job_id,
                "job.coordinator.factory": "kafka-group",
                "job.coordinator.session.timeout.ms": 6000,
                "metrics.reporters": ["log", "prometheus"],
                "metrics.prometheus.port": ports[n],
                "task.window.ms": 200,
            },
        )
        return path

    first = Job(config(0), out, tmp_path / "first.log")
    wait_for(lambda: ready(ports[0]), 90, "the first container's readiness", first.proc)
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 400, 90, "400 outputs", first.proc)
    before = scrape(ports[0])
    assert problems(before) == []

    second = Job(config(1), out, tmp_path / "second.log")
    wait_for(lambda: ready(ports[1]), 90, "the second container's readiness", second.proc)
    asyncio.run(produce(kafka_bootstrap, source, items))
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 800, 90, "800 outputs", first.proc)
    wait_for(
        lambda: any(e["event"] == "rebalance_completed" for e in first.events()),
        60,
        "the first container's second assignment",
        first.proc,
    )
    after = scrape(ports[0])
    assert problems(after) == []
    went_down = {
        key: (value, counters(after).get(key))
        for key, value in counters(before).items()
        if key[0].startswith("samzapy_container_") or key[0].startswith("samzapy_coordinator_")
        if counters(after).get(key, -1) < value
    }
    assert went_down == {}, "counters went down (or vanished) across the rebalance"
    assert counters(after)[("samzapy_coordinator_rebalances_total", ())] >= 1
    # The tasks it kept went on processing the second 400: the count moved on, from where it was.
    processed = ("samzapy_container_messages_processed_total", ())
    assert counters(after)[processed] > counters(before)[processed]

    assert second.stop() == 0
    assert first.stop() == 0
    reports: list[dict[str, Any]] = [
        e["metrics"] for e in first.events() if e["event"] == "metrics_reported"
    ]
    assert any(group.startswith("task.") for group in reports[-1]), json.dumps(reports[-1])
