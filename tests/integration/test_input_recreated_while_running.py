"""An input topic deleted and created again at once while `samzapy run` reads it, on the real
broker (docs/deploy.md, "Deleting an input topic"): the topic is missing for a moment only,
which the consumer's check may never see, but its ID changed. The check compares the ID with
the one looked up at start-up and fails the job, exit 1, naming the topic; the restart finds
the checkpoint's ID changed (``input_topic_recreated``) and reads the new topic from its
offset default, every record of it."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    job_file,
    name,
    outputs,
    produce,
    wait_for,
)


async def delete_and_create(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and create it again (one partition) as soon as the broker takes it:
    the topic is missing from the metadata for some tens of milliseconds."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while True:
            response = await admin.create_topics([NewTopic(topic, 1, 1)])
            if all(error[1] == 0 for error in response.topic_errors):
                return
            assert time.monotonic() < deadline, response
            await asyncio.sleep(0.01)
    finally:
        await admin.close()


@pytest.mark.timeout(120)
def test_an_input_recreated_while_the_job_runs_fails_it_and_the_restart_reads_it_all(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, output = name("swapped-src"), name("swapped-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(5)]))
    job = job_file(  # offset default: oldest
        tmp_path, kafka_bootstrap, source, **{"systems.kafka.connect.timeout.ms": 3000}
    )
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 4}, 60, "the first run", first.proc)

    asyncio.run(delete_and_create(kafka_bootstrap, source))
    recreated = time.monotonic()
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(8)]))
    assert first.wait(20) == 1, first.tail()  # checks every second: 3000 ms / 3
    assert time.monotonic() - recreated < 8, first.tail()
    [failed] = [e for e in first.events() if e["event"] == "job_failed"]
    assert (
        f"Kafka topic {source!r} was deleted and created again at {kafka_bootstrap} while it "
        "was read (its topic ID was "
    ) in failed["error"], failed
    assert "its partitions 0 cannot be read on" in failed["error"], failed

    again = Job(job, output, tmp_path / "again.log")
    new = [f"new{i}" for i in range(8)]
    wait_for(
        lambda: (
            [o["v"] for o in outputs(kafka_bootstrap, output)][-8:] == new
            and checkpointed(kafka_bootstrap, job) == {0: 7}
        ),
        60,
        "the restart",
        again.proc,
    )
    assert again.stop() == 0
    [forgot] = [e for e in again.events() if e["event"] == "input_topic_recreated"]
    assert (forgot["stream"], forgot["partitions"]) == (f"kafka.{source}", [0])
    assert not [e for e in again.events() if e["level"] == "error"]
