"""Applications of the high-level API (``app.class``) on the real broker, through `samzapy run`.

A bounded application must finish by itself with exactly its output. A word count that
repartitions its words through ``partition_by``'s intermediate stream and counts them in a
RocksDB store with a Kafka changelog must, under exactly-once, show a ``read_committed``
reader every word's running totals 1..n once each, however often it is killed with -9; under
at-least-once a kill may count some words twice downstream of the intermediate stream, but
never loses one.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from samzapy.control import (
    USER_MESSAGE,
    USER_MESSAGE_WITH_ORIGIN,
    EndOfStreamMessage,
    decode,
    encode_control,
    frame,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from app_jobs import BY_WORD, STORE  # noqa: E402
from test_exactly_once import assert_each_total_once, committed_totals  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpoint_entries,
    create_topic,
    kill_when,
    name,
    open_transaction,
    output_count,
    produce,
    read_all,
    wait_for,
)
from test_state_jobs import (  # noqa: E402
    PARTITIONS,
    changelog_state,
    end_offsets,
    has_processed,
    produce_words,
    zipf_words,
)

JOB_NAME = "app-it"


def app_job_file(tmp_path: Path, bootstrap: str, app: str, **extra: Any) -> Path:
    """The job file of application ``app`` (``module:Class``) on the broker: Kafka
    checkpoints every 200 ms, inputs from their oldest record, progress every 100 ms."""
    cfg = {
        "job.name": JOB_NAME,
        "job.id": uuid.uuid4().hex[:8],
        "app.class": app,
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 200,
        "task.progress.interval.ms": 100,
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        **extra,
    }
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(cfg))
    return path


def intermediate_topic(job: Path) -> str:
    """``<job.name>-<job.id>-partition_by-<op_id>``: WordTotals' intermediate stream."""
    cfg = json.loads(job.read_text())
    return f"{cfg['job.name']}-{cfg['job.id']}-partition_by-{BY_WORD}"


async def _partition_count(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        await consumer.stop()


def partition_count(bootstrap: str, topic: str) -> int:
    """The partitions ``topic`` has on the broker; 0 when it does not exist."""
    return asyncio.run(_partition_count(bootstrap, topic))


def plan(job: Path) -> dict[str, Any]:
    """`samzapy plan --format json` of the job file."""
    done = subprocess.run(
        [sys.executable, "-m", "samzapy", "plan", "--format", "json", str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


# -- a stateless application, bounded -------------------------------------------------------------


def test_a_bounded_application_maps_filters_and_sends_exactly_its_output_and_finishes(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(1)
    source, out = name("views"), name("mobile")
    asyncio.run(create_topic(kafka_bootstrap, source, 3))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    placed = {
        p: [
            {"p": p, "i": i, "device": rng.choice(["mobile", "desktop", "tablet"])}
            for i in range(3000)
        ]
        for p in range(3)
    }
    # A framed source, as samzapy.spark writes one: each partition's views, then the loader's
    # end-of-stream. The application ends when every partition has ended.
    items: list[tuple[int, bytes | None, bytes]] = []
    for p, views in placed.items():
        items.extend((p, None, frame(json.dumps(v).encode())) for v in views)
        items.append((p, None, encode_control(EndOfStreamMessage("loader", 1))))
    asyncio.run(produce(kafka_bootstrap, source, items))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:MobileViews",
        **{"app.views": source, "app.mobile": out},
    )
    run = Job(job, "unused", tmp_path / "run.log")
    assert run.wait(90) == 0, run.tail()
    got: dict[str, list[int]] = {}
    for record in asyncio.run(read_all(kafka_bootstrap, out)):
        got.setdefault(record.key.decode(), []).append(json.loads(record.value))
    # Every mobile view once, nothing else, each source partition's views in their order.
    assert got == {
        f"p{p}": [v["i"] for v in views if v["device"] == "mobile"] for p, views in placed.items()
    }
    started = [e for e in run.events() if e["event"] == "container_started"]
    assert started[0]["app_class"] == "app_jobs:MobileViews"
    assert len(started[0]["task_names"]) == 3
    finished = [e for e in run.events() if e["event"] == "job_finished"]
    assert finished[0]["processed"] == 9000


# -- a word count through partition_by, killed with -9 --------------------------------------------


def round_robin(words: list[str]) -> dict[int, list[str]]:
    """The words spread over the partitions regardless of their value: only the application's
    partition_by brings each word to one task."""
    return {p: words[p::PARTITIONS] for p in range(PARTITIONS)}


def intermediate_words(bootstrap: str, topic: str) -> Counter[str]:
    """The words of the intermediate stream as a read_committed reader sees them (control
    messages left out)."""
    words: Counter[str] = Counter()
    for record in asyncio.run(read_all(bootstrap, topic, committed=True)):
        kind, payload = decode(record.value)
        if kind in (USER_MESSAGE, USER_MESSAGE_WITH_ORIGIN):
            words[payload.decode()] += 1
    return words


def checkpoints(bootstrap: str, job: Path, *, exactly_once: bool) -> dict[tuple[str, int], int]:
    """The last checkpointed offset of every partition of every input, the intermediate stream
    included; with ``exactly_once``, of the transactional checkpoints, read committed."""
    return {
        (entry["stream"], entry["partition"]): int(entry["offset"])
        for entry in checkpoint_entries(bootstrap, job, exactly_once=exactly_once)
    }


def kill_after_a_commit(
    bootstrap: str,
    run: Job,
    job: Path,
    rng: random.Random,
    target: int,
    *,
    exactly_once: bool,
    ready: Callable[[], bool] | None = None,
) -> None:
    """SIGKILL ``run`` once it has processed ``target`` messages and committed at least once
    itself (so that the restart has a checkpoint of this run to resume from, and output
    after it to take back or write again): within 100 ms of noticing the commit, or, with
    ``ready``, at the first moment after it when ``ready`` holds of what the run has left on
    the broker, looked at while the run stands still (``kill_when``)."""
    before = checkpoints(bootstrap, job, exactly_once=exactly_once)
    wait_for(lambda: has_processed(run, target), 60, f"{target} messages", run.proc)
    wait_for(
        lambda: checkpoints(bootstrap, job, exactly_once=exactly_once) != before,
        60,
        "a commit of this run",
        run.proc,
    )
    if ready is not None:
        kill_when(run, ready, "the moment to kill")
        return
    time.sleep(rng.uniform(0, 0.1))
    assert run.proc.poll() is None, f"the run exited before its kill:\n{run.tail()}"
    run.stop(signal.SIGKILL)


def input_left(bootstrap: str, job: Path, *, exactly_once: bool) -> bool:
    """Whether the checkpoints leave input words still to process."""
    source = json.loads(job.read_text())["app.words"]
    done = checkpoints(bootstrap, job, exactly_once=exactly_once)
    return sum(o + 1 for (stream, _), o in done.items() if stream == source) < sum(
        asyncio.run(end_offsets(bootstrap, source)).values()
    )


def all_totals_committed(bootstrap: str, totals: str, counts: Counter[str]) -> bool:
    """Whether a read_committed reader sees at least n distinct totals of every word (n its
    count): whether the job is done, if it is right (the caller checks that)."""
    # Cheap first: the end offsets count every record written, committed or not.
    if output_count(bootstrap, totals) < sum(counts.values()):
        return False
    seen = committed_totals(bootstrap, totals)
    return all(len(set(seen.get(w, ()))) >= n for w, n in counts.items())


def word_totals_job(
    kafka_bootstrap: str, tmp_path: Path, seed: int, n: int, guarantee: str
) -> tuple[Path, list[str], str, str, random.Random]:
    """The input (``n`` words on PARTITIONS partitions), the totals topic and the job file of
    a WordTotals application under ``guarantee``.

    The producers send every 5 ms, exactly-once too (whose default is 100 ms): a kill just
    after a commit then finds writes of the open transaction on the broker, which the test
    needs to show they stay invisible (tests/integration/test_exactly_once.py kills jobs
    at the default)."""
    rng = random.Random(seed)
    source, changelog, totals = name("words"), name("counts-changelog"), name("totals")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, totals, PARTITIONS))
    words = zipf_words(rng, n)
    asyncio.run(produce_words(kafka_bootstrap, source, round_robin(words)))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:WordTotals",
        **{
            "app.words": source,
            "app.totals": totals,
            "task.processing.guarantee": guarantee,
            "systems.kafka.producer.linger.ms": 5,
            # A restart after a kill waits this long for the group to drop the dead member:
            # the broker's least (group.min.session.timeout.ms).
            "job.coordinator.session.timeout.ms": 6000,
            # At most about 10,000 words a second: an idle machine read them all within one
            # poll of the test's for a commit, leaving nothing to kill in the middle of.
            "app.pace.us": 50,
            f"stores.{STORE}.factory": "rocksdb",
            f"stores.{STORE}.key.serde": "string",
            f"stores.{STORE}.msg.serde": "long",
            f"stores.{STORE}.changelog": f"kafka.{changelog}",
        },
    )
    return job, words, changelog, totals, rng


@pytest.mark.slow  # 30 s; the window and table jobs' kill -9 tests cover the path by default
@pytest.mark.timeout(240)
def test_word_totals_through_partition_by_are_read_committed_exactly_once_across_kill_9s(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    n = 40_000
    job, words, changelog, totals, rng = word_totals_job(
        kafka_bootstrap, tmp_path, seed=21, n=n, guarantee="exactly-once"
    )
    intermediate = intermediate_topic(job)
    planned = plan(job)["intermediate_streams"]
    assert [(s["physical_name"], s["partitions"]) for s in planned] == [(intermediate, PARTITIONS)]
    uncommitted_seen = False
    kills = 2
    for run_number in range(kills + 1):
        run = Job(job, "unused", tmp_path / f"run-{run_number}.log")
        if run_number == kills:
            break
        # Of 2n messages: each word is processed from the input, then from the intermediate
        # stream.
        target = rng.randint(n // 20, n // 6)
        # Killed while a transaction holds totals, the run stood still to make sure: what the
        # test is about (a kill at a random moment may find the open transaction still empty,
        # and on a loaded machine twice).
        kill_after_a_commit(
            kafka_bootstrap,
            run,
            job,
            rng,
            target,
            exactly_once=True,
            ready=lambda: open_transaction(kafka_bootstrap, totals),
        )
        # Killed with work left: the input not all read, or its words not all counted (the
        # input stage may run ahead of the counting stage by the intermediate stream).
        assert input_left(kafka_bootstrap, job, exactly_once=True) or not all_totals_committed(
            kafka_bootstrap, totals, Counter(words)
        ), "finished before its kill"
        everything = asyncio.run(read_all(kafka_bootstrap, totals))
        committed = asyncio.run(read_all(kafka_bootstrap, totals, committed=True))
        uncommitted_seen = uncommitted_seen or len(everything) > len(committed)
    counts = Counter(words)
    wait_for(
        lambda: all_totals_committed(kafka_bootstrap, totals, counts),
        120,
        "every word's totals, read committed",
        run.proc,
    )
    assert run.stop() == 0, run.tail()
    # Read committed, the output holds every input once: each word's totals 1..n, once each.
    assert_each_total_once(committed_totals(kafka_bootstrap, totals), words)
    assert changelog_state(kafka_bootstrap, changelog) == counts
    # So does the intermediate stream, created at start-up with the input's partition count.
    assert partition_count(kafka_bootstrap, intermediate) == PARTITIONS
    assert intermediate_words(kafka_bootstrap, intermediate) == counts
    assert uncommitted_seen, "the kills left no uncommitted writes: the test proved nothing"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_word_totals_through_partition_by_are_exact_at_least_once_across_a_kill_9(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    n = 25_000
    job, words, changelog, totals, rng = word_totals_job(
        kafka_bootstrap, tmp_path, seed=22, n=n, guarantee="at-least-once"
    )
    source = json.loads(job.read_text())["app.words"]
    first = Job(job, "unused", tmp_path / "run-0.log")
    kill_after_a_commit(
        kafka_bootstrap, first, job, rng, rng.randint(n // 5, n // 2), exactly_once=False
    )
    assert input_left(kafka_bootstrap, job, exactly_once=False) or output_count(
        kafka_bootstrap, totals
    ) < len(words), "finished before its kill"
    second = Job(job, "unused", tmp_path / "run-1.log")
    counts = Counter(words)

    def finals() -> dict[str, int]:
        """Each word's last total in the output (the topic is partitioned by word, so a
        word's totals are in the order its task sent them)."""
        last: dict[str, int] = {}
        for record in asyncio.run(read_all(kafka_bootstrap, totals)):
            last[record.key.decode()] = int(record.value)
        return last

    intermediate = intermediate_topic(job)

    def caught_up() -> bool:
        """Whether the checkpoints reached the end of the input and of the intermediate
        stream (no transactions here: a partition's last record is at its end offset - 1)."""
        ends = {
            (stream, p): end - 1
            for stream in (source, intermediate)
            for p, end in asyncio.run(end_offsets(kafka_bootstrap, stream)).items()
        }
        return checkpoints(kafka_bootstrap, job, exactly_once=False) == ends

    wait_for(caught_up, 120, "checkpoints at the end of every partition", second.proc)
    assert second.stop() == 0, second.tail()
    # Exact under at-least-once too: what the intermediate stream holds twice (written again
    # after the kill) carries the same origin, and the counting stage drops the copy.
    last = finals()
    assert last == dict(counts)
    assert partition_count(kafka_bootstrap, intermediate) == PARTITIONS
    repartitioned = intermediate_words(kafka_bootstrap, intermediate)
    assert repartitioned >= counts
    assert changelog_state(kafka_bootstrap, changelog) == last


# -- event time through a broadcast ------------------------------------------------------------


def test_a_broadcast_carries_event_time_to_every_tasks_windows(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Each view's ``with_timestamp`` time goes through the broadcast stream's frames on the
    broker: both tasks count every view in the pane of its own time."""
    source, panes = name("views"), name("panes")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, panes, 2))
    times = {0: [1_000, 2_000, 12_000, 25_000], 1: [3_000, 14_000]}
    items: list[tuple[int, bytes | None, bytes]] = []
    for p, ts in times.items():
        items.extend((p, None, frame(json.dumps({"t": t}).encode())) for t in ts)
        items.append((p, None, encode_control(EndOfStreamMessage("loader", 1))))
    asyncio.run(produce(kafka_bootstrap, source, items))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:BroadcastCounts",
        **{"app.views": source, "app.panes": panes},
    )
    run = Job(job, "unused", tmp_path / "run.log")
    assert run.wait(90) == 0, run.tail()
    got = Counter(
        (record.key.decode(), record.value.decode())
        for record in asyncio.run(read_all(kafka_bootstrap, panes))
    )
    # one pane per 10 s from each of the two tasks, each of every view of its 10 s
    assert got == Counter({("0", "3"): 2, ("10000", "2"): 2, ("20000", "1"): 2})


def test_a_keyed_stream_broadcast_with_a_kvserde_reaches_every_task_as_kvs(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, seen = name("clicks"), name("seen")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, seen, 1))
    items: list[tuple[int, bytes | None, bytes]] = []
    for p in (0, 1):
        items.extend(
            (p, f"k{p}-{i}".encode(), frame(json.dumps({"p": p}).encode())) for i in range(3)
        )
        items.append((p, None, encode_control(EndOfStreamMessage("loader", 1))))
    asyncio.run(produce(kafka_bootstrap, source, items))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:KeyedBroadcast",
        **{"app.clicks": source, "app.seen": seen},
    )
    run = Job(job, "unused", tmp_path / "run.log")
    assert run.wait(90) == 0, run.tail()
    got = Counter(
        (record.key.decode(), record.value.decode())
        for record in asyncio.run(read_all(kafka_bootstrap, seen))
    )
    # each click once from each of the two tasks, with its key
    assert got == Counter({(f"k{p}-{i}", str(p)): 2 for p in (0, 1) for i in range(3)})
