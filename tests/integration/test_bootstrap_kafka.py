"""A bootstrap input on a real broker: each task processes its partition of the pre-filled
``profiles`` topic to the end it had at start-up before the first message of ``views``,
whose messages were there first; then the bootstrap topic is read as a normal input.

Partition 1 of ``profiles`` is written in one committed transaction, so its last offset is a
transaction marker no consumer returns: it is caught up once the consumer's position passes
the head, not by a message at the head.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer

PROFILES = 1000
VIEWS = 100
LATE = 10


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def create_topics(bootstrap: str, *topics: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 2, 1) for t in topics])
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, partition: int, values: list[str], *, transaction: bool = False
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=5,
        transactional_id=name("boot-tx") if transaction else None,
    )
    await producer.start()
    try:
        if transaction:
            await producer.begin_transaction()
        futures = [await producer.send(topic, v.encode(), partition=partition) for v in values]
        await asyncio.gather(*futures)
        if transaction:
            await producer.commit_transaction()
    finally:
        await producer.stop()


async def test_bootstrap_topic_is_processed_to_its_head_before_the_other_input(
    kafka_bootstrap: str,
) -> None:
    profiles, views = name("profiles"), name("views")
    await create_topics(kafka_bootstrap, profiles, views)
    for p in (0, 1):  # the views first: they wait all the same
        await produce(kafka_bootstrap, views, p, [f"view-{i}" for i in range(VIEWS)])
    await produce(kafka_bootstrap, profiles, 0, [f"profile-{i}" for i in range(PROFILES)])
    await produce(
        kafka_bootstrap,
        profiles,
        1,
        [f"profile-{i}" for i in range(PROFILES)],
        transaction=True,
    )
    seen: dict[int, list[str]] = {0: [], 1: []}

    class Record(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            seen[envelope.system_stream_partition.partition].append(envelope.message.decode())

    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "boot-it",
                    "job.id": uuid.uuid4().hex[:8],
                    "task.class": "x:Y",
                    "task.inputs": [f"kafka.{views}", f"kafka.{profiles}"],
                    "systems.kafka.samza.factory": "kafka",
                    "systems.kafka.bootstrap.servers": kafka_bootstrap,
                    "systems.kafka.default.stream.samza.offset.default": "oldest",
                    f"streams.{profiles}.samza.bootstrap": True,
                    f"streams.{profiles}.samza.reset.offset": True,
                }
            )
        )
    )
    container = SamzaContainer(config, task_factory=Record)

    async def until(count: int) -> None:
        deadline = time.monotonic() + 20
        while sum(map(len, seen.values())) < count:
            if job.done():
                job.result()
                raise AssertionError("the job ended early")
            assert time.monotonic() < deadline, (
                f"timed out: {count} wanted; per partition, {[len(m) for m in seen.values()]} "
                f"processed, the last ones {[m[-3:] for m in seen.values()]}"
            )
            await asyncio.sleep(0.02)

    with capture_logs() as logs:
        job = asyncio.ensure_future(container.run())
        await until(2 * (PROFILES + VIEWS))
        # After its head the bootstrap topic is a normal input.
        for p in (0, 1):
            await produce(kafka_bootstrap, profiles, p, [f"late-{i}" for i in range(LATE)])
        await until(2 * (PROFILES + VIEWS + LATE))
        container.request_stop("test done")
        await job
    for p in (0, 1):
        assert seen[p][:PROFILES] == [f"profile-{i}" for i in range(PROFILES)], p
        assert sorted(seen[p][PROFILES:]) == sorted(
            [f"view-{i}" for i in range(VIEWS)] + [f"late-{i}" for i in range(LATE)]
        )
    completed = {e["task"]: e["messages"] for e in logs if e["event"] == "bootstrap_completed"}
    assert completed == {"Partition 0": PROFILES, "Partition 1": PROFILES}
