"""A task application (``app.class`` naming a TaskApplication) on the real broker, through
`samzapy run`: stopped, then restarted without its local state, it resumes after its
checkpoint with its table restored from the changelog, so each word's running counts go
1..n once each across the two runs, under either guarantee (exactly-once in the slow tier)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from task_app_jobs import TABLE  # noqa: E402
from test_app_jobs import app_job_file  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    create_topic,
    name,
    output_count,
    produce,
    read_all,
    wait_for,
)

WORDS = [f"w{i}" for i in range(6)]


def produce_words(bootstrap: str, topic: str, count: int, start: int) -> None:
    """``count`` words, each word always on one partition (WORDS' index mod 2)."""
    items = []
    for n in range(start, start + count):
        index = n * 7 % len(WORDS)
        items.append((index % 2, WORDS[index].encode(), WORDS[index].encode()))
    asyncio.run(produce(bootstrap, topic, items))


@pytest.mark.parametrize(
    "guarantee",
    ["at-least-once", pytest.param("exactly-once", marks=pytest.mark.slow)],
)
def test_a_task_application_restarts_from_its_checkpoint_and_its_changelog(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    source, out = name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    produce_words(kafka_bootstrap, source, 120, 0)
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "task_app_jobs:WordCounts",
        **{"app.words": source, "app.counts": out, "task.processing.guarantee": guarantee},
    )
    first = Job(job, "unused", tmp_path / "first.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 120, 60, "120 counts", first.proc)
    assert first.stop() == 0, first.tail()
    (started,) = [e for e in first.events() if e["event"] == "container_started"]
    assert (started["app_class"], started["task_class"]) == (
        "task_app_jobs:WordCounts",
        "task_app_jobs:WordCounter",
    )
    shutil.rmtree(tmp_path / "state")  # the restart restores the table from its changelog
    produce_words(kafka_bootstrap, source, 60, 120)
    second = Job(job, "unused", tmp_path / "second.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 180, 60, "180 counts", second.proc)
    assert second.stop() == 0, second.tail()
    counts: dict[str, list[int]] = {}
    committed = guarantee == "exactly-once"  # what a read_committed reader sees
    for record in asyncio.run(read_all(kafka_bootstrap, out, committed=committed)):
        counts.setdefault(record.key.decode(), []).append(json.loads(record.value))
    assert counts == {word: list(range(1, 31)) for word in WORDS}
    restored = [e for e in second.events() if e["event"] == "store_restored"]
    assert [e["store"] for e in restored] == [TABLE, TABLE]
    assert all(e["records"] >= 3 for e in restored)  # at least each of its 3 words' count
