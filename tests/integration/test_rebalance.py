"""Incremental rebalancing on a real broker: tasks that stay where they are never stop.

Three `samzapy run` containers of one job share a 12-partition input that a producer keeps
writing to; each message's running word total goes to the task's own partition of the output,
tagged with the container that counted it. A fourth container joins, then one of the first
three leaves (SIGTERM). Each rebalance moves only the tasks it must; the others keep producing
output while the moved ones are paused. Afterwards:

- every word's totals are 1, 2, 3... in order, each once, and the store's final counts equal
  the input's: nothing lost, nothing counted twice;
- on every output partition the containers' runs never interleave: a task ran in one
  container at a time;
- during each rebalance, every task that did not move has output inside the interval in which
  a moved task had none (its last output from its old owner to its first from its new one);
- the new owner's ``rebalance_completed`` says how long its tasks were paused.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, read_all, wait_for  # noqa: E402
from test_scale_out import PARTITIONS, job_file, placed_words, tasks_of  # noqa: E402
from test_state_jobs import changelog_state, checkpointed, zipf_words  # noqa: E402

pytestmark = pytest.mark.timeout(400)

RATE = 1500  # words per second


class Feeder(threading.Thread):
    """Writes words keyed by themselves, RATE a second, until stopped; keeps what it wrote."""

    def __init__(self, bootstrap: str, topic: str, words: list[str]) -> None:
        super().__init__(daemon=True)
        self._servers, self._topic, self._words = bootstrap, topic, words
        self.written: list[str] = []
        self._halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._feed())
        except BaseException as exc:
            self.error = exc

    async def _feed(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self._servers, linger_ms=5, acks="all")
        await producer.start()
        try:
            started, sent = time.monotonic(), 0
            while not self._halt.is_set() and sent < len(self._words):
                due = min(int((time.monotonic() - started) * RATE), len(self._words))
                futures = []
                for word in self._words[sent:due]:
                    data = word.encode()
                    futures.append(await producer.send(self._topic, data, key=data))
                await asyncio.gather(*futures)
                self.written.extend(self._words[sent:due])
                sent = due
                await asyncio.sleep(0.02)
        finally:
            await producer.stop()

    def finish(self) -> list[str]:
        self._halt.set()
        self.join(30)
        if self.error is not None:
            raise self.error
        return self.written


def shares(jobs: list[Job]) -> list[int]:
    return sorted(len(tasks_of(j)) for j in jobs)


def runs(tags: list[str]) -> list[str]:
    """The containers in order of their runs on one partition (consecutive repeats merged)."""
    out: list[str] = []
    for tag in tags:
        if not out or out[-1] != tag:
            out.append(tag)
    return out


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def owner_sequences(jobs: list[Job]) -> dict[int, list[str]]:
    """Each task's owners in the order they took it, from the logs of ``jobs`` (c0, c1...)."""
    taken = sorted(
        (_at(e), f"c{n}", int(t.split()[-1]))
        for n, j in enumerate(jobs)
        for e in j.events()
        if e["event"] in ("tasks_assigned", "rebalance_completed")
        for t in e["tasks_added"]
    )
    owners: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for _, container, p in taken:
        owners[p].append(container)
    return owners


def previous(owners: list[str], new: str) -> tuple[str, str]:
    """(the owner before ``new``, ``new``)."""
    return owners[owners.index(new) - 1], new


def quiet_windows(
    records: dict[int, list[tuple[int, str]]], moved: dict[int, tuple[str, str]]
) -> dict[int, tuple[int, int]]:
    """For each moved partition (old owner, new owner): the interval (ms) from its last
    output by the old owner to the output after it, the new owner's first."""
    windows = {}
    for p, (old, new) in moved.items():
        last = max(i for i, (_, tag) in enumerate(records[p]) if tag == old)
        assert records[p][last + 1][1] == new, (p, old, new)
        windows[p] = (records[p][last][0], records[p][last + 1][0])
    return windows


@pytest.mark.slow
def test_a_join_and_a_leave_pause_only_the_tasks_that_move(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, totals, changelog = name("words"), name("totals"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, totals, PARTITIONS))
    job_id = uuid.uuid4().hex[:8]
    files = []
    for n in range(4):
        path = job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n)
        cfg = json.loads(path.read_text())
        cfg.update(
            {
                "task.class": "state_jobs:TaggedTotals",
                "app.totals": f"kafka.{totals}",
                "app.container": f"c{n}",
                "task.commit.ms": 1000,
            }
        )
        path.write_text(json.dumps(cfg))
        files.append(path)
    feeder = Feeder(kafka_bootstrap, source, zipf_words(random.Random(21), RATE * 120))
    feeder.start()
    try:
        jobs = [Job(files[n], "unused", tmp_path / f"c{n}.log") for n in range(3)]
        wait_for(lambda: shares(jobs) == [4, 4, 4], 90, "three containers with four tasks")
        time.sleep(3)
        jobs.append(Job(files[3], "unused", tmp_path / "c3.log"))
        wait_for(lambda: shares(jobs) == [3, 3, 3, 3], 90, "the fourth taking its share")
        time.sleep(3)
        leaving = jobs.pop(1)
        left_at = time.time()
        assert leaving.stop() == 0
        wait_for(lambda: shares(jobs) == [4, 4, 4], 90, "the others taking the leaver's tasks")
        time.sleep(2)
    finally:
        words = feeder.finish()
    ends = {p: len(ws) - 1 for p, ws in placed_words(words).items() if ws}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 120, "every word done")
    ending = time.time()
    for job in jobs:  # all at once: no rebalance hands one's tasks to another on the way out
        job.proc.terminate()
    assert [job.wait(60) for job in jobs] == [0, 0, 0]
    jobs.insert(1, leaving)

    # Nothing lost, nothing counted twice: every word's totals are 1, 2, 3... in order.
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    by_word: dict[str, list[int]] = {}
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in range(PARTITIONS)}
    for record in asyncio.run(read_all(kafka_bootstrap, totals)):
        total, tag = record.value.decode().split()
        by_word.setdefault(record.key.decode(), []).append(int(total))
        records[record.partition].append((record.timestamp, tag))
    assert by_word == {w: list(range(1, n + 1)) for w, n in Counter(words).items()}

    # One container at a time per task: on every output partition the containers' runs follow
    # the task's owners as the logs record them (an owner that held it before any input came
    # has no run), never alternating.
    owners = owner_sequences(jobs)
    for p in range(PARTITIONS):
        tags = runs([tag for _, tag in records[p]])
        rest = iter(owners[p])
        assert all(tag in rest for tag in tags), (p, tags, owners[p])  # a subsequence
    # Only the tasks that had to move did: the newcomer's share at the join, the leaver's
    # tasks at the leave.
    joined_at = min(_at(e) for e in jobs[3].events())
    came = [
        (f"c{n}", int(t.split()[-1]))
        for n, j in enumerate(jobs)
        for e in j.events()
        if e["event"] in ("tasks_assigned", "rebalance_completed")
        if joined_at <= _at(e) < ending
        for t in e["tasks_added"]
    ]
    went = [int(t.split()[-1]) for t in tasks_of(leaving)]
    joined = {p: previous(owners[p], "c3") for c, p in came if c == "c3" and p not in went}
    left = {p: ("c1", owners[p][-1]) for c, p in came if p in went}
    assert len(joined) == 3 and sorted(left) == sorted(went) and len(came) == 6, came

    # The leaver listed nothing once it left (committed first), so its tasks went out in the
    # one rebalance its leave started (docs/deploy.md, Failover): each other member saw one.
    stayed = [j for j in jobs if j is not leaving]
    assert [
        sum(e["event"] == "rebalance_started" and left_at <= _at(e) < ending for e in j.events())
        for j in stayed
    ] == [1, 1, 1]

    # While a moved task was paused, every task that stayed put kept producing output.
    for moved in (joined, left):
        for p, (start, end) in quiet_windows(records, moved).items():
            assert end > start
            for kept in set(range(PARTITIONS)) - set(moved):
                inside = [ts for ts, _ in records[kept] if start < ts < end]
                assert inside, f"task {kept} stood still while task {p} moved ({start}-{end})"

    # The new owner says how long the tasks it took were paused (since their old owner
    # stopped them); the old owners kept their other three tasks.
    newcomer = [
        e for e in jobs[3].events() if e["event"] == "rebalance_completed" and e["tasks_added"]
    ]
    paused = newcomer[0]["paused_ms"]
    assert set(paused) == {f"Partition {p}" for p in joined}
    assert all(ms > 0 for ms in paused.values())
    given: list[dict[str, Any]] = [
        e
        for j in jobs[:3]
        for e in j.events()
        if e["event"] == "rebalance_completed" and e["tasks_removed"] and _at(e) >= joined_at
    ]
    assert len(given) == 3 and all(len(e["tasks_kept"]) == 3 for e in given)
