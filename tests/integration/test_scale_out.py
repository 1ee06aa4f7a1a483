"""Scale-out with Kafka's group protocol: several `samzapy run` processes share one job's tasks.

Three containers count words over a 12-partition input in a RocksDB store with a Kafka
changelog; one is killed with -9 half way, a fourth joins later. Tasks move between processes
at every rebalance (their stores restored from the changelog, their inputs resumed from the
checkpoint topic), and the final counts must still equal the input's exactly. A task that
comes back to a container it left restores from the copy it left there, replaying only the
changelog written since.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, wait_for  # noqa: E402
from test_state_jobs import (  # noqa: E402
    changelog_state,
    checkpointed,
    produce_words,
    state_job_file,
    zipf_words,
)

pytestmark = pytest.mark.timeout(600)

PARTITIONS = 12


def job_file(
    tmp_path: Path, bootstrap: str, source: str, changelog: str, job_id: str, n: int
) -> Path:
    """Container ``n``'s job file: the same job, its own state directory (its own host)."""
    return state_job_file(
        tmp_path,
        bootstrap,
        source,
        changelog,
        **{
            "job.name": "scale-it",
            "job.id": job_id,
            "job.logged.store.base.dir": str(tmp_path / f"state-{n}"),
            "job.coordinator.session.timeout.ms": 6000,
            "task.commit.ms": 300,
            "task.progress.interval.ms": 200,
        },
    )


def placed_words(words: list[str]) -> dict[int, list[str]]:
    partitioner = DefaultPartitioner()
    everyone = list(range(PARTITIONS))
    placed: dict[int, list[str]] = {p: [] for p in everyone}
    for word in words:
        placed[partitioner(word.encode(), everyone, everyone)].append(word)
    return placed


def tasks_of(job: Job) -> list[str]:
    """The tasks the container holds now, from its latest assignment event."""
    held: list[str] = []
    for event in job.events():
        if event["event"] in ("tasks_assigned", "rebalance_completed"):
            held = event["tasks"]
    return held


def test_three_containers_a_kill_and_a_fourth_keep_the_counts_exact(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(12)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    words = zipf_words(rng, 240_000)
    placed = placed_words(words)
    first_half = {p: ws[: len(ws) // 2] for p, ws in placed.items()}
    second_half = {p: ws[len(ws) // 2 :] for p, ws in placed.items()}
    asyncio.run(produce_words(kafka_bootstrap, source, first_half))
    job_id = uuid.uuid4().hex[:8]
    files = [job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n) for n in range(4)]
    jobs = [Job(files[n], "unused", tmp_path / f"c{n}.log") for n in range(3)]
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [4, 4, 4],
        90,
        "three containers with four tasks each",
    )
    all_tasks = sorted(t for j in jobs for t in tasks_of(j))
    assert all_tasks == sorted(f"Partition {k}" for k in range(PARTITIONS))
    # Kill one while it is busy; its tasks move to the other two.
    time.sleep(rng.uniform(0.5, 1.5))
    victim = jobs.pop(1)
    victim.stop(signal.SIGKILL)
    asyncio.run(produce_words(kafka_bootstrap, source, second_half))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [6, 6],
        90,
        "the survivors taking the killed container's tasks",
    )
    # A fourth container joins: three members, four tasks each again.
    jobs.append(Job(files[3], "unused", tmp_path / "c3.log"))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [4, 4, 4],
        90,
        "the fourth container taking its share",
    )
    ends = {p: len(ws) - 1 for p, ws in placed.items()}
    job = files[0]
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == ends, 180, "every word checkpointed")
    for j in jobs:
        assert j.stop() == 0
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    # Every rebalance was logged with the tasks that moved and the handover time.
    rebalances: list[dict[str, Any]] = [
        e for j in jobs for e in j.events() if e["event"] == "rebalance_completed"
    ]
    assert rebalances
    assert all(isinstance(e["handover_ms"], float) for e in rebalances)
    assert any(e["tasks_added"] for e in rebalances) and any(e["tasks_removed"] for e in rebalances)
    assert all(any(e["event"] == "rebalance_started" for e in j.events()) for j in jobs[:2])


def http_get(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_a_container_serves_metrics_health_and_readiness(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    words = zipf_words(random.Random(3), 20_000)
    asyncio.run(produce_words(kafka_bootstrap, source, placed_words(words)))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = job_file(tmp_path, kafka_bootstrap, source, changelog, uuid.uuid4().hex[:8], 0)
    cfg = json.loads(path.read_text())
    cfg.update({"metrics.reporters": ["prometheus"], "metrics.prometheus.port": port})
    path.write_text(json.dumps(cfg))
    job = Job(path, "unused", tmp_path / "metrics.log")
    wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "readiness", job.proc)
    assert http_get(port, "/healthz")[0] == 200
    ends = {p: len(ws) - 1 for p, ws in placed_words(words).items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, path) == ends, 90, "all checkpointed", job.proc)
    status, body = http_get(port, "/metrics")
    assert status == 200
    for metric in (
        "samzapy_partition_lag",
        "samzapy_task_checkpoint_age_seconds",
        "samzapy_task_process_latency_seconds",
        "samzapy_task_in_flight",
        "samzapy_task_restored_records",
        "samzapy_container_commit_latency_seconds",
        "samzapy_coordinator_rebalances",
    ):
        assert metric in body, metric
    lags = [line for line in body.splitlines() if line.startswith("samzapy_partition_lag{")]
    assert len(lags) == PARTITIONS and all(line.endswith(" 0.0") for line in lags)
    # The container alone in its group holds every task.
    assert f"samzapy_coordinator_tasks {float(PARTITIONS)}" in body.splitlines()
    assert job.stop() == 0


def test_a_task_that_comes_back_restores_from_the_copy_it_left_replaying_only_the_rest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Scaling out": a task's new owner restores its stores "from its
    changelog, or from the local copy it left there earlier". A task moves from the first
    container to a joining second (which, with no copy, replays its whole changelog), the
    second counts new words for it and leaves, and the task comes back to the first: its
    restore keeps the copy the first left at the move and replays only what the second wrote."""
    partitions, keys, more = 2, 10_000, 1_000
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, partitions))
    first = {p: [f"w{p}-{i:05d}" for i in range(keys)] for p in range(partitions)}
    asyncio.run(produce_words(kafka_bootstrap, source, first))
    job_id = uuid.uuid4().hex[:8]
    files = [job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n) for n in (0, 1)]
    old = Job(files[0], "unused", tmp_path / "c0.log")
    ends = {p: keys - 1 for p in range(partitions)}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 90, "the first pass", old.proc
    )
    new = Job(files[1], "unused", tmp_path / "c1.log")
    wait_for(lambda: [len(tasks_of(j)) for j in (old, new)] == [1, 1], 90, "the move", new.proc)
    (moved,) = tasks_of(new)
    # New words, each once: one changelog record each.
    second = {p: [f"x{p}-{i:05d}" for i in range(more)] for p in range(partitions)}
    asyncio.run(produce_words(kafka_bootstrap, source, second))
    ends = {p: keys + more - 1 for p in range(partitions)}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 90, "the second pass")
    assert new.stop() == 0
    wait_for(lambda: len(tasks_of(old)) == partitions, 60, "the move back", old.proc)
    assert old.stop() == 0
    words = [w for p in range(partitions) for w in first[p] + second[p]]
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)

    def restores(job: Job) -> list[dict[str, Any]]:
        return [e for e in job.events() if e["event"] == "store_restored" and e["task"] == moved]

    there = restores(new)
    assert len(there) == 1 and there[0]["kept_local"] is False, there
    assert there[0]["records"] == keys, there
    back = restores(old)[-1]
    assert back["kept_local"] is True, back
    assert back["records"] == more, back
