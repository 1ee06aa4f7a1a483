"""Exactly-once processing and fencing on the real broker, through `samzapy run`.

The job counts words in a RocksDB store with a Kafka changelog and sends each word's new
running total, keyed by the word, to an output topic. Exactly-once means that a reader with
``isolation.level: read_committed`` sees, for every word, the totals 1, 2, ..., n once each
(n its count in the input): no duplicate and no gap, whatever crashed. Fencing means that a
container that lost its tasks while its event loop stood still cannot make its writes count.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from samzapy import SystemStream, TaskFencedError
from samzapy.checkpoint.owner import is_typed_key
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.system.kafka import KafkaSystemFactory

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_control_jobs import framed_source, lines, run_job, split_and_count  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    create_topic,
    name,
    open_transaction,
    output_count,
    produce,
    read_all,
    wait_for,
)
from test_state_jobs import (  # noqa: E402
    PARTITIONS,
    by_partition,
    changelog_state,
    checkpointed,
    end_offsets,
    has_processed,
    kill_while_working,
    processed,
    produce_words,
    state_job_file,
    zipf_words,
)

if TYPE_CHECKING:
    from conftest import ScriptBroker

EXACTLY_ONCE = {"task.processing.guarantee": "exactly-once"}


def totals_job(
    tmp_path: Path, bootstrap: str, source: str, changelog: str, totals: str, **extra: Any
) -> Path:
    return state_job_file(
        tmp_path,
        bootstrap,
        source,
        changelog,
        task="state_jobs:WordTotals",
        **{"app.totals": f"kafka.{totals}", **extra},
    )


def committed_totals(bootstrap: str, totals: str) -> dict[str, list[int]]:
    """Each word's running totals as a read_committed reader sees them, in order."""
    seen: dict[str, list[int]] = {}
    for record in asyncio.run(read_all(bootstrap, totals, committed=True)):
        seen.setdefault(record.key.decode(), []).append(int(record.value))
    return seen


def assert_each_total_once(seen: dict[str, list[int]], words: list[str]) -> None:
    counts = Counter(words)
    wrong = {
        w: seen.get(w, [])[:8] for w, n in counts.items() if seen.get(w) != list(range(1, n + 1))
    }
    assert not wrong, (
        f"{len(wrong)} words with duplicate or missing totals, e.g. {list(wrong.items())[:3]}"
    )
    assert set(seen) == set(counts)


def txn_checkpointed(bootstrap: str, job: Path) -> dict[int, int]:
    """The last processed input offset of each partition in the exactly-once checkpoints."""
    return checkpointed(bootstrap, job, exactly_once=True)


# -- kill -9 ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_running_totals_are_exactly_once_through_three_kill_9s(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(12)
    n = 200_000
    source, changelog, totals = name("words"), name("counts-changelog"), name("totals")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, totals, PARTITIONS))
    words = zipf_words(rng, n)
    placed = by_partition(words)
    asyncio.run(produce_words(kafka_bootstrap, source, placed))
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    job = totals_job(tmp_path, kafka_bootstrap, source, changelog, totals, **EXACTLY_ONCE)
    # How many records each kill left in an open transaction on the totals topic.
    left_open: list[int] = []
    for run_number in range(4):
        run = Job(job, "unused", tmp_path / f"run-{run_number}.log")
        if run_number == 3:
            break
        # Killed while a transaction holds totals, the run stood still to make sure (a kill
        # at a random moment may fall between transactions, on a loaded machine at all three).
        kill_while_working(
            run,
            rng,
            rng.randint(n // 20, n // 5),
            run_number,
            left=lambda: open_transaction(kafka_bootstrap, totals),
        )
        # What the killed run wrote but never committed is there, and never read committed
        # (the transactions of earlier kills are aborted, and stay uncommitted).
        everything = asyncio.run(read_all(kafka_bootstrap, totals))
        committed = asyncio.run(read_all(kafka_bootstrap, totals, committed=True))
        left_open.append(len(everything) - len(committed) - sum(left_open))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(lambda: txn_checkpointed(kafka_bootstrap, job) == last, 180, "the end", run.proc)
    assert run.stop() == 0
    assert_each_total_once(committed_totals(kafka_bootstrap, totals), words)
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    assert all(left_open), f"a kill left no uncommitted writes, the test proved less: {left_open}"
    commits = [e for e in run.events() if e["event"] == "job_finished"]
    assert commits and commits[-1]["commits"] > 0


# -- zombies ----------------------------------------------------------------------------------


def assignment(run: Job) -> list[str]:
    """The tasks of the run's latest assignment."""
    events = [e for e in run.events() if e["event"] in ("tasks_assigned", "rebalance_completed")]
    return list(events[-1]["tasks"]) if events else []


def effective_checkpoints_never_move_back(bootstrap: str, job: Path) -> None:
    """Replay the checkpoint stream as a reader keeps it (the highest owner epoch wins): the
    offsets a reader would resume from only ever move forward."""
    cfg = json.loads(job.read_text())
    topic = checkpoint_stream_name(cfg["job.name"], cfg["job.id"])
    kept: dict[str, tuple[int, dict[int, int]]] = {}
    for record in asyncio.run(read_all(bootstrap, topic)):
        if is_typed_key(record.key):
            continue  # the owner record: no task's
        doc = json.loads(record.value)
        epoch = doc.get("extra", {}).get("epoch", 0)
        offsets = {e["partition"]: int(e["offset"]) for e in doc["offsets"]}
        task = record.key.decode()
        if task in kept and epoch < kept[task][0]:
            continue  # a stale owner's write: ignored
        if task in kept:
            before = kept[task][1]
            assert all(offsets.get(p, -1) >= o for p, o in before.items()), (task, before, offsets)
        kept[task] = (epoch, offsets)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "guarantee", [pytest.param("at-least-once", marks=pytest.mark.slow), "exactly-once"]
)
def test_a_container_that_stood_still_past_its_session_is_fenced(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    rng = random.Random(7)
    source, changelog, totals = name("words"), name("counts-changelog"), name("totals")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, totals, PARTITIONS))
    first_words, later_words = zipf_words(rng, 30_000), zipf_words(rng, 10_000)
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(first_words)))
    job_id = name("job")

    def container_job(container: str) -> Path:
        """The job file of one container: the same job, a state directory of its own."""
        return totals_job(
            tmp_path,
            kafka_bootstrap,
            source,
            changelog,
            totals,
            **{
                "job.id": job_id,
                "job.logged.store.base.dir": str(tmp_path / f"state-{container}"),
                "task.processing.guarantee": guarantee,
                "job.coordinator.factory": "kafka-group",
                "job.coordinator.session.timeout.ms": 6000,
            },
        )

    job = container_job("zombie")
    zombie = Job(job, "unused", tmp_path / "zombie.log")
    wait_for(lambda: has_processed(zombie, 3000), 90, "the first container at work", zombie.proc)
    other = Job(container_job("other"), "unused", tmp_path / "other.log")
    wait_for(lambda: len(assignment(other)) == 2, 90, "a split of the tasks", other.proc)
    # Frozen for longer than the session: the group gives its tasks to the other container.
    zombie.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: len(assignment(other)) == PARTITIONS, 60, "a take-over", other.proc)
    finally:
        zombie.proc.send_signal(signal.SIGCONT)
    wait_for(
        lambda: any(e["event"] == "task_fenced" for e in zombie.events()),
        60,
        "the woken container to notice it was fenced",
        zombie.proc,
    )
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(later_words)))
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    done = txn_checkpointed if guarantee == "exactly-once" else checkpointed
    wait_for(lambda: done(kafka_bootstrap, job) == last, 120, "the end", other.proc)
    assert other.stop() == 0
    assert zombie.stop() == 0
    words = first_words + later_words
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    if guarantee == "exactly-once":
        assert_each_total_once(committed_totals(kafka_bootstrap, totals), words)
    else:
        effective_checkpoints_never_move_back(kafka_bootstrap, job)
    fenced = [e for e in zombie.events() if e["event"] == "task_fenced"]
    assert fenced[0]["epoch"] is None or fenced[0]["epoch"] >= 1


# -- the transactional producer ---------------------------------------------------------------


async def _fence(bootstrap: str, topic: str) -> tuple[BaseException | None, list[Any]]:
    factory = KafkaSystemFactory("kafka", {"bootstrap.servers": bootstrap})
    stream = SystemStream("kafka", topic)
    first = factory.get_transactional_producer("fence-test", timeout_ms=60_000)
    await first.start()
    first.send(stream, 0, b"k", b"committed")
    await first.commit()
    first.send(stream, 0, b"k", b"from the zombie")
    await first.flush()  # written, not committed
    second = factory.get_transactional_producer("fence-test", timeout_ms=60_000)
    await second.start()  # claims the id: the first's open transaction is aborted
    second.send(stream, 0, b"k", b"from the new owner")
    await second.commit()
    error: BaseException | None = None
    try:
        first.send(stream, 0, b"k", b"from the zombie, later")
        await first.commit()
    except TaskFencedError as exc:
        error = exc
    await first.stop()
    await second.stop()
    return error, await read_all(bootstrap, topic, committed=True)


def test_a_producer_whose_transactional_id_is_claimed_again_is_fenced(
    kafka_bootstrap: str,
) -> None:
    topic = name("fenced")
    asyncio.run(create_topic(kafka_bootstrap, topic, 1))
    error, committed = asyncio.run(_fence(kafka_bootstrap, topic))
    assert isinstance(error, TaskFencedError)
    assert "'fence-test' was fenced: another container claimed its id" in str(error)
    assert [r.value for r in committed] == [b"committed", b"from the new owner"]


# -- a broker restart -------------------------------------------------------------------------


@pytest.mark.slow  # make test-slow
@pytest.mark.timeout(300)
def test_a_broker_restart_in_the_middle_of_transactions_duplicates_nothing(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    bootstrap = own_kafka_broker.bootstrap
    rng = random.Random(3)
    source, changelog, totals = name("words"), name("counts-changelog"), name("totals")
    asyncio.run(create_topic(bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(bootstrap, totals, PARTITIONS))
    words = zipf_words(rng, 150_000)
    asyncio.run(produce_words(bootstrap, source, by_partition(words)))
    ends = asyncio.run(end_offsets(bootstrap, source))
    job = totals_job(
        tmp_path, bootstrap, source, changelog, totals, **EXACTLY_ONCE, **{"task.commit.ms": 500}
    )
    runs = [Job(job, "unused", tmp_path / "run-0.log")]
    wait_for(lambda: has_processed(runs[0], 2000), 90, "the job at work", runs[0].proc)
    own_kafka_broker.down()
    assert not has_processed(runs[0], len(words)), "the job was done before the outage"
    time.sleep(3)
    own_kafka_broker.up()
    last = {p: end - 1 for p, end in ends.items()}

    def finished() -> bool:
        if runs[-1].proc.poll() is not None:  # it failed instead of riding the outage out:
            assert runs[-1].proc.returncode == 1  # a restart must resume exactly
            runs.append(Job(job, "unused", tmp_path / f"run-{len(runs)}.log"))
        return txn_checkpointed(bootstrap, job) == last

    wait_for(finished, 180, "the end")
    assert runs[-1].stop() == 0
    assert_each_total_once(committed_totals(bootstrap, totals), words)
    assert changelog_state(bootstrap, changelog) == Counter(words)


# -- two stages -------------------------------------------------------------------------------


def processed_at_least(job: Job, count: int) -> bool:
    return any(e["event"] == "progress" and e["processed"] >= count for e in job.events())


def kill_working(run: Job) -> None:
    """SIGKILL ``run``, failing the test if it had ended by itself (a kill after the end
    tests nothing: wait_for looks at its condition before at the process)."""
    assert run.proc.poll() is None, f"the run ended before the kill:\n{run.tail()}"
    run.stop(signal.SIGKILL)


@pytest.mark.timeout(400)
# at-least-once in the slow tier: test_intermediate_dedup's kill -9s cover its dedupe by
# default; this adds the ends reconciled across both stages' restarts.
@pytest.mark.parametrize(
    "guarantee", ["exactly-once", pytest.param("at-least-once", marks=pytest.mark.slow)]
)
def test_a_two_stage_pipeline_killed_in_each_stage_ends_once_with_exact_totals(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """Both guarantees (README, "Pipelines"): a stage-1 task killed with -9 writes words to
    the intermediate stream a second time, and stage 2 counts them once (at-least-once: by
    their origins); either stage restarted in the middle neither hangs nor ends early."""
    source, words, out = name("lines"), name("words"), name("counts")
    asyncio.run(create_topic(kafka_bootstrap, source, 3))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    placed = {p: lines(30 + p, 15_000) for p in range(3)}
    asyncio.run(produce(kafka_bootstrap, source, framed_source(placed)))
    env = {"SAMZAPY_TEST_WORDS": words, "SAMZAPY_TEST_OUTPUT": out}
    split, count = split_and_count(kafka_bootstrap, "eos-wc", source, words, tmp_path)
    for cfg in (split, count):
        cfg.update({"task.processing.guarantee": guarantee, "task.progress.interval.ms": 100})
    if guarantee == "at-least-once":
        # No checkpoint before the kill: all stage 1 wrote is written again, so stage 2 has
        # copies to drop. (With a commit every 300 ms, a kill just after one, while the few
        # records since were still in the producer's buffer, left none: a flake.)
        split["task.commit.ms"] = 600_000
    count_run = run_job(count, tmp_path, env)
    split_run = run_job(split, tmp_path, env)
    # Each stage is killed with -9 while it works, and started again. Stage 1 first, once it
    # has written 20,000 of its ~200,000 words (killed once stage 2 had counted a number, it
    # could have finished and checkpointed by then, leaving no copies to drop); stage 2
    # once it has counted 60,000, far from its end with stage 1's copies still to come.
    wait_for(lambda: output_count(kafka_bootstrap, words) >= 20_000, 120, "words", split_run.proc)
    kill_working(split_run)
    split_run = run_job(split, tmp_path, env)
    wait_for(lambda: processed_at_least(count_run, 60_000), 120, "counts", count_run.proc)
    kill_working(count_run)
    count_run = run_job(count, tmp_path, env)
    assert split_run.wait(240) == 0, split_run.tail()
    assert count_run.wait(240) == 0, count_run.tail()
    expected = Counter(w for texts in placed.values() for t in texts for w in t.split())
    emitted: Counter[str] = Counter()
    for record in asyncio.run(read_all(kafka_bootstrap, out, committed=True)):
        entry = json.loads(record.value)
        assert entry["word"] not in emitted, f"{entry['word']} emitted twice"
        emitted[entry["word"]] = entry["n"]
    assert emitted == expected
    # on_end_of_stream ran once per downstream task: once in the run that finished.
    ended = [e for e in count_run.events() if e["event"] == "task_ended"]
    assert len(ended) == 2 and all(e.get("ended_before_restart") is None for e in ended)
    if guarantee == "at-least-once":
        # Exact because stage 2 dropped stage 1's replay, not because there was none.
        dropped = [
            event
            for log in tmp_path.glob("job-*.log")
            for line in log.read_text().splitlines()
            if line.startswith("{") and (event := json.loads(line))["event"] == "duplicates_dropped"
        ]
        assert sum(e["count"] for e in dropped) > 0


# -- switching the guarantee ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_job_switched_to_at_least_once_and_back_resumes_where_it_was(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Each guarantee keeps its checkpoints in a stream of its own (docs/configuration.md,
    "Exactly-once and fencing"): switched either way, the job resumes from the newest of
    them. Here it starts at the end of its inputs when it finds none, so a job that did not
    would skip what came while it was stopped, and wipe its store."""
    rng = random.Random(4)
    source, changelog, totals = name("words"), name("counts-changelog"), name("totals")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, totals, PARTITIONS))
    job = totals_job(tmp_path, kafka_bootstrap, source, changelog, totals)
    cfg = json.loads(job.read_text())
    cfg["systems.kafka.default.stream.samza.offset.default"] = "upcoming"
    words: list[str] = []
    for run_number, guarantee in enumerate(["exactly-once", "at-least-once", "exactly-once"]):
        job.write_text(json.dumps({**cfg, "task.processing.guarantee": guarantee}))
        run = Job(job, "unused", tmp_path / f"run-{run_number}.log")
        wait_for(
            lambda run=run: sum(e["event"] == "tasks_assigned" for e in run.events()) > 0,
            60,
            "the tasks' start",
            run.proc,
        )
        more = zipf_words(rng, 2_000)
        asyncio.run(produce_words(kafka_bootstrap, source, by_partition(more)))
        words += more
        last = {p: end - 1 for p, end in asyncio.run(end_offsets(kafka_bootstrap, source)).items()}
        wait_for(
            lambda eos=guarantee == "exactly-once", last=last: (
                checkpointed(kafka_bootstrap, job, exactly_once=eos) == last
            ),
            60,
            f"run {run_number} to checkpoint its input",
            run.proc,
        )
        assert run.stop() == 0
        assert processed(run) == len(more), "it processed again what an earlier run had"
    assert changelog_state(kafka_bootstrap, changelog, committed=True) == Counter(words)
