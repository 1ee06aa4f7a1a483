"""The metrics of a container whose tasks move (samzapy/container/gauges.py): "The ``container``
group's counts belong to the process ... so the counters only grow (what Prometheus' ``rate()``
assumes). A task's own group lives as long as the task stays in this process."

A first container counts words alone, a second joins and takes half the tasks, then leaves
(SIGTERM) and gives them back. At each step the first's ``/metrics`` has a series of each task
metric and each partition's lag for exactly the tasks it holds, no stale series of a task that
left, and its ``samzapy_container_messages_processed_total`` never goes back. Stopped, the
first logs one ``job_finished`` (README: it "sums up"), with the process's counts, though its
tasks ran in two SamzaContainers (shares) by then.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, wait_for  # noqa: E402
from test_scale_out import PARTITIONS, http_get, job_file, placed_words, tasks_of  # noqa: E402
from test_state_jobs import checkpointed, produce_words, zipf_words  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _series(body: str, metric: str, label: str) -> set[str]:
    """The values of ``label`` in the samples of ``metric``."""
    pattern = re.compile(rf'^{metric}{{{label}="([^"]*)"')
    return {m.group(1) for line in body.splitlines() if (m := pattern.match(line))}


def _processed(body: str) -> float:
    [line] = [
        x for x in body.splitlines() if x.startswith("samzapy_container_messages_processed_total ")
    ]
    return float(line.split()[-1])


def test_a_container_s_metrics_follow_its_tasks_and_its_counts_only_grow(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    words = zipf_words(random.Random(5), 6_000)
    placed = placed_words(words)
    asyncio.run(produce_words(kafka_bootstrap, source, placed))
    job_id = uuid.uuid4().hex[:8]
    port = _free_port()
    files = [job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n) for n in (0, 1)]
    cfg = json.loads(files[0].read_text())
    cfg.update({"metrics.reporters": ["log", "prometheus"], "metrics.prometheus.port": port})
    files[0].write_text(json.dumps(cfg))
    first = Job(files[0], "unused", tmp_path / "c0.log")
    ends = {p: len(ws) - 1 for p, ws in placed.items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 90, "all", first.proc)
    seen: list[float] = []

    def held_and_served() -> bool:
        """The first container's /metrics names exactly the tasks it holds (by its log)."""
        status, body = http_get(port, "/metrics")
        if status != 200:
            return False
        seen.append(_processed(body))
        tasks = set(tasks_of(first))
        partitions = {f"kafka.{source}#{t.split()[-1]}" for t in tasks}
        return (
            _series(body, "samzapy_task_messages_processed_total", "task") == tasks
            and _series(body, "samzapy_task_in_flight", "task") == tasks
            and _series(body, "samzapy_partition_lag", "partition") == partitions
        )

    wait_for(held_and_served, 30, "the first's metrics, alone", first.proc)
    assert len(tasks_of(first)) == PARTITIONS
    second = Job(files[1], "unused", tmp_path / "c1.log")
    try:
        wait_for(
            lambda: sorted(len(tasks_of(j)) for j in (first, second)) == [6, 6],
            90,
            "the join",
            second.proc,
        )
        more = zipf_words(random.Random(6), 3_000)
        asyncio.run(produce_words(kafka_bootstrap, source, placed_words(more)))
        wait_for(held_and_served, 30, "the first's metrics, with half its tasks", first.proc)
        assert len(tasks_of(first)) == PARTITIONS // 2
    finally:
        assert second.stop() == 0
    wait_for(lambda: len(tasks_of(first)) == PARTITIONS, 60, "the tasks back", first.proc)
    wait_for(held_and_served, 30, "the first's metrics, its tasks back", first.proc)
    assert first.stop() == 0
    assert seen == sorted(seen), "the container's messages-processed went back"
    assert seen[-1] >= len(words)  # its own first pass, at least
    [finished] = [e for e in first.events() if e["event"] == "job_finished"]
    final = [e for e in first.events() if e["event"] == "metrics_reported"][-1]["metrics"]
    assert finished["reason"] == "SIGTERM"
    assert finished["processed"] == final["container"]["messages-processed"] >= seen[-1]
    assert finished["commits"] == final["container"]["commits"]
    assert finished["checkpoints_written"] == final["container"]["checkpoints-written"]
