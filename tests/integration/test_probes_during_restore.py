"""The probes while a container restores its stores, its local state deleted.

docs/deploy.md, "Health and the stall watchdog": "``GET /readyz`` answers 200 once every
assigned task is restored and running, and 503 before that"; ``GET /healthz`` "answers 200
while the event loop answers and no problem is recorded". And "Kubernetes": the startup and
liveness probes call ``/healthz`` (``deploy/statefulset.yaml``: a liveness timeout of 3 s),
the readiness probe ``/readyz``. So a restore is not a reason for the kubelet to restart the
pod: ``/healthz`` answers 200, and in time, throughout, while ``/readyz`` keeps the pod out of
its Service until the restore is over.

A word count's container counts 400,000 distinct words and stops; its state directory is
deleted (``rm -rf``, a new volume) and it starts again, replaying its whole changelog while a
thread polls both probes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, checkpointed, create_topic, name, wait_for  # noqa: E402
from test_scale_out import http_get  # noqa: E402
from test_state_jobs import changelog_state, produce_words, state_job_file  # noqa: E402

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]  # make test-slow

KEYS = 200_000
#: deploy/statefulset.yaml's livenessProbe timeoutSeconds.
LIVENESS_TIMEOUT_S = 3.0


class Prober(threading.Thread):
    """Polls /healthz and /readyz until stopped: (wall time, healthz status, its seconds,
    readyz status) per round."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.samples: list[tuple[float, int, float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            began = time.monotonic()
            health, _ = http_get(self.port, "/healthz")
            took = time.monotonic() - began
            ready, _ = http_get(self.port, "/readyz")
            self.samples.append((time.time(), health, took, ready))
            time.sleep(0.02)


def at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def test_a_restore_keeps_healthz_answering_and_readyz_at_503_until_it_is_over(
    kafka_bootstrap: str, tmp_path: Path, free_ports: Any
) -> None:
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    words = {p: [f"w{p}-{i:06d}" for i in range(KEYS)] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, words))
    (port,) = free_ports(1)
    path = state_job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        changelog,
        **{
            "job.id": uuid.uuid4().hex[:8],
            "job.coordinator.factory": "kafka-group",
            "metrics.reporters": ["prometheus"],
            "metrics.prometheus.port": port,
            "task.commit.ms": 1000,
        },
    )
    first = Job(path, "unused", tmp_path / "first.log")
    ends = {p: KEYS - 1 for p in (0, 1)}
    wait_for(lambda: checkpointed(kafka_bootstrap, path) == ends, 90, "every word", first.proc)
    assert first.stop() == 0
    state = Path(json.loads(path.read_text())["job.logged.store.base.dir"])
    assert state.is_dir()
    shutil.rmtree(state)
    again = Job(path, "unused", tmp_path / "again.log")
    prober = Prober(port)
    prober.start()
    try:
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 90, "readiness", again.proc)
        time.sleep(0.5)
    finally:
        prober.done.set()
        prober.join(10)
    events = again.events()
    restored = [e for e in events if e["event"] == "store_restored"]
    assert sorted(e["task"] for e in restored) == ["Partition 0", "Partition 1"], restored
    assert all(not e["kept_local"] and e["records"] == KEYS for e in restored), restored
    joining = at(next(e for e in events if e["event"] == "group_joining"))
    over = max(at(e) for e in restored)
    answered = [s for s in prober.samples if s[1]]
    assert answered, "the probes never answered"
    # /healthz: 200 in time, throughout, the restore included.
    assert all(health == 200 for _, health, _, _ in answered), answered
    slowest = max(took for _, _, took, _ in answered)
    assert slowest < LIVENESS_TIMEOUT_S, slowest
    # /readyz: 503 until the restore was over, then 200; the replays themselves included.
    replaying = [
        s for s in answered if any(at(e) - e["elapsed_s"] < s[0] < at(e) for e in restored)
    ]
    assert len(replaying) >= 2, f"{len(replaying)} samples during the replays: it proved nothing"
    during = [s for s in answered if joining < s[0] < over]
    assert all(ready == 503 for *_, ready in during), during
    assert not [s for s in answered if s[3] == 200 and s[0] < over], "ready before restored"
    assert answered[-1][3] == 200
    assert again.stop() == 0
    assert changelog_state(kafka_bootstrap, changelog) == Counter(
        w for ws in words.values() for w in ws
    )
