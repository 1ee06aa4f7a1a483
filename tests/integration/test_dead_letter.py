"""task.drop.process.errors and task.dead.letter.stream on the real broker, in-process.

A task raises on every message whose value is ``poison``. With the policy on, the rest is
processed once, each poison message (and one record the JSON serde cannot read) is in the
dead-letter topic byte for byte with its own headers and those naming its error, the
``process-errors`` metric counts them, and the checkpoint is past them: a restart reads
nothing again. Under exactly-once the dead letters commit with the offsets past them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import checkpointed, create_topic, name, read_all  # noqa: E402

PARTITIONS = 2
PER_PARTITION = 60
BAD_JSON = b"{not json"


class PoisonForward(StreamTask):
    """Forwards each message's value to the topic ``out``; raises on ``poison``."""

    def __init__(self, out: str = "out") -> None:
        self.out = SystemStream("kafka", out)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message == "poison":
            raise ValueError("poison is not food")
        collector.send(
            OutgoingMessageEnvelope(
                self.out,
                envelope.message,
                key=envelope.key,
                partition=envelope.system_stream_partition.partition,
            )
        )


def inputs() -> list[tuple[int, bytes, bytes, list[tuple[str, bytes]]]]:
    """(partition, key, value, headers): every 7th value poison, one record not JSON."""
    items = []
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            value = b'"poison"' if i % 7 == 3 else json.dumps(f"v{p}-{i}").encode()
            if p == 1 and i == 10:
                value = BAD_JSON
            items.append((p, f"k{p}-{i}".encode(), value, [("trace", f"t{p}-{i}".encode())]))
    return items


async def produce_with_headers(bootstrap: str, topic: str, items: list[Any]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=10)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, v, key=k, partition=p, headers=h) for p, k, v, h in items
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def config(bootstrap: str, source: str, out: str, dlq: str, job_id: str, **extra: Any) -> Any:
    cfg = {
        "job.name": "dead-letter-it",
        "job.id": job_id,
        "task.class": "test_dead_letter:PoisonForward",
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 300,
        "task.drop.process.errors": True,
        "task.drop.deserialization.errors": True,
        "task.dead.letter.stream": f"kafka.{dlq}",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        f"streams.{source}.samza.system": "kafka",
        f"streams.{source}.samza.msg.serde": "json",
        f"streams.{out}.samza.system": "kafka",
        f"streams.{out}.samza.msg.serde": "json",
        **extra,
    }
    return resolve(load_config(text=json.dumps(cfg)))


async def run_until_processed(container: SamzaContainer, count: int, limit: float = 90) -> None:
    job = asyncio.ensure_future(container.run())
    deadline = time.monotonic() + limit
    while container.processed < count:
        if job.done():
            job.result()
            raise AssertionError("the job ended early")
        assert time.monotonic() < deadline, f"processed {container.processed} of {count}"
        await asyncio.sleep(0.05)
    container.request_stop("test done")
    await job


async def run_job(
    bootstrap: str, exactly_once: bool = False
) -> tuple[list[Any], list[Any], SamzaContainer, Any]:
    source, out, dlq = name("in"), name("out"), name("dlq")
    await create_topic(bootstrap, source, PARTITIONS)
    await create_topic(bootstrap, out, PARTITIONS)
    items = inputs()
    await produce_with_headers(bootstrap, source, items)
    extra: dict[str, Any] = {}
    if exactly_once:
        extra = {"task.processing.guarantee": "exactly-once"}
    job_id = uuid.uuid4().hex[:8]
    cfg = config(bootstrap, source, out, dlq, job_id, **extra)
    container = SamzaContainer(cfg, task_factory=lambda: PoisonForward(out))
    # Every record but the undeserializable one reaches the task (the dropped ones count).
    await run_until_processed(container, len(items) - 1)
    # A restart resumes after the checkpoint: nothing is read (or dead-lettered) again.
    again = SamzaContainer(cfg, task_factory=lambda: PoisonForward(out))
    job = asyncio.ensure_future(again.run())
    while not again.started.is_set():
        assert not job.done(), job.result()
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)
    again.request_stop("test done")
    await job
    assert again.processed == 0
    return items, [source, out, dlq], container, cfg


def check_dead_letters(letters: list[Any], items: list[Any], source: str) -> None:
    poison = [(p, k, v, h) for p, k, v, h in items if v in (b'"poison"', BAD_JSON)]
    assert len(letters) == len(poison)
    by_key = {r.key: r for r in letters}
    offsets = {}
    for p in range(PARTITIONS):
        in_partition = [k for q, k, _, _ in items if q == p]
        offsets.update({k: i for i, k in enumerate(in_partition)})
    for p, key, value, headers in poison:
        record = by_key[key]
        assert record.value == value, "byte for byte"
        got = dict(record.headers)
        assert list(record.headers)[: len(headers)] == headers, "the input's headers first"
        assert got["samzapy.stream"] == f"kafka.{source}".encode()
        assert got["samzapy.partition"] == str(p).encode()
        assert got["samzapy.offset"] == str(offsets[key]).encode()
        assert got["samzapy.task"] == f"Partition {p}".encode()
        assert int(got["samzapy.time"]) > 0
        if value == BAD_JSON:
            assert got["samzapy.dropped.by"] == b"task.drop.deserialization.errors"
            assert got["samzapy.error.type"] == b"samzapy.api.errors.SerdeError"
        else:
            assert got["samzapy.dropped.by"] == b"task.drop.process.errors"
            assert got["samzapy.error"] == b"poison is not food"
            assert got["samzapy.error.type"] == b"ValueError"


def check_outputs(outputs: list[Any], items: list[Any]) -> None:
    good = [v for _, _, v, _ in items if v not in (b'"poison"', BAD_JSON)]
    assert sorted(r.value for r in outputs) == sorted(good), "the rest processed once"


def last_checkpoints(bootstrap: str, cfg: Any, tmp_path: Path, exactly_once: bool) -> Any:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"job.name": cfg.job.name, "job.id": cfg.job.id}))
    return checkpointed(bootstrap, job, exactly_once=exactly_once)


async def test_poison_messages_go_to_the_dead_letter_and_the_job_goes_on(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    items, (source, out, dlq), container, cfg = await run_job(kafka_bootstrap)
    checkpoints = await asyncio.to_thread(last_checkpoints, kafka_bootstrap, cfg, tmp_path, False)
    assert checkpoints == {p: PER_PARTITION - 1 for p in range(PARTITIONS)}
    check_outputs(await read_all(kafka_bootstrap, out), items)
    check_dead_letters(await read_all(kafka_bootstrap, dlq), items, source)
    poison = sum(1 for _, _, v, _ in items if v == b'"poison"')
    snapshot = container.metrics.snapshot()["container"]
    assert snapshot["process-errors"] == poison
    assert snapshot["deserialization-errors"] == 1


async def test_under_exactly_once_dead_letters_commit_with_their_offsets(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    items, (source, out, dlq), _, cfg = await run_job(kafka_bootstrap, exactly_once=True)
    check_outputs(await read_all(kafka_bootstrap, out, committed=True), items)
    check_dead_letters(await read_all(kafka_bootstrap, dlq, committed=True), items, source)
    checkpoints = await asyncio.to_thread(last_checkpoints, kafka_bootstrap, cfg, tmp_path, True)
    assert checkpoints == {p: PER_PARTITION - 1 for p in range(PARTITIONS)}


class SendsThenFails(PoisonForward):
    """Sends each value, then raises on ``poison``: what it sent stays sent."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(self.out, envelope.message, key=envelope.key))
        if envelope.message == "poison":
            raise ValueError("poison is not food")


async def test_under_exactly_once_a_dropped_message_s_sends_commit_with_its_dead_letter(
    kafka_bootstrap: str,
) -> None:
    """docs/configuration.md: a dropped message's sends are not taken back; under exactly-once
    they commit in the transaction of its dead letter."""
    source, out, dlq = name("in"), name("out"), name("dlq")
    await create_topic(kafka_bootstrap, source, 1)
    await create_topic(kafka_bootstrap, out, 1)
    items = [(0, f"k{i}".encode(), b'"poison"' if i == 2 else b'"v"', []) for i in range(4)]
    await produce_with_headers(kafka_bootstrap, source, items)
    extra = {"task.processing.guarantee": "exactly-once"}
    cfg = config(kafka_bootstrap, source, out, dlq, uuid.uuid4().hex[:8], **extra)
    container = SamzaContainer(cfg, task_factory=lambda: SendsThenFails(out))
    await run_until_processed(container, len(items))
    sent = await read_all(kafka_bootstrap, out, committed=True)
    assert sorted(r.key for r in sent) == [b"k0", b"k1", b"k2", b"k3"]
    (letter,) = await read_all(kafka_bootstrap, dlq, committed=True)
    assert (letter.key, letter.value) == (b"k2", b'"poison"')
