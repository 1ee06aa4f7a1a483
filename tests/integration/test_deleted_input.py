"""An input topic deleted while `samzapy run` reads it, on the real broker (docs/deploy.md,
"An input topic deleted under a running job").

The job fails within the consumer's check interval (a third of ``connect.timeout.ms``, at most
5 s), whether or not its other inputs still deliver: exit 1, one ``job_failed`` naming the
topic and its partitions, and no checkpoint past what the tasks processed."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    delete_topic,
    job_file,
    name,
    outputs,
    produce,
    seconds_between,
    wait_for,
)


class Feed:
    """Writes a message to each partition of ``topic`` every 10 ms, in a thread, until
    ``stop``: an input that keeps delivering, as a live one does."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._args = (bootstrap, topic, partitions)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._feed()))
        self._thread.start()

    async def _feed(self) -> None:
        bootstrap, topic, partitions = self._args
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        await producer.start()
        try:
            while not self._stopping.is_set():
                for p in range(partitions):
                    await producer.send(topic, b"live", partition=p)
                await asyncio.sleep(0.01)
        finally:
            await producer.stop()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(30)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("coordinator", ["static", "kafka-group"])
def test_an_input_deleted_while_another_delivers_fails_the_job_naming_it(
    kafka_bootstrap: str, tmp_path: Path, coordinator: str
) -> None:
    """The other input keeps the broker answering the consumer's fetches with records: the
    idle-time check never runs, and before the busy-time check the job read on for good
    (Kafka's client waits for the topic to come back), the partitions of the deleted topic
    in every checkpoint."""
    gone, live, output = name("deleted-src"), name("deleted-live"), name("deleted-out")
    for topic in (gone, live, output):
        asyncio.run(create_topic(kafka_bootstrap, topic, 3))
    asyncio.run(produce(kafka_bootstrap, gone, [(i % 3, None, b"g%d" % i) for i in range(6)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        gone,
        **{
            "task.inputs": [f"kafka.{gone}", f"kafka.{live}"],
            "job.coordinator.factory": coordinator,
            "systems.kafka.connect.timeout.ms": 3000,  # checks every second
        },
    )
    run = Job(job, output, tmp_path / "job.log")
    feed = Feed(kafka_bootstrap, live, 3)
    try:
        wait_for(
            lambda: checkpointed(kafka_bootstrap, job, stream=gone) == {0: 1, 1: 1, 2: 1},
            60,
            "the deleted input's messages checkpointed",
            run.proc,
        )
        asyncio.run(delete_topic(kafka_bootstrap, gone))
        deleted = time.monotonic()
        assert run.wait(20) == 1, run.tail()
        assert time.monotonic() - deleted < 8, run.tail()
    finally:
        feed.stop()

    events = run.events()
    [failed] = [e for e in events if e["event"] == "job_failed"]
    assert (
        f"Kafka topic {gone!r} no longer exists at {kafka_bootstrap} (deleted while it was "
        "read?): its partitions 0, 1, 2 cannot be read"
    ) in failed["error"]
    # Kafka's client asked for the topic's metadata again after each answer without it, but
    # waited its retry backoff (100 ms) in between: not thousands of requests a second.
    lacking = [e for e in events if "not found in cluster metadata" in str(e.get("message"))]
    suppressed = [e for e in events if "not found in" in str(e.get("template"))]
    answers = len(lacking) + sum(e["suppressed"] for e in suppressed)
    seconds = seconds_between(lacking[0], failed)
    assert answers < 5 + 15 * seconds, (answers, seconds)  # at most 10 a second, and a few
    # Nothing committed that the tasks had not processed.
    processed: dict[int, int] = {}
    for record in outputs(kafka_bootstrap, output):
        if record["v"] == "live":
            processed[record["p"]] = max(processed.get(record["p"], -1), record["o"])
    done = checkpointed(kafka_bootstrap, job, stream=live)
    assert done and all(done[p] <= processed[p] for p in done), (done, processed)
