"""Static group membership on a real broker (``job.container.id`` under ``kafka-group``).

Containers of a word-totals job (each word's running total goes to the task's own partition
of an output, tagged with the container that counted it) run as static members while a
producer keeps writing:

- one killed with -9 and started again at once gets its tasks back well inside its 30 s
  session, and the other container never rebalances; its tasks restore from their
  snapshots, replaying nothing;
- a rolling restart of three containers (SIGTERM, start again, one after the other) moves no
  task, every word's totals are 1, 2, 3... each once, and each member keeps its local stores;
- a second process started with an id that is taken fences the first, which stops its tasks
  without committing and exits 1 (``member_fenced``); the two never run a task at once;
- one frozen (SIGSTOP) past its session, as a static member that does not come back: its
  tasks move to the other member only once the session is over, and woken, it is fenced
  (``member_fenced``, exit 1) without writing anything more.

Counts end exact every time.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, read_all, wait_for  # noqa: E402
from test_rebalance import RATE, Feeder, runs  # noqa: E402
from test_scale_out import PARTITIONS, job_file, placed_words, tasks_of  # noqa: E402
from test_state_jobs import changelog_state, checkpointed, zipf_words  # noqa: E402

pytestmark = pytest.mark.timeout(400)

SESSION_MS = 30_000


class Static:
    """One static member's job file per (container id, tag); the topics of the test."""

    def __init__(self, bootstrap: str, tmp_path: Path, session_ms: int = SESSION_MS) -> None:
        self.bootstrap, self.tmp_path, self.session_ms = bootstrap, tmp_path, session_ms
        self.source, self.totals = name("words"), name("totals")
        self.changelog = name("counts-changelog")
        asyncio.run(create_topic(bootstrap, self.source, PARTITIONS))
        asyncio.run(create_topic(bootstrap, self.totals, PARTITIONS))
        self.job_id = uuid.uuid4().hex[:8]
        self.files: list[Path] = []

    def file(self, n: int, tag: str) -> Path:
        """Container ``samzapy-<n>`` (its own state directory), tagging its output ``tag``."""
        path = job_file(self.tmp_path, self.bootstrap, self.source, self.changelog, self.job_id, n)
        cfg = json.loads(path.read_text())
        cfg.update(
            {
                "job.container.id": f"samzapy-{n}",
                "job.coordinator.session.timeout.ms": self.session_ms,
                "task.class": "state_jobs:TaggedTotals",
                "app.totals": f"kafka.{self.totals}",
                "app.container": tag,
                "task.commit.ms": 500,
            }
        )
        path.write_text(json.dumps(cfg))
        self.files.append(path)
        return path

    def start(self, n: int, tag: str) -> Job:
        return Job(self.file(n, tag), "unused", self.tmp_path / f"{tag}.log")

    def output(self) -> dict[int, list[tuple[int, str, str, int]]]:
        """Per output partition: (timestamp ms, tag, word, total) in order."""
        records: dict[int, list[tuple[int, str, str, int]]] = {p: [] for p in range(PARTITIONS)}
        for record in asyncio.run(read_all(self.bootstrap, self.totals)):
            total, tag = record.value.decode().split()
            records[record.partition].append(
                (record.timestamp, tag, record.key.decode(), int(total))
            )
        return records

    def finish(self, feeder: Feeder, jobs: list[Job]) -> list[str]:
        """Stop feeding, wait for every word to be checkpointed, stop ``jobs`` at once, check
        the counts; the words written."""
        words = feeder.finish()
        ends = {p: len(ws) - 1 for p, ws in placed_words(words).items() if ws}
        wait_for(
            lambda: checkpointed(self.bootstrap, self.files[0]) == ends, 120, "every word done"
        )
        for job in jobs:
            job.proc.terminate()
        assert [job.wait(60) for job in jobs] == [0] * len(jobs)
        assert changelog_state(self.bootstrap, self.changelog) == Counter(words)
        return words


def rebalances(job: Job) -> int:
    return sum(e["event"] == "rebalance_started" for e in job.events())


def first_output_at(records: dict[int, list[tuple[int, str, str, int]]], tag: str) -> float:
    return min(ts for rs in records.values() for ts, t, _, _ in rs if t == tag) / 1000


def test_a_static_member_killed_and_restarted_gets_its_tasks_back_without_a_rebalance(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    static = Static(kafka_bootstrap, tmp_path)
    feeder = Feeder(kafka_bootstrap, static.source, zipf_words(random.Random(3), RATE * 90))
    feeder.start()
    try:
        jobs = [static.start(0, "c0"), static.start(1, "c1")]
        wait_for(lambda: sorted(len(tasks_of(j)) for j in jobs) == [6, 6], 90, "two members")
        time.sleep(2)
        before = rebalances(jobs[0])
        held = tasks_of(jobs[1])
        time.sleep(random.uniform(0.2, 1.0))
        jobs[1].stop(signal.SIGKILL)
        restarted_at = time.time()
        jobs[1] = static.start(1, "c1-again")
        wait_for(lambda: tasks_of(jobs[1]) == held, 60, "the restarted member's tasks back")
        time.sleep(3)
        assert rebalances(jobs[0]) == before, "the other member rebalanced"
        assert set(tasks_of(jobs[0])) == {f"Partition {p}" for p in range(PARTITIONS)} - set(held)
        joined = [e for e in jobs[1].events() if e["event"] == "static_member_joined"]
        assert joined and joined[0]["fence_wait_ms"] > 0
    finally:
        words = static.finish(feeder, jobs)
    back = first_output_at(static.output(), "c1-again") - restarted_at
    assert 0 < back < SESSION_MS / 1000 / 2, f"the tasks came back {back:.1f} s after the restart"
    assert len(words) > 0
    # Its stores were still on its disk: each task opened the snapshot its checkpoint names
    # and replayed none of its changelog (docs/deploy.md, "Failover").
    restored = [e for e in jobs[1].events() if e["event"] == "store_restored"]
    assert sorted(e["task"] for e in restored) == sorted(held), restored
    for event in restored:
        assert event["snapshot"] is not None and event["records"] == 0, event


@pytest.mark.slow
def test_a_rolling_restart_of_three_static_members_moves_no_task(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    static = Static(kafka_bootstrap, tmp_path)
    feeder = Feeder(kafka_bootstrap, static.source, zipf_words(random.Random(4), RATE * 120))
    feeder.start()
    try:
        jobs = [static.start(n, f"c{n}") for n in range(3)]
        wait_for(lambda: sorted(len(tasks_of(j)) for j in jobs) == [4, 4, 4], 90, "three members")
        time.sleep(2)
        held = [tasks_of(j) for j in jobs]
        settled = [rebalances(j) for j in jobs]
        restarted = []
        for n in range(3):
            assert jobs[n].stop() == 0
            restarted.append(jobs[n])
            jobs[n] = static.start(n, f"c{n}-again")
            wait_for(lambda n=n: tasks_of(jobs[n]) == held[n], 60, f"member {n} back")
            time.sleep(1)
        time.sleep(2)
        assert [tasks_of(j) for j in jobs] == held
        for n in range(3):
            assert rebalances(jobs[n]) == 0, f"restarted member {n} rebalanced"
        assert [rebalances(j) for j in restarted] == settled, "a member rebalanced on the way"
    finally:
        words = static.finish(feeder, jobs)
    # Graceful stops committed everything they sent: every word's totals once, in order.
    by_word: dict[str, list[int]] = {}
    for records in static.output().values():
        for _, _, word, total in records:
            by_word.setdefault(word, []).append(total)
    assert by_word == {w: list(range(1, n + 1)) for w, n in Counter(words).items()}
    # Each restarted member kept its stores as its clean stop left them, replaying nothing
    # (docs/deploy.md, "Failover").
    for n in range(3):
        restored = [e for e in jobs[n].events() if e["event"] == "store_restored"]
        assert sorted(e["task"] for e in restored) == sorted(held[n]), restored
        for event in restored:
            assert event["kept_local"] is True and event["records"] == 0, event


def test_a_second_container_with_a_taken_id_fences_the_first(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    static = Static(kafka_bootstrap, tmp_path)
    feeder = Feeder(kafka_bootstrap, static.source, zipf_words(random.Random(5), RATE * 60))
    feeder.start()
    try:
        first = static.start(0, "first")
        wait_for(lambda: len(tasks_of(first)) == PARTITIONS, 90, "the first member's tasks")
        time.sleep(2)
        second = static.start(0, "second")
        assert first.wait(60) == 1
        fenced = [e for e in first.events() if e["event"] == "member_fenced"]
        assert fenced and fenced[0]["container_id"] == "samzapy-0"
        failed = [e for e in first.events() if e["event"] == "job_failed"]
        assert failed and "job.container.id='samzapy-0'" in failed[0]["error"]
        wait_for(lambda: len(tasks_of(second)) == PARTITIONS, 60, "the second member's tasks")
        time.sleep(2)
        assert rebalances(second) == 0
    finally:
        static.finish(feeder, [second])
    # One process at a time on every task: "first" then "second", never alternating.
    for p, records in static.output().items():
        assert runs([tag for _, tag, _, _ in records]) in (["first", "second"], ["first"]), p


# In the slow tier (make test-slow, which CI runs): the default suite fences a frozen member
# through test_exactly_once's container that stood still past its session.
@pytest.mark.slow
def test_a_static_member_frozen_past_its_session_loses_its_tasks_then_and_is_fenced(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Failover": a static member that does not come back keeps its tasks
    for the session, then they move; a static member whose session expired (its event loop
    stood still) stops its tasks without committing, logs ``member_fenced`` and exits 1."""
    session_s = 6.0
    static = Static(kafka_bootstrap, tmp_path, session_ms=int(session_s * 1000))
    feeder = Feeder(kafka_bootstrap, static.source, zipf_words(random.Random(6), RATE * 60))
    feeder.start()
    try:
        jobs = [static.start(0, "c0"), static.start(1, "frozen")]
        wait_for(lambda: sorted(len(tasks_of(j)) for j in jobs) == [6, 6], 90, "two members")
        time.sleep(2)
        jobs[1].proc.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            wait_for(lambda: len(tasks_of(jobs[0])) == PARTITIONS, 60, "the take-over")
            moved_s = time.monotonic() - frozen_at
            time.sleep(2)  # the survivor runs the frozen member's tasks a while
        finally:
            woken_at = time.time()
            jobs[1].proc.send_signal(signal.SIGCONT)
        assert jobs[1].wait(60) == 1, jobs[1].tail()
        events = jobs[1].events()
        fenced = [e for e in events if e["event"] == "member_fenced"]
        assert fenced and fenced[0]["container_id"] == "samzapy-1", jobs[1].tail()
        assert not any(e["event"] == "job_finished" for e in events)
    finally:
        words = static.finish(feeder, [jobs[0]])
    # Not replaced before the session was over, and soon after it.
    assert session_s - 1 < moved_s < session_s + 10, moved_s
    # Woken, the frozen member made nothing more (a batch already inside its Kafka client may
    # still have gone, created before the freeze); the survivor ran each task from then on,
    # and the counts are exact (finish checked the changelog's).
    output = static.output()
    late = [
        ts
        for rs in output.values()
        for ts, tag, _, _ in rs
        if tag == "frozen" and ts / 1000 >= woken_at
    ]
    assert not late, f"{len(late)} records made by the frozen member after it was woken"
    for p, records in output.items():
        assert runs([tag for _, tag, _, _ in records])[-1:] == ["c0"], p
    assert len(words) > 0
