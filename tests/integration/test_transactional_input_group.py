"""The job's consumer group over an input written in transactions; through `samzapy run` on
the real broker, under both guarantees.

Each transaction ends with a commit marker, a record at an offset of its own that no reader
gets. The group's committed offset (what ``kafka-consumer-groups --describe`` and lag
exporters read) must reach the log end offset once the job has processed every message, not
stop one short at the marker (a lag of 1 for ever; Kafka Streams' KAFKA-6607); and it must
never pass a message the job has yet to process, however far the consumer has fetched.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_group_offsets import group  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpoint_documents,
    checkpointed,
    create_topic,
    job_file,
    name,
    outputs,
    read_all,
    wait_for,
)

GUARANTEES = ["at-least-once", "exactly-once"]


async def _transactions(
    bootstrap: str, topic: str, transactions: list[list[tuple[int, bytes]]]
) -> list[tuple[int, int]]:
    """Write each list of (partition, value) in a transaction of its own; the (partition,
    offset) of every message written."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=name("tx-in"))
    await producer.start()
    written: list[tuple[int, int]] = []
    try:
        for records in transactions:
            async with producer.transaction():
                sent = [await producer.send(topic, v, partition=p) for p, v in records]
            for future in sent:
                metadata = await future
                written.append((metadata.partition, metadata.offset))
    finally:
        await producer.stop()
    return written


def transactions(
    bootstrap: str, topic: str, count: int, size: int, partitions: int
) -> list[tuple[int, int]]:
    batches = [[(i % partitions, b"t%d-%d" % (t, i)) for i in range(size)] for t in range(count)]
    return asyncio.run(_transactions(bootstrap, topic, batches))


async def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in ends.items()}


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end offset: one past its last transaction's marker."""
    return asyncio.run(_ends(bootstrap, topic, partitions))


def epochs(bootstrap: str, job: Path, exactly_once: bool) -> dict[str, int]:
    """Each task's owner epoch, in its last checkpoint."""
    documents = checkpoint_documents(bootstrap, job, exactly_once=exactly_once)
    return {
        task: doc["extra"]["epoch"]
        for task, doc in documents.items()
        if task.startswith("Partition ") and "epoch" in doc.get("extra", {})
    }


def claimed(now: dict[str, int], before: dict[str, int]) -> bool:
    """Whether every task of ``before`` has a checkpoint of a later owner."""
    return all(now.get(task, epoch) > epoch for task, epoch in before.items())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_the_group_of_a_job_at_rest_on_a_transactional_input_shows_no_lag(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    source, out = name("tx-in"), name("tx-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    written = transactions(kafka_bootstrap, source, 2, 10, 2)
    exactly_once = guarantee == "exactly-once"
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"task.processing.guarantee": guarantee, "task.commit.ms": 200},
    )
    run = Job(job, out, tmp_path / "job.log")

    def at_rest(count: int) -> None:
        # Each partition's last transaction ends with its marker, one past its last message.
        ends = {p: max(o for q, o in written if q == p) + 2 for p in range(2)}
        wait_for(
            lambda: len(outputs(kafka_bootstrap, out)) >= count, 60, f"{count} outputs", run.proc
        )
        wait_for(
            lambda: group(kafka_bootstrap, job)[0] == ends,
            60,
            f"the group's offsets at the log's end {ends}",
            run.proc,
        )

    at_rest(20)
    # A transaction committed while the job waits: its marker comes after the job's fetch.
    written += transactions(kafka_bootstrap, source, 1, 10, 2)
    at_rest(30)
    ends = log_ends(kafka_bootstrap, source, 2)
    assert group(kafka_bootstrap, job)[0] == ends
    assert run.stop() == 0
    assert group(kafka_bootstrap, job)[0] == ends  # the final commit kept them
    # The checkpoints still name the last message processed, before the markers.
    last = {p: max(o for q, o in written if q == p) for p in range(2)}
    assert checkpointed(kafka_bootstrap, job, exactly_once=exactly_once) == last
    assert all(last[p] < ends[p] - 1 for p in range(2))
    # A restart resumes after the last message: nothing is processed again.
    first_epochs = epochs(kafka_bootstrap, job, exactly_once)
    assert len(first_epochs) == 2, first_epochs
    again = Job(job, out, tmp_path / "again.log")
    # Its tasks' claim (each one's first commit, a checkpoint with the next owner epoch)
    # copies the checkpoint's offsets to the group, one short of the end under exactly-once;
    # the next commits give it the position again. container_started comes before the claim,
    # which a loaded machine may hold up for seconds: waited for as such.
    wait_for(
        lambda: claimed(epochs(kafka_bootstrap, job, exactly_once), first_epochs),
        60,
        "the restart's claim of its tasks",
        again.proc,
    )
    wait_for(lambda: group(kafka_bootstrap, job)[0] == ends, 60, "the group at the end", again.proc)
    assert again.stop() == 0
    assert group(kafka_bootstrap, job)[0] == ends
    offsets = sorted((o["p"], o["o"]) for o in outputs(kafka_bootstrap, out))
    if exactly_once:
        assert offsets == sorted(written)
    else:
        assert sorted(set(offsets)) == sorted(written)
        assert len(offsets) == len(written)  # a clean stop: no message twice


@pytest.mark.timeout(240)
@pytest.mark.parametrize("guarantee", GUARANTEES)
def test_the_group_never_passes_a_message_fetched_but_not_processed(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """A slow task, frequent commits: the consumer fetches far ahead of the task, yet every
    message before the group's committed offset has its output written (the group's offset
    is committed after the outputs are flushed: read it first, then the outputs)."""
    source, out = name("tx-in"), name("tx-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    written = transactions(kafka_bootstrap, source, 3, 20, 1)
    exactly_once = guarantee == "exactly-once"
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"task.processing.guarantee": guarantee, "task.commit.ms": 100},
    )
    run = Job(job, out, tmp_path / "job.log", delay_ms=50)
    seen: set[int] = set()
    while True:
        committed = group(kafka_bootstrap, job)[0].get(0, 0)
        records = asyncio.run(read_all(kafka_bootstrap, out, committed=exactly_once))
        done = {json.loads(r.value)["o"] for r in records}
        missing = sorted(o for _, o in written if o < committed and o not in done)
        assert not missing, f"the group is at {committed}, {missing} not processed yet"
        seen.add(committed)
        if len(done) == len(written):
            break
        assert run.proc.poll() is None, run.tail()
        time.sleep(0.1)
    # It went through the run (not at once to the end) and ends at the log's end.
    assert len([c for c in seen if 0 < c < written[-1][1]]) >= 2, sorted(seen)
    end = log_ends(kafka_bootstrap, source, 1)
    wait_for(lambda: group(kafka_bootstrap, job)[0] == end, 60, "the log's end", run.proc)
    assert run.stop() == 0
