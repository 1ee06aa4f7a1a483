"""End-of-stream and watermarks through intermediate streams on the real broker.

The source topic is framed, as ``samzapy.spark`` writes it: the lines, then an end-of-stream
from the one loader task on every partition. So each job here is bounded and must exit 0 by
itself once everything upstream of it has ended.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from samzapy.checkpoint.owner import is_typed_key
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.control import EndOfStreamMessage, WatermarkMessage, encode_control, frame

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, produce, read_all, wait_for  # noqa: E402

pytestmark = pytest.mark.timeout(400)

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "the",
    "dog",
    "sleeps",
]


def lines(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(n)]


def framed_source(placed: dict[int, list[str]], task: str = "loader") -> list[Any]:
    """Records of a framed source: each partition's lines, then the loader's end."""
    items: list[tuple[int, bytes | None, bytes]] = []
    for partition, texts in placed.items():
        items.extend((partition, None, frame(t.encode())) for t in texts)
        items.append((partition, None, encode_control(EndOfStreamMessage(task, 1))))
    return items


def run_job(cfg: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> Job:
    """`samzapy run` of ``cfg`` in the background, the test's topics in its environment."""
    tag = uuid.uuid4().hex[:6]
    path = tmp_path / f"job-{tag}.yaml"
    path.write_text(json.dumps(cfg))
    return Job(path, env.get("SAMZAPY_TEST_OUTPUT", "unused"), tmp_path / f"job-{tag}.log", env=env)


def config(bootstrap: str, job: str, inputs: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "job.name": job,
        "job.id": uuid.uuid4().hex[:8],
        "task.inputs": [f"kafka.{s}" for s in inputs],
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 300,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        **extra,
    }


def streams(source: str | None, words: str, changelog: str | None, tmp_path: Path) -> Any:
    cfg: dict[str, Any] = {
        "streams.words.samza.system": "kafka",
        "streams.words.samza.physical.name": words,
        "streams.words.samza.intermediate": True,
        "streams.words.partitions": 2,
    }
    if source is not None:
        cfg["streams.lines.samza.system"] = "kafka"
        cfg["streams.lines.samza.physical.name"] = source
        cfg["streams.lines.samza.framed"] = True
    if changelog is not None:
        cfg.update(
            {
                "stores.counts.factory": "rocksdb",
                "stores.counts.key.serde": "string",
                "stores.counts.msg.serde": "long",
                "stores.counts.changelog": f"kafka.{changelog}",
                "job.logged.store.base.dir": str(tmp_path / "state"),
            }
        )
    return cfg


def split_and_count(
    bootstrap: str, prefix: str, source: str, words: str, tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two jobs: ``<prefix>-split`` writes the words of ``source`` to the intermediate stream
    ``words``, ``<prefix>-count`` counts them in a store with a changelog."""
    split = config(
        bootstrap,
        f"{prefix}-split",
        [source],
        **{"task.class": "control_jobs:Split"},
        **streams(source, words, None, tmp_path),
    )
    count = config(
        bootstrap,
        f"{prefix}-count",
        [words],
        **{"task.class": "control_jobs:Count"},
        **streams(None, words, name("changelog"), tmp_path),
    )
    return split, count


def counts(bootstrap: str, topic: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for record in asyncio.run(read_all(bootstrap, topic)):
        entry = json.loads(record.value)
        assert entry["word"] not in total, f"{entry['word']} emitted twice"
        total[entry["word"]] = entry["n"]
    return total


def test_two_stages_in_one_job_finish_by_themselves(kafka_bootstrap: str, tmp_path: Path) -> None:
    source, words, out = name("lines"), name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, source, 3))
    placed = {p: lines(p, 300) for p in range(3)}
    asyncio.run(produce(kafka_bootstrap, source, framed_source(placed)))
    cfg = config(
        kafka_bootstrap,
        "wc-one",
        [source, words],
        **{"task.class": "control_jobs:SplitAndCount"},
        **streams(source, words, name("changelog"), tmp_path),
    )
    job = run_job(cfg, tmp_path, {"SAMZAPY_TEST_WORDS": words, "SAMZAPY_TEST_OUTPUT": out})
    assert job.wait() == 0, job.tail()
    expected = Counter(w for texts in placed.values() for t in texts for w in t.split())
    assert counts(kafka_bootstrap, out) == expected
    finished = [e for e in job.events() if e["event"] == "job_finished"]
    assert finished[0]["reason"] == "every input partition reached end-of-stream"


@pytest.mark.parametrize("downstream_first", [True, False])
def test_two_jobs_started_in_either_order_finish_with_exact_counts(
    kafka_bootstrap: str, tmp_path: Path, downstream_first: bool
) -> None:
    source, words, out = name("lines"), name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, source, 3))
    placed = {p: lines(10 + p, 300) for p in range(3)}
    asyncio.run(produce(kafka_bootstrap, source, framed_source(placed)))
    env = {"SAMZAPY_TEST_WORDS": words, "SAMZAPY_TEST_OUTPUT": out}
    split, count = split_and_count(kafka_bootstrap, "wc", source, words, tmp_path)
    first, second = (count, split) if downstream_first else (split, count)
    jobs = [run_job(first, tmp_path, env)]
    wait_for(lambda: any(e["event"] == "container_started" for e in jobs[0].events()), 60, "start")
    jobs.append(run_job(second, tmp_path, env))
    for job in jobs:
        assert job.wait() == 0, job.tail()
    expected = Counter(w for texts in placed.values() for t in texts for w in t.split())
    assert counts(kafka_bootstrap, out) == expected


def test_downstream_started_after_upstream_finished_reads_the_intermediate_from_oldest(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """No offset default configured anywhere but on the source: Kafka's default is upcoming,
    yet an intermediate stream starts at oldest (as in Samza), so the late reader finishes."""
    source, words, out = name("lines"), name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    placed = {p: lines(20 + p, 200) for p in range(2)}
    asyncio.run(produce(kafka_bootstrap, source, framed_source(placed)))
    env = {"SAMZAPY_TEST_WORDS": words, "SAMZAPY_TEST_OUTPUT": out}
    split, count = split_and_count(kafka_bootstrap, "wc-late", source, words, tmp_path)
    for cfg in (split, count):
        del cfg["systems.kafka.default.stream.samza.offset.default"]
    split["streams.lines.samza.offset.default"] = "oldest"
    upstream = run_job(split, tmp_path, env)
    assert upstream.wait() == 0, upstream.tail()
    downstream = run_job(count, tmp_path, env)
    assert downstream.wait(timeout=90) == 0, downstream.tail()
    expected = Counter(w for texts in placed.values() for t in texts for w in t.split())
    assert counts(kafka_bootstrap, out) == expected


def _control_checkpoints(bootstrap: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The last checkpoint of each task of the job, read from its checkpoint topic."""
    topic = checkpoint_stream_name(cfg["job.name"], cfg["job.id"])
    latest: dict[str, Any] = {}
    for record in asyncio.run(read_all(bootstrap, topic)):
        if not is_typed_key(record.key):  # the owner record is no task's
            latest[record.key.decode()] = json.loads(record.value)
    return latest


def _ended_upstream_tasks(checkpoints: dict[str, Any]) -> set[str]:
    """The upstream tasks every partition's checkpointed bookkeeping has seen end."""
    seen: list[set[str]] = []
    for value in checkpoints.values():
        partitions = _find(value, "partitions")
        for entry in (partitions or {}).values():
            seen.append(set(entry["eos"]["tasks"]))
    return set.intersection(*seen) if seen else set()


def _find(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        if key in value:
            return value[key]
        for v in value.values():
            found = _find(v, key)
            if found is not None:
                return found
    return None


@pytest.mark.slow
def test_downstream_killed_between_first_and_last_end_still_finishes_exactly(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    words, out = name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, words, 2))
    rng = random.Random(7)
    sent: Counter[str] = Counter()

    def upstream(task: str, n: int, end: bool) -> None:
        """Upstream task ``task`` (of 3) writes n words, then its end if ``end``."""
        items: list[tuple[int, bytes | None, bytes]] = []
        for _ in range(n):
            word = rng.choice(WORDS)
            sent[word] += 1
            # Keyed by word, as an upstream samzapy task would: one partition per word.
            items.append((WORDS.index(word) % 2, None, frame(word.encode())))
        if end:
            for p in range(2):
                items.append((p, None, encode_control(EndOfStreamMessage(task, 3))))
        asyncio.run(produce(kafka_bootstrap, words, items))

    cfg = config(
        kafka_bootstrap,
        "wc-kill",
        [words],
        **{"task.class": "control_jobs:Count"},
        **streams(None, words, name("changelog"), tmp_path),
    )
    env = {"SAMZAPY_TEST_OUTPUT": out}
    upstream("t0", 500, end=True)
    upstream("t1", 500, end=True)
    upstream("t2", 300, end=False)
    first = run_job(cfg, tmp_path, env)
    # Killed once its checkpoints hold the ends of t0 and t1 on both partitions.
    wait_for(
        lambda: _ended_upstream_tasks(_control_checkpoints(kafka_bootstrap, cfg)) == {"t0", "t1"},
        90,
        "checkpointed ends of t0 and t1",
        first.proc,
    )
    first.stop(signal.SIGKILL)
    # t1 restarts and sends its end again; t2 writes more, without its end.
    upstream("t1", 0, end=True)
    upstream("t2", 300, end=False)
    second = run_job(cfg, tmp_path, env)
    wait_for(
        lambda: any(e["event"] == "container_started" for e in second.events()),
        60,
        "the restart",
        second.proc,
    )
    with pytest.raises(subprocess.TimeoutExpired):
        second.proc.wait(5)  # two distinct ends of three: no end yet
    upstream("t2", 100, end=True)
    assert second.wait() == 0, second.tail()
    assert counts(kafka_bootstrap, out) == sent


def test_watermarks_reach_the_task_as_the_minimum_over_upstream_tasks(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    words, out = name("words"), name("watermarks")
    asyncio.run(create_topic(kafka_bootstrap, words, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    script = [
        ("t0", 10),
        ("t1", 20),
        ("t2", 30),
        ("t0", 25),
        ("t0", 5),
        ("t1", 40),
        ("t2", 60),
        ("t0", 50),
    ]
    items: list[tuple[int, bytes | None, bytes]] = [
        (0, None, encode_control(WatermarkMessage(task, 3, ts))) for task, ts in script
    ]
    items += [(0, None, encode_control(EndOfStreamMessage(t, 3))) for t in ("t0", "t1", "t2")]
    asyncio.run(produce(kafka_bootstrap, words, items))
    cfg = config(
        kafka_bootstrap,
        "wm",
        [words],
        **{"task.class": "control_jobs:WatermarkLog"},
        **streams(None, words, None, tmp_path),
    )
    job = run_job(cfg, tmp_path, {"SAMZAPY_TEST_OUTPUT": out})
    assert job.wait() == 0, job.tail()
    seen = [json.loads(r.value)["watermark"] for r in asyncio.run(read_all(kafka_bootstrap, out))]
    # ... then t0 and t1 end: a task that ended holds nothing back, t2's 60 alone remains
    assert seen == [10, 20, 25, 40, 60]


def test_a_bad_framed_record_fails_the_job_naming_partition_and_offset(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    words = name("words")
    asyncio.run(create_topic(kafka_bootstrap, words, 1))
    asyncio.run(produce(kafka_bootstrap, words, [(0, None, frame(b"ok")), (0, None, b"\x06x")]))
    cfg = config(
        kafka_bootstrap,
        "bad",
        [words],
        **{"task.class": "control_jobs:WatermarkLog"},
        **streams(None, words, None, tmp_path),
    )
    job = run_job(cfg, tmp_path, {"SAMZAPY_TEST_OUTPUT": name("unused")})
    assert job.wait() == 1
    failed = [e for e in job.events() if e["event"] == "task_failed"]
    assert len(failed) == 1
    assert f"offset 1 of kafka.{words}#0" in failed[0]["error"]
    assert "unknown type byte 6" in failed[0]["error"]
