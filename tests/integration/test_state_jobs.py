"""Stateful jobs over a real Kafka broker: exact counts across kill -9, restores, store errors.

A word count keeps its counts in a RocksDB store with a Kafka changelog. Transactional state
(Samza 1.x) promises that after any crash the store holds exactly its state as of the last
checkpoint and the inputs resume right after the checkpointed offsets, so the final counts
equal the input's, with no loss and no double count. The store's state is read back from its
changelog: a compacted topic, the last record per key is the key's value.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import string
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from samzapy.api.system import TaskName
from samzapy.checkpoint.owner import is_typed_key
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.checkpoint.transactional import SUFFIX as TRANSACTIONAL_SUFFIX
from samzapy.storage.restore import CLEAN_MARKER
from samzapy.storage.task_stores import task_directory_name

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    kill_when,
    name,
    output_count,
    read_all,
    wait_for,
)

JOB_NAME = "state-it"
STORE = "counts"
PARTITIONS = 4
VOCABULARY = 2000
# A few words beyond ASCII: keys are UTF-8 in the store and in the changelog.
UNICODE_WORDS = ("café", "naïve", "straße", "日本", "ünïcödé")


# -- inputs ---------------------------------------------------------------------------------------


def zipf_words(rng: random.Random, n: int) -> list[str]:
    """``n`` words drawn from a vocabulary of VOCABULARY words, the i-th with weight 1/(i+1)."""
    vocabulary: set[str] = set(UNICODE_WORDS)
    while len(vocabulary) < VOCABULARY:
        vocabulary.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10))))
    ordered = sorted(vocabulary)
    rng.shuffle(ordered)
    weights = [1 / (i + 1) for i in range(len(ordered))]
    return rng.choices(ordered, weights=weights, k=n)


def by_partition(words: list[str]) -> dict[int, list[str]]:
    """The words of each partition in order, placed as Kafka's default partitioner (murmur2)
    places a record keyed by the word's UTF-8 bytes."""
    partitioner = DefaultPartitioner()
    all_partitions = list(range(PARTITIONS))
    placed: dict[int, list[str]] = {p: [] for p in all_partitions}
    for word in words:
        placed[partitioner(word.encode(), all_partitions, all_partitions)].append(word)
    return placed


async def produce_words(bootstrap: str, topic: str, placed: dict[int, list[str]]) -> None:
    """Each word as a record keyed and valued by its UTF-8 bytes, in order per partition."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks="all")
    await producer.start()
    try:
        futures = []
        for partition, words in placed.items():
            batch = producer.create_batch()
            for word in words:
                data = word.encode()
                if batch.append(key=data, value=data, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=partition))
                    batch = producer.create_batch()
                    batch.append(key=data, value=data, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: offset for tp, offset in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


# -- the job and what it leaves behind ------------------------------------------------------------


def state_job_file(
    tmp_path: Path,
    bootstrap: str,
    source: str,
    changelog: str,
    task: str = "state_jobs:WordCount",
    **extra: Any,
) -> Path:
    cfg = {
        "job.name": JOB_NAME,
        "job.id": uuid.uuid4().hex[:8],
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.class": task,
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 200,
        "task.progress.interval.ms": 100,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        f"stores.{STORE}.factory": "rocksdb",
        f"stores.{STORE}.key.serde": "string",
        f"stores.{STORE}.msg.serde": "long",
        f"stores.{STORE}.changelog": f"kafka.{changelog}",
        **extra,
    }
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(cfg))
    return path


def store_dir(tmp_path: Path) -> Path:
    """``<job.logged.store.base.dir>/<job.name>/<store>``: every task's directory of the store."""
    return tmp_path / "state" / JOB_NAME / STORE


def processed(run: Job) -> int:
    """Messages this process has processed so far, from its latest ``progress`` event."""
    counts = [e["processed"] for e in run.events() if e["event"] == "progress"]
    return max(counts, default=0)


def has_processed(run: Job, count: int) -> bool:
    return processed(run) >= count


def has_checkpointed(run: Job) -> bool:
    return any(e["event"] == "checkpoint_written" for e in run.events())


def changelog_state(bootstrap: str, changelog: str, *, committed: bool = False) -> dict[str, int]:
    """The store's state as its changelog holds it: the last record per key, tombstones
    deleting; keys UTF-8 (string serde), values 8-byte big-endian signed (long serde).
    ``committed``: of committed transactions only (exactly-once)."""
    state: dict[str, int] = {}
    for record in asyncio.run(read_all(bootstrap, changelog, committed=committed)):
        key = record.key.decode()
        if record.value is None:
            state.pop(key, None)
        else:
            (state[key],) = struct.unpack(">q", record.value)
    return state


def counts_at(placed: dict[int, list[str]], offsets: dict[int, int]) -> Counter[str]:
    """The word counts of every input up to and including ``offsets`` (last processed)."""
    counts: Counter[str] = Counter()
    for partition, words in placed.items():
        counts.update(words[: offsets.get(partition, -1) + 1])
    return counts


# -- exact counts across kill -9 ------------------------------------------------------------------


def kill_while_working(
    run: Job,
    rng: random.Random,
    target: int,
    run_number: int,
    *,
    checkpoint: bool = False,
    left: Callable[[], bool] | None = None,
) -> None:
    """SIGKILL ``run`` a random moment after it has processed ``target`` messages (and, with
    ``checkpoint``, written a checkpoint: ``run`` logs at debug level then); with ``left``,
    the first moment after that when ``left`` holds of what it has left on the broker (an
    open transaction, changelog records past the checkpoint), looked at while the run
    stands still (``kill_when``): a random moment may find none, and on a loaded machine
    at every kill of a test.

    The job's progress is read every 20 ms and the kill comes within one progress interval
    (100 ms) of the count: a job processes 100,000 messages or more a second, so waiting
    longer would let it reach the end of its input first."""
    deadline = time.monotonic() + 120
    while not has_processed(run, target) or (checkpoint and not has_checkpointed(run)):
        assert run.proc.poll() is None, f"run {run_number} exited before {target} messages"
        assert time.monotonic() < deadline, f"run {run_number} did not process {target}"
        time.sleep(0.02)
    if left is not None:
        kill_when(run, left, f"the moment to kill run {run_number}")
        return
    time.sleep(rng.uniform(0, 0.1))
    assert run.proc.poll() is None, f"run {run_number} exited before its kill"
    run.stop(signal.SIGKILL)


def count_words_through_kills(
    bootstrap: str,
    tmp_path: Path,
    *,
    seed: int,
    n: int,
    kills: int,
    wipe_before: int | None,
    store_options: dict[str, Any] | None = None,
) -> None:
    """Counts ``n`` words, killing the job with SIGKILL ``kills`` times at random points and
    restarting it each time (deleting the local store directory before restart number
    ``wipe_before``, 1-based, and with the store's ``store_options``); the final counts must
    equal the input's exactly."""
    rng = random.Random(seed)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(bootstrap, source, PARTITIONS))
    words = zipf_words(rng, n)
    placed = by_partition(words)
    asyncio.run(produce_words(bootstrap, source, placed))
    ends = asyncio.run(end_offsets(bootstrap, source))
    assert ends == {p: len(placed[p]) for p in range(PARTITIONS)}
    options = {f"stores.{STORE}.{k}": v for k, v in (store_options or {}).items()}
    job = state_job_file(tmp_path, bootstrap, source, changelog, **options)
    ahead_of_checkpoint = []

    def ahead() -> bool:
        """Whether the changelog holds records past the checkpoint (for the restart to drop)."""
        done = checkpointed(bootstrap, job)
        return changelog_state(bootstrap, changelog) != counts_at(placed, done)

    # Each write sent as it happens: every kill is to leave changelog records beyond the
    # checkpoint. (By default the writes wait for the commit, and a kill leaves none unless
    # more than the buffer's bound waited.)
    sends_each_write = (store_options or {}).get("write.buffer.max.bytes") == 0
    runs: list[Job] = []
    for run_number in range(kills + 1):
        if run_number == wipe_before:
            assert store_dir(tmp_path).is_dir(), "the store has no local directory to delete"
            shutil.rmtree(tmp_path / "state")
        # The run before the wipe is killed after a checkpoint, so that the restore after the
        # wipe has changelog records to read (two runs killed before their first commit, 200 ms
        # in, would leave none: it happened in CI).
        before_wipe = wipe_before is not None and run_number == wipe_before - 1
        debug = [sys.executable, "-m", "samzapy", "run", "--log-level", "debug"]
        log = tmp_path / f"run-{run_number}.log"
        run = Job(job, "unused", log, command=debug if before_wipe else None)
        runs.append(run)
        if run_number == kills:
            break
        # Each run processes at most about n/6 messages before its kill, so that none of them
        # reaches the end of the input first.
        target = rng.randint(n // 20, n // 6)
        kill_while_working(
            run,
            rng,
            target,
            run_number,
            checkpoint=before_wipe,
            left=ahead if sends_each_write else None,
        )
        done = checkpointed(bootstrap, job)
        assert sum(done.values()) + len(done) < n, f"run {run_number} finished before its kill"
        ahead_of_checkpoint.append(ahead())

    last_offsets = {p: end - 1 for p, end in ends.items()}
    wait_for(
        lambda: checkpointed(bootstrap, job) == last_offsets,
        120,
        "a checkpoint at the end of every input partition",
        run.proc,
    )
    assert run.stop() == 0
    assert changelog_state(bootstrap, changelog) == Counter(words)
    # Each write sent as it happens, every kill left changelog records beyond the checkpoint:
    # the restarts had to drop them.
    if sends_each_write:
        assert all(ahead_of_checkpoint), (
            f"a kill left the changelog at its checkpoint: {ahead_of_checkpoint}"
        )
    if wipe_before is not None:
        # Everything the store held came back from the changelog.
        restored = [e for e in runs[wipe_before].events() if e["event"] == "store_restored"]
        assert len(restored) == PARTITIONS
        assert sum(e["records"] for e in restored) > 0


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_word_count_is_exact_across_three_kill_9s(kafka_bootstrap: str, tmp_path: Path) -> None:
    count_words_through_kills(
        kafka_bootstrap, tmp_path, seed=4, n=200_000, kills=3, wipe_before=None
    )


@pytest.mark.timeout(240)
def test_word_count_with_a_read_cache_and_a_small_buffer_is_exact_across_kill_9s(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # A read cache smaller than a task's vocabulary (about 500 words), and a write buffer of
    # 100 keys: writes go to RocksDB and the changelog in batches of 100 while the tasks run,
    # and at every commit, so kills leave changelog records beyond the checkpoint. (How many
    # records the buffer saves depends on the rate against task.commit.ms: the contract and
    # container tests count them.)
    count_words_through_kills(
        kafka_bootstrap,
        tmp_path,
        seed=6,
        n=150_000,
        kills=2,
        wipe_before=None,
        store_options={"object.cache.size": 300, "write.batch.size": 100},
    )


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_deleted_local_state_is_restored_from_the_changelog(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # The state is deleted before the second restart, after two kills left changelog records
    # beyond the checkpoint: the full restore must stop at the checkpointed changelog offset.
    count_words_through_kills(
        kafka_bootstrap,
        tmp_path,
        seed=5,
        n=100_000,
        kills=2,
        wipe_before=2,
        store_options={"write.buffer.max.bytes": 0},  # each write sent as it happens
    )


@pytest.mark.timeout(180)
def test_the_changelog_gets_each_key_once_per_commit(kafka_bootstrap: str, tmp_path: Path) -> None:
    # 30,000 words over PARTITIONS tasks, each task's from a vocabulary of its own; one
    # commit in the run (the final one, task.commit.ms 60 s): one changelog record per word
    # a task counted, not one per message.
    rng = random.Random(9)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    words = zipf_words(rng, 30_000)
    placed = by_partition(words)
    asyncio.run(produce_words(kafka_bootstrap, source, placed))
    job = state_job_file(tmp_path, kafka_bootstrap, source, changelog, **{"task.commit.ms": 60000})
    run = Job(job, "unused", tmp_path / "run.log")
    wait_for(lambda: has_processed(run, len(words)), 120, "every word counted", run.proc)
    assert run.stop() == 0
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    records = output_count(kafka_bootstrap, changelog)
    distinct = sum(len(set(ws)) for ws in placed.values())
    assert records == distinct < len(words) // 5, (records, distinct, len(words))


# -- a clean stop keeps the local store -----------------------------------------------------------


def changelog_offsets(bootstrap: str, job: Path, *, exactly_once: bool = False) -> dict[str, str]:
    """Each task's latest checkpointed changelog offset of the store ``counts`` (in the
    exactly-once checkpoints, read committed, with ``exactly_once``)."""
    cfg = json.loads(job.read_text())
    topic = checkpoint_stream_name(cfg["job.name"], cfg["job.id"])
    topic += TRANSACTIONAL_SUFFIX if exactly_once else ""
    latest: dict[str, str] = {}
    for record in asyncio.run(read_all(bootstrap, topic, committed=exactly_once)):
        if is_typed_key(record.key):
            continue  # the owner record: no task's
        document = json.loads(record.value)
        latest[document["task"]] = document["extra"]["changelog_offsets"][STORE]
    return latest


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "guarantee", ["at-least-once", pytest.param("exactly-once", marks=pytest.mark.slow)]
)
def test_a_clean_stop_keeps_the_local_store_and_the_restart_replays_nothing(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """README, "State": after a clean stop the local store is kept as it is; docs/deploy.md:
    a restarted pod replays only the changelog past what it holds. A count over 40,000 keys
    stopped with SIGTERM marks each task's store clean at its final checkpoint's changelog
    offset; started again, each task keeps its store (``kept_local``) and replays none of
    the changelog; what came in meanwhile is counted on top, exactly. Under either
    guarantee."""
    keys = 10_000
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    first = {p: [f"w{p}-{i:05d}" for i in range(keys)] for p in range(PARTITIONS)}
    asyncio.run(produce_words(kafka_bootstrap, source, first))
    eos = guarantee == "exactly-once"
    job = state_job_file(
        tmp_path, kafka_bootstrap, source, changelog, **{"task.processing.guarantee": guarantee}
    )

    def stopped_at(last: int, label: str) -> Job:
        """The job run until every partition is checkpointed at ``last``, then stopped."""
        run = Job(job, "unused", tmp_path / f"{label}.log")
        ends = {p: last for p in range(PARTITIONS)}
        wait_for(
            lambda: checkpointed(kafka_bootstrap, job, exactly_once=eos) == ends,
            90,
            f"the {label} pass",
            run.proc,
        )
        assert run.stop() == 0
        return run

    stopped_at(keys - 1, "first")
    held = changelog_offsets(kafka_bootstrap, job, exactly_once=eos)
    for partition in range(PARTITIONS):
        task = str(TaskName.for_partition(partition))
        marker = store_dir(tmp_path) / task_directory_name(TaskName(task)) / CLEAN_MARKER
        assert marker.read_text() == held[task], (task, held)
    assert len(asyncio.run(read_all(kafka_bootstrap, changelog))) == PARTITIONS * keys
    # Half the keys again while it is stopped.
    second = {p: words[: keys // 2] for p, words in first.items()}
    asyncio.run(produce_words(kafka_bootstrap, source, second))
    run = stopped_at(keys + keys // 2 - 1, "second")
    restored = [e for e in run.events() if e["event"] == "store_restored"]
    assert len(restored) == PARTITIONS, restored
    for event in restored:
        assert event["kept_local"] is True and event["snapshot"] is None, event
        assert event["records"] == 0 and event["dropped_after_checkpoint"] == 0, event
    words = [w for p in range(PARTITIONS) for w in first[p] + second[p]]
    assert changelog_state(kafka_bootstrap, changelog, committed=eos) == Counter(words)


# -- errors through the command -------------------------------------------------------------------


def failed_run(job: Path, log: Path) -> dict[str, Any]:
    """Runs the job to its exit, which must be 1, and returns its ``job_failed`` event."""
    run = Job(job, "unused", log)
    code = run.proc.wait(60)
    run.stop()
    assert code == 1, f"exit {code}, expected 1; log:\n{log.read_text()[-3000:]}"
    failures = [e for e in run.events() if e["event"] == "job_failed"]
    assert len(failures) == 1, log.read_text()[-3000:]
    return failures[0]


def _one_word_input(bootstrap: str) -> str:
    source = name("words")
    asyncio.run(create_topic(bootstrap, source, 1))
    asyncio.run(produce_words(bootstrap, source, {0: ["apple"]}))
    return source


def test_a_task_asking_for_an_undeclared_store_fails_the_job(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = _one_word_input(kafka_bootstrap)
    job = state_job_file(
        tmp_path, kafka_bootstrap, source, name("changelog"), task="state_jobs:UndeclaredStore"
    )
    failure = failed_run(job, tmp_path / "run.log")
    assert "store 'nope'" in failure["error"]
    assert "task 'Partition 0'" in failure["error"]


def test_a_value_the_msg_serde_refuses_fails_the_job(kafka_bootstrap: str, tmp_path: Path) -> None:
    source = _one_word_input(kafka_bootstrap)
    job = state_job_file(
        tmp_path, kafka_bootstrap, source, name("changelog"), task="state_jobs:BadValue"
    )
    failure = failed_run(job, tmp_path / "run.log")
    assert f"store '{STORE}'" in failure["error"]
    assert f"stores.{STORE}.msg.serde" in failure["error"]
    assert "key 'apple'" in failure["error"]


def test_a_corrupt_store_directory_fails_the_job(kafka_bootstrap: str, tmp_path: Path) -> None:
    source = _one_word_input(kafka_bootstrap)
    job = state_job_file(tmp_path, kafka_bootstrap, source, name("changelog"))
    first = Job(job, "unused", tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 0}, 60, "a checkpoint", first.proc)
    assert first.stop() == 0
    # Whatever the task directories are called, each holds a RocksDB CURRENT file.
    current = list(store_dir(tmp_path).glob("*/CURRENT"))
    assert current, f"no RocksDB directory under {store_dir(tmp_path)}"
    for path in current:
        path.write_bytes(b"\x00garbage, not a manifest name")
    failure = failed_run(job, tmp_path / "second.log")
    assert f"store '{STORE}'" in failure["error"]
    assert str(store_dir(tmp_path)) in failure["error"]
    assert "Corruption" in failure["error"]
