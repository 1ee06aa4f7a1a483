"""A send the broker refuses, on the real broker (README, "Kafka"): "a failed send stops the
job before anything after it is checkpointed (``task.drop.producer.errors: true`` logs and
counts it instead)".

The output topic takes records of at most 2 KiB (``max.message.bytes``) and one input message
makes a 4 KiB output record: the broker refuses its batch (MESSAGE_TOO_LARGE), for good.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from structlog.testing import capture_logs

from samzapy.api.errors import StreamSystemError
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.container import SamzaContainer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from kafka_jobs import Tag  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    _config,
    _processed,
    _run_until,
    create_topic,
    name,
    produce,
    read_all,
)

MESSAGES, BIG = 40, 25  # the input's messages; the offset of the one whose output is refused


async def _small_records_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": "2048"})]
        )
    finally:
        await admin.close()


async def _checkpointed(bootstrap: str, job_id: str) -> int | None:
    """The last checkpointed (last processed) offset of the input's partition 0, if any."""
    latest = None
    for record in await read_all(bootstrap, checkpoint_stream_name("kafka-it", job_id)):
        doc = json.loads(record.value) if record.value else {}
        for entry in doc.get("offsets", []):
            latest = int(entry["offset"])
    return latest


async def test_a_refused_send_stops_the_job_before_its_checkpoint_or_is_dropped_and_counted(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = name("in"), name("out")
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    await create_topic(kafka_bootstrap, source, 1)
    await _small_records_topic(kafka_bootstrap, out)
    values = [os.urandom(2048).hex() if i == BIG else f"v{i}" for i in range(MESSAGES)]
    await produce(kafka_bootstrap, source, [(0, None, v.encode()) for v in values])
    job_id = uuid.uuid4().hex[:8]
    extra = {
        "job_id": job_id,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        "task.commit.ms": 50,
    }

    # The job stops, naming the topic; its checkpoint never covers the refused message.
    for _run in range(2):  # and a restart does not skip it: it fails the same way
        failing = SamzaContainer(_config(kafka_bootstrap, source, **extra), task_factory=Tag)
        with pytest.raises(StreamSystemError, match=out):
            await failing.run()
        at = await _checkpointed(kafka_bootstrap, job_id)
        assert at is None or at < BIG, at

    # task.drop.producer.errors: the job goes on, and counts what it lost.
    dropping = SamzaContainer(
        _config(kafka_bootstrap, source, **extra, **{"task.drop.producer.errors": True}),
        task_factory=Tag,
    )
    start = (await _checkpointed(kafka_bootstrap, job_id) or -1) + 1
    with capture_logs() as logs:
        await _run_until(dropping, lambda: _processed(dropping) >= MESSAGES - start)
    assert await _checkpointed(kafka_bootstrap, job_id) == MESSAGES - 1
    written = {json.loads(r.value)["o"] for r in await read_all(kafka_bootstrap, out)}
    assert BIG not in written
    lost = MESSAGES - len(written)  # the refused batch: the big record and those beside it
    errors = dropping.metrics.snapshot()["container"]["producer-errors"]
    assert errors == lost, (errors, sorted(set(range(MESSAGES)) - written))
    dropped = [e for e in logs if e["event"] == "producer_errors_dropped"]
    assert dropped and all(e["log_level"] == "warning" for e in dropped), dropped
    assert sum(e["messages"] for e in dropped) == lost, dropped
