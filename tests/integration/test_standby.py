"""Standby replicas on a real broker: a task's owner is killed with -9, the container holding
its standby takes it over with the store it kept warm, and the counts stay exact.

Two kafka-group containers (``samzapy run`` processes, each with a state directory of its own:
two hosts) count words over two partitions with ``job.standbytasks.replication.factor: 2``:
each runs one task and keeps a standby of the other. Each task's store holds 100,000 keys
before the kill. The owner of ``Partition 0`` is killed while it processes a second pass;
the survivor's restore of it must keep its local store (the promoted standby) and replay
only what the standby had not reached, and the final counts, read back from the changelog
(read committed), must equal the input's, under at-least-once and under exactly-once.

Also: a task moves to a joining container once its warmup standby there has caught up, and a
standby the assignment takes away is closed marked clean, its files kept.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from samzapy.api.system import TaskName
from samzapy.storage.restore import CLEAN_MARKER
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.storage.task_stores import task_directory_name

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, checkpointed, create_topic, name, wait_for  # noqa: E402
from test_scale_out import http_get, tasks_of  # noqa: E402
from test_state_jobs import STORE, changelog_state, produce_words, state_job_file  # noqa: E402

pytestmark = pytest.mark.timeout(240)

KEYS = 100_000


def job_file(
    tmp_path: Path, bootstrap: str, source: str, changelog: str, job_id: str, n: int, **extra: Any
) -> Path:
    return state_job_file(
        tmp_path,
        bootstrap,
        source,
        changelog,
        **{
            "job.name": "standby-it",
            "job.id": job_id,
            "job.logged.store.base.dir": str(tmp_path / f"state-{n}"),
            "job.coordinator.session.timeout.ms": 6000,
            "job.standbytasks.replication.factor": 2,
            "task.commit.ms": 300,
            "task.progress.interval.ms": 100,
            **extra,
        },
    )


def sample(port: int, name: str, labels: dict[str, str]) -> float | None:
    """The value of the sample ``name{labels}`` in the container's /metrics, None if absent."""
    status, text = http_get(port, "/metrics")
    assert status == 200, (status, text)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    return None


def readyz(port: int) -> dict[str, Any]:
    return dict(json.loads(http_get(port, "/readyz")[1]))


def caught_up(job: Job, task: str) -> bool:
    return any(
        e["event"] == "standby_caught_up" and e.get("task") == task and e.get("applied")
        for e in job.events()
    )


def processed(job: Job) -> int:
    """The messages the process processed since it started, from its latest ``progress``
    event."""
    counts = [e["processed"] for e in job.events() if e["event"] == "progress"]
    return counts[-1] if counts else 0


@pytest.mark.parametrize(
    ("guarantee", "hosts"),
    [
        # make test-slow: the default suite takes over under exactly-once, the stricter
        pytest.param("at-least-once", 2, id="at-least-once", marks=pytest.mark.slow),
        pytest.param("exactly-once", 2, id="exactly-once"),
        pytest.param("at-least-once", 1, id="one-state-directory", marks=pytest.mark.slow),
    ],
)
def test_a_standby_takes_over_a_killed_owners_task_with_exact_counts(
    kafka_bootstrap: str,
    tmp_path: Path,
    guarantee: str,
    hosts: int,
    free_ports: Callable[[int], list[int]],
) -> None:
    # hosts 1: both containers share one state directory (one host): a standby's copy lives
    # beside the active task's directory, never in it.
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    first = {p: [f"w{p}-{i:06d}" for i in range(KEYS)] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, first))
    job_id = uuid.uuid4().hex[:8]
    extra = {"task.processing.guarantee": guarantee, "metrics.reporters": ["prometheus"]}
    ports = free_ports(2)
    files = [
        job_file(
            tmp_path, kafka_bootstrap, source, changelog, job_id, n % hosts,
            **extra, **{"metrics.prometheus.port": ports[n]},
        )
        for n in (0, 1)
    ]  # fmt: skip
    jobs = [Job(files[0], "unused", tmp_path / "c0.log")]
    wait_for(lambda: len(tasks_of(jobs[0])) == 2, 60, "the first container", jobs[0].proc)
    jobs.append(Job(files[1], "unused", tmp_path / "c1.log"))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [1, 1], 60, "one task each", jobs[1].proc
    )
    eos = guarantee == "exactly-once"
    ends = {p: KEYS - 1 for p in (0, 1)}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, files[0], exactly_once=eos) == ends,
        90,
        "the first pass",
    )
    victim, survivor = (jobs[0], jobs[1]) if "Partition 0" in tasks_of(jobs[0]) else jobs[::-1]
    wait_for(lambda: caught_up(survivor, "Partition 0"), 60, "a warm standby", survivor.proc)
    # What an operator sees of the standby: its metrics and /readyz, at the checkpoint.
    port = ports[jobs.index(survivor)]
    labels = {"standby": "Partition 0/counts"}
    # The lag is to the latest checkpoint the standby has read, which may be one taken
    # during the first pass: wait for the one at its end.
    wait_for(
        lambda: (
            sample(port, "samzapy_standby_checkpoint_lag", labels) == 0
            and (sample(port, "samzapy_standby_records_applied_total", labels) or 0) >= KEYS
        ),
        60,
        "the standby's checkpoint lag at 0 at the first pass's end",
        survivor.proc,
    )
    assert sample(port, "samzapy_standby_changelog_lag", labels) is not None
    status = readyz(port)["standbys"]["Partition 0"]["counts"]
    assert status["checkpoint_lag"] == 0 and status["records_applied"] >= KEYS, status
    # A second pass over half the keys; the owner of Partition 0 dies in the middle of it.
    second = {p: first[p][: KEYS // 2] for p in (0, 1)}
    before = processed(victim)
    asyncio.run(produce_words(kafka_bootstrap, source, second))
    wait_for(lambda: processed(victim) >= before + KEYS // 4, 60, "the second pass", victim.proc)
    victim.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: len(tasks_of(survivor)) == 2, 60, "the takeover", survivor.proc)
    takeover_s = time.monotonic() - killed_at
    total = {p: KEYS + KEYS // 2 - 1 for p in (0, 1)}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, files[1], exactly_once=eos) == total,
        90,
        "every word counted",
    )
    assert survivor.stop() == 0
    words = [w for p in (0, 1) for w in first[p] + second[p]]
    assert changelog_state(kafka_bootstrap, changelog, committed=True) == Counter(words)
    # The takeover kept the promoted standby's store and replayed only its tail.
    events = survivor.events()
    # (Partition 1 came to it from its warmup standby too, when it joined.)
    promoted = [e["task"] for e in events if e["event"] == "standby_promoted"]
    assert promoted[-1] == "Partition 0", promoted
    restored = [e for e in events if e["event"] == "store_restored" and e["task"] == "Partition 0"]
    assert restored, "no restore of Partition 0 on the survivor"
    assert restored[-1]["kept_local"] is True, restored[-1]
    assert restored[-1]["records"] < KEYS // 2, restored[-1]
    print(json.dumps({"guarantee": guarantee, "takeover_s": round(takeover_s, 1), **restored[-1]}))


def test_a_task_moves_to_a_joining_container_once_its_standby_there_is_warm(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # KIP-441's warm first, move when caught up: the second container gets the task it will
    # run as a warmup standby first, and takes it over once that has caught up.
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    keys = KEYS // 2
    first = {p: [f"w{p}-{i:06d}" for i in range(keys)] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, first))
    job_id = uuid.uuid4().hex[:8]
    files = [job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n) for n in (0, 1)]
    old = Job(files[0], "unused", tmp_path / "c0.log")
    ends = {p: keys - 1 for p in (0, 1)}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 90, "the first pass", old.proc
    )
    new = Job(files[1], "unused", tmp_path / "c1.log")
    wait_for(lambda: len(tasks_of(new)) == 1, 90, "the move", new.proc)
    moved = tasks_of(new)[0]
    second = {p: first[p][: keys // 2] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, second))
    total = {p: keys + keys // 2 - 1 for p in (0, 1)}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == total, 90, "every word counted")
    assert new.stop() == 0 and old.stop() == 0
    words = [w for p in (0, 1) for w in first[p] + second[p]]
    assert changelog_state(kafka_bootstrap, changelog, committed=True) == Counter(words)
    events = new.events()
    order = [e["event"] for e in events]
    added = next(
        i
        for i, e in enumerate(events)
        if e["event"] == "rebalance_completed" and e["tasks_added"] == [moved]
    )
    assert "standby_warm" in order[:added], order
    restored = [e for e in events if e["event"] == "store_restored" and e["task"] == moved]
    assert restored[-1]["kept_local"] is True, restored[-1]
    assert restored[-1]["records"] < keys // 2, restored[-1]
    # The old owner ran both tasks until the move, and released the one that moved.
    released = [e for e in old.events() if e["event"] == "tasks_released"]
    assert [e["tasks"] for e in released] == [[moved]], released


def test_a_standby_the_assignment_drops_is_closed_marked_clean_with_its_files_kept(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Standby replicas": a standby the assignment drops is closed, marked
    clean, its files kept. Three partitions over two containers (each keeping a standby of
    the other's tasks); a third joins, and the balance takes standbys away from the first
    two (``standby_dropped``, reason ``assignment``): each dropped copy stays on disk, marked
    clean at the offset it had reached, holding every key of its task; one given back later
    goes on from that offset."""
    partitions, keys = 3, KEYS // 5
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, partitions))
    words = {p: [f"w{p}-{i:06d}" for i in range(keys)] for p in range(partitions)}
    asyncio.run(produce_words(kafka_bootstrap, source, words))
    job_id = uuid.uuid4().hex[:8]
    files = [job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n) for n in range(3)]
    jobs = [Job(files[0], "unused", tmp_path / "c0.log")]
    ends = {p: keys - 1 for p in range(partitions)}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 90, "the first pass", jobs[0].proc
    )
    jobs.append(Job(files[1], "unused", tmp_path / "c1.log"))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [1, 2], 90, "the second", jobs[1].proc
    )
    # Every standby at its checkpoint before the third joins, so that a drop has an offset.
    everything = {f"Partition {p}" for p in range(partitions)}
    wait_for(
        lambda: all(caught_up(j, t) for j in jobs for t in everything - set(tasks_of(j))),
        60,
        "warm standbys",
    )
    jobs.append(Job(files[2], "unused", tmp_path / "c2.log"))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [1, 1, 1], 90, "the third", jobs[2].proc
    )
    time.sleep(2)  # the standbys of the last assignment started
    # Stopped before a dropped copy is opened here: a running container could take it back
    # meanwhile (its RocksDB lock). A stop closes the standbys it still runs (reason
    # "stopping"), not the dropped ones, whose markers stay as the drop left them. All at
    # once: a container still running when another leaves takes over the tasks it left, and
    # moves a copy it dropped of one into place (its marker with it).
    for job in jobs:
        job.ask_to_stop()
    assert [j.stop() for j in jobs] == [0, 0, 0]
    kept = 0
    for n, job in enumerate(jobs[:2]):
        events = job.events()
        for i, drop in enumerate(events):
            if drop["event"] != "standby_dropped" or drop["reason"] != "assignment":
                continue
            task = drop["task"]
            assert drop["applied"] is not None, drop
            again = [
                e
                for e in events[i:]
                if e["event"] in ("standby_started", "standby_moved_into_place")
                and e["task"] == task
            ]
            if again and again[0]["event"] == "standby_started":
                # Given back since: it went on from the offset it had kept (the open took
                # its marker).
                assert again[0]["applied"] == drop["applied"], (drop, again[0])
                continue
            if again:  # the task came here since (a container the stops left running)
                continue
            partition = int(task.split()[-1])
            directory = task_directory_name(TaskName(task))
            copy = tmp_path / f"state-{n}" / "standby-it" / STORE / f"{directory}.standby"
            assert (copy / CLEAN_MARKER).read_text() == drop["applied"], (drop, n)
            engine = RocksDBStoreFactory().create(STORE, TaskName(task), copy, {})
            try:
                held = sorted(k.decode() for k, _ in engine.iterate(None, None))
            finally:
                engine.close()
            assert held == words[partition], (task, len(held))
            kept += 1
    assert kept, [e for j in jobs for e in j.events() if e["event"].startswith("standby_")]
