"""The ``lag`` metric of an input written in transactions (docs/deploy.md, Metrics: "Messages of
the input partition after the last one processed").

A transaction ends with a commit marker, a record at an offset of its own that no reader ever
gets: once a job has processed every message, the partition's high watermark is one past that
marker. The lag must then read 0, as Kafka's consumer lag does, not the marker's 1 for ever (an
alert on lag > 0 would never clear). Both cases are run: the markers there at start-up, and a
transaction committed while the job waits, whose marker the consumer fetches on its own.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, wait_for  # noqa: E402
from test_scale_out import http_get  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def _transaction(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=name("lag-tx"))
    await producer.start()
    try:
        async with producer.transaction():
            for value in values:
                await producer.send(topic, value, partition=0)
    finally:
        await producer.stop()


_SAMPLE = re.compile(
    r"^(samzapy_partition_lag|samzapy_task_messages_processed_total)(?:\{[^}]*\})? (\S+)$"
)


def _scrape(port: int) -> dict[str, float] | None:
    """The partition's lag and the messages processed, from /metrics (None: not yet)."""
    status, body = http_get(port, "/metrics")
    found = dict(
        (m.group(1), float(m.group(2))) for line in body.splitlines() if (m := _SAMPLE.match(line))
    )
    return found if status == 200 and len(found) == 2 else None


def test_the_lag_of_a_transactional_input_reads_0_once_every_message_is_processed(
    kafka_bootstrap: str, tmp_path: Path, free_ports: Callable[[int], list[int]]
) -> None:
    source, output = name("tx-input"), name("tx-output")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(_transaction(kafka_bootstrap, source, [b"a%d" % i for i in range(5)]))
    [port] = free_ports(1)
    path = tmp_path / "job.yaml"
    path.write_text(
        json.dumps(
            {
                "job.name": "tx-lag",
                "job.id": uuid.uuid4().hex[:8],
                "task.class": "kafka_jobs:Tag",
                "task.inputs": [f"kafka.{source}"],
                "task.checkpoint.factory": "kafka",
                "task.commit.ms": 200,
                "systems.kafka.samza.factory": "kafka",
                "systems.kafka.bootstrap.servers": kafka_bootstrap,
                "systems.kafka.default.stream.samza.offset.default": "oldest",
                "metrics.reporters": ["prometheus"],
                "metrics.prometheus.port": port,
            }
        )
    )
    job = Job(path, output, tmp_path / "job.log")
    seen: list[dict[str, float]] = []

    def processed(count: int) -> bool:
        scraped = _scrape(port)
        if scraped is not None:
            seen.append(scraped)
        return scraped is not None and scraped["samzapy_task_messages_processed_total"] == count

    wait_for(lambda: processed(5), 60, "the first transaction processed", job.proc)
    # The lag is read when scraped: give the fetch that brings the marker its time (a scrape
    # alone can take seconds on a loaded machine; the wait returns once the lag reads 0).
    wait_for(lambda: _scrape(port) == {**seen[-1], "samzapy_partition_lag": 0.0}, 60,
             f"lag 0 after the first transaction (last scrape {seen[-1]})", job.proc)  # fmt: skip
    asyncio.run(_transaction(kafka_bootstrap, source, [b"b%d" % i for i in range(3)]))
    wait_for(lambda: processed(8), 30, "the second transaction processed", job.proc)
    wait_for(lambda: _scrape(port) == {**seen[-1], "samzapy_partition_lag": 0.0}, 60,
             f"lag 0 after the second transaction (last scrape {seen[-1]})", job.proc)  # fmt: skip
    assert job.stop() == 0
