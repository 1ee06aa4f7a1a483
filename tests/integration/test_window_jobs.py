"""An event-time window on the real broker, through `samzapy run`, killed with -9.

``WindowedWordCounts`` repartitions framed words (each with its event time, the loader's
watermarks in-band every WATERMARK_EVERY records) by word and counts them per word and per
tumbling window of event time, in the window's RocksDB store with its Kafka changelog. Under
exactly-once a read_committed reader must see each (word, window) pane exactly once, with
exactly the count of the input, however often the job is killed with -9 in the middle: panes
fire on the watermarks as the input goes by (not only at the end), the store's open windows
come back from the changelog, and a pane that fired before a checkpoint does not fire again.
Under at-least-once none is lost and each holds the exact count (one may appear twice).
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

from samzapy.control import EndOfStreamMessage, WatermarkMessage, encode_control, frame

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from app_jobs import PER_WINDOW, WINDOW_MS  # noqa: E402
from test_app_jobs import app_job_file, kill_after_a_commit, plan  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    create_topic,
    name,
    produce,
    read_all,
)
from test_state_jobs import PARTITIONS, zipf_words  # noqa: E402

#: Event time of the first record, and the step between two records of a partition.
T0 = 1_700_000_000_000
STEP_MS = 10
#: The loader sends a watermark (its latest event time less a second) after this many records.
WATERMARK_EVERY = 400


def load(bootstrap: str, topic: str, words: list[str]) -> Counter[str]:
    """Write ``words`` round robin over the partitions as framed JSON with event times and
    the loader's watermarks; returns the panes expected, ``word@pane_id`` -> count. The
    end-of-stream comes later (``end``): until then a run cannot finish before its kill,
    however fast it reads (a run has read 33,000 messages in 0.8 s here)."""
    items: list[tuple[int, bytes | None, bytes]] = []
    expected: Counter[str] = Counter()
    for p in range(PARTITIONS):
        mine = words[p::PARTITIONS]
        for i, word in enumerate(mine):
            t = T0 + i * STEP_MS
            items.append((p, None, frame(f'{{"w": "{word}", "t": {t}}}'.encode())))
            expected[f"{word}@{t - t % WINDOW_MS}"] += 1
            if (i + 1) % WATERMARK_EVERY == 0:
                watermark = WatermarkMessage("loader", 1, t - 1000)
                items.append((p, None, encode_control(watermark)))
    asyncio.run(produce(bootstrap, topic, items))
    return expected


def end(bootstrap: str, topic: str) -> None:
    """The loader's end-of-stream on every partition: the job's last run can finish."""
    end_of_stream = encode_control(EndOfStreamMessage("loader", 1))
    asyncio.run(produce(bootstrap, topic, [(p, None, end_of_stream) for p in range(PARTITIONS)]))


def panes(bootstrap: str, topic: str, *, committed: bool) -> list[tuple[str, int]]:
    return [
        (r.key.decode(), int(r.value.decode()))
        for r in asyncio.run(read_all(bootstrap, topic, committed=committed))
    ]


def window_job(
    kafka_bootstrap: str, tmp_path: Path, seed: int, n: int, guarantee: str
) -> tuple[Path, Counter[str], str, str, random.Random]:
    """The job file, the panes expected, the input and output topics, the test's random."""
    rng = random.Random(seed)
    source, out = name("timed-words"), name("panes")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, out, PARTITIONS))
    expected = load(kafka_bootstrap, source, zipf_words(rng, n))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:WindowedWordCounts",
        **{
            "app.words": source,
            "app.panes": out,
            "task.processing.guarantee": guarantee,
            "job.coordinator.session.timeout.ms": 6000,
            "app.pace.us": 50,  # as test_app_jobs' word_totals_job
        },
    )
    return job, expected, source, out, rng


@pytest.mark.timeout(240)
def test_event_time_panes_are_read_committed_exactly_once_across_kill_9s(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    n = 30_000
    job, expected, source, out, rng = window_job(kafka_bootstrap, tmp_path, 31, n, "exactly-once")
    window = next(o for o in plan(job)["operators"] if o["op_id"] == PER_WINDOW)
    assert window["kind"] == "window" and window["store"] == PER_WINDOW
    assert "event time" in window["window"] and f"interval {WINDOW_MS} ms" in window["window"]
    fired_before_the_end = False
    for run_number in range(3):
        if run_number == 2:
            end(kafka_bootstrap, source)
        run = Job(job, "unused", tmp_path / f"run-{run_number}.log")
        if run_number == 2:
            break
        # Of 2n messages: each word from the input, then from the intermediate stream.
        target = rng.randint(n // 4, n // 2) * (run_number + 1)
        kill_after_a_commit(kafka_bootstrap, run, job, rng, target, exactly_once=True)
        seen = panes(kafka_bootstrap, out, committed=True)
        assert len(seen) < len(expected), "finished before its kill"
        fired_before_the_end = fired_before_the_end or bool(seen)
    assert run.wait(120) == 0, run.tail()
    got = panes(kafka_bootstrap, out, committed=True)
    # Each pane once, with its exact count.
    assert Counter(key for key, _ in got) == Counter(set(expected))
    assert dict(got) == dict(expected)
    assert fired_before_the_end, "no pane fired before a kill: the watermarks closed nothing"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_event_time_panes_lose_nothing_at_least_once_across_a_kill_9(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    n = 20_000
    job, expected, source, out, rng = window_job(kafka_bootstrap, tmp_path, 32, n, "at-least-once")
    first = Job(job, "unused", tmp_path / "run-0.log")
    kill_after_a_commit(
        kafka_bootstrap, first, job, rng, rng.randint(n // 2, n), exactly_once=False
    )
    end(kafka_bootstrap, source)
    second = Job(job, "unused", tmp_path / "run-1.log")
    assert second.wait(120) == 0, second.tail()
    got = panes(kafka_bootstrap, out, committed=False)
    # Every pane, each with its exact count (a pane fired between the last checkpoint and the
    # kill fires again after the restart, with the same count).
    assert {key for key, _ in got} == set(expected)
    assert all(count == expected[key] for key, count in got)
