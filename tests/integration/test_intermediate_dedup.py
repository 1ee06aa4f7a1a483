"""Exact counts through an intermediate stream under at-least-once, across kill -9s.

The job of issue 27, as a user builds it: stage 1 splits lines into words and sends each
word, keyed by itself, to an intermediate stream; stage 2 counts the words in a RocksDB store
with a Kafka changelog. Two containers share its tasks under the default ``kafka-group``
coordinator and the default guarantee (at-least-once), as a sync task and as an async task
with eight calls in flight (its sends interleave). Three times, a random container is
killed with SIGKILL at a random moment and started again. A killed stage 1 replays its lines
from its last checkpoint and writes their words again; stage 2 must count each word once.
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
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpoint_entries,
    create_topic,
    name,
    read_all,
    wait_for,
)
from test_state_jobs import changelog_state, end_offsets, zipf_words  # noqa: E402

from samzapy.control import (  # noqa: E402
    USER_MESSAGE_WITH_FLOOR,
    USER_MESSAGE_WITH_ORIGIN,
    decode,
)

pytestmark = pytest.mark.timeout(600)

PARTITIONS = 4
LINES = 24_000


def job_file(
    tmp_path: Path,
    bootstrap: str,
    source: str,
    words: str,
    changelog: str,
    job_id: str,
    n: int,
    task: dict[str, Any],
) -> Path:
    """Container ``n``'s job file: the same job, its own state directory (its own host)."""
    cfg: dict[str, Any] = {
        "job.name": "dedup-it",
        "job.id": job_id,
        "job.logged.store.base.dir": str(tmp_path / f"state-{n}"),
        "job.coordinator.session.timeout.ms": 6000,
        "task.inputs": [f"kafka.{source}", f"kafka.{words}"],
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 1000,
        "task.progress.interval.ms": 100,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "streams.words.samza.system": "kafka",
        "streams.words.samza.physical.name": words,
        "streams.words.samza.intermediate": True,
        "streams.words.partitions": PARTITIONS,
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.changelog": f"kafka.{changelog}",
        **task,
    }
    path = tmp_path / f"job-{n}.yaml"
    path.write_text(json.dumps(cfg))
    return path


async def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    await producer.start()
    try:
        partitioner = DefaultPartitioner()
        everyone = list(range(PARTITIONS))
        futures = [
            await producer.send(
                topic,
                line.encode(),
                partition=partitioner(str(i).encode(), everyone, everyone),
            )
            for i, line in enumerate(lines)
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def busy(job: Job, target: int) -> bool:
    """Whether ``job`` has processed ``target`` messages and was processing at its last
    progress report."""
    progress = [e for e in job.events() if e["event"] == "progress"]
    return bool(progress) and progress[-1]["processed"] >= target and progress[-1]["rate"] > 0


def positions(bootstrap: str, job: Path) -> dict[tuple[str, int], int]:
    """The last checkpointed offset of every input partition, by (stream, partition)."""
    return {
        (entry["stream"], entry["partition"]): int(entry["offset"])
        for entry in checkpoint_entries(bootstrap, job)
    }


@pytest.mark.parametrize(
    "task",
    [
        pytest.param({"task.class": "control_jobs:SplitAndCount"}, id="sync"),
        pytest.param(
            {"task.class": "control_jobs:AsyncSplitAndCount", "task.max.concurrency": 8},
            id="async-concurrency-8",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_two_containers_three_kill_9s_count_every_word_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, task: dict[str, Any]
) -> None:
    rng = random.Random(27)
    source, words_topic, changelog = name("lines"), name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    words = zipf_words(rng, LINES * 8)
    lines = [" ".join(words[i : i + 8]) for i in range(0, len(words), 8)]
    asyncio.run(produce_lines(kafka_bootstrap, source, lines))
    job_id = uuid.uuid4().hex[:8]
    files = [
        job_file(tmp_path, kafka_bootstrap, source, words_topic, changelog, job_id, n, task)
        for n in range(2)
    ]
    env = {"SAMZAPY_TEST_WORDS": words_topic}
    starts = [0, 0]

    def start(n: int) -> Job:
        starts[n] += 1
        return Job(files[n], "unused", tmp_path / f"c{n}-{starts[n]}.log", env=env)

    jobs = [start(0), start(1)]
    for kill in range(3):
        # Kill a random container while it is busy: once it has processed a few thousand
        # messages, at a random moment of a commit interval.
        victim = rng.randrange(2)
        target = rng.randint(2_000, 10_000)
        deadline = time.monotonic() + 180
        while not busy(jobs[victim], target):
            assert all(j.proc.poll() is None for j in jobs), "a container exited"
            assert time.monotonic() < deadline, f"kill {kill}: container {victim} is not busy"
            time.sleep(0.02)
        time.sleep(rng.uniform(0, 1.0))
        jobs[victim].stop(signal.SIGKILL)
        jobs[victim] = start(victim)

    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    assert sum(ends.values()) == LINES

    def drained() -> bool:
        done = positions(kafka_bootstrap, files[0])
        if any(done.get((source, p), -1) != ends[p] - 1 for p in range(PARTITIONS)):
            return False
        written = asyncio.run(end_offsets(kafka_bootstrap, words_topic))
        return all(done.get((words_topic, p), -1) == written[p] - 1 for p in range(PARTITIONS))

    wait_for(drained, 300, "every line and every word checkpointed", jobs[0].proc)
    for j in jobs:
        assert j.stop() == 0
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    # The kills made stage 1 write words again: the counts are exact because stage 2 dropped
    # them, not because there were none.
    written = [
        decode(record.value)
        for record in asyncio.run(read_all(kafka_bootstrap, words_topic))
        if record.value is not None
    ]
    tagged = [
        body
        for kind, body in written
        if kind in (USER_MESSAGE_WITH_ORIGIN, USER_MESSAGE_WITH_FLOOR)
    ]
    assert len(tagged) > len(words), (len(tagged), len(words))
    dropped = [
        event
        for log in sorted(tmp_path.glob("c*.log"))
        for line in log.read_text().splitlines()
        if line.startswith("{") and (event := json.loads(line))["event"] == "duplicates_dropped"
    ]
    assert sum(e["count"] for e in dropped) > 0
