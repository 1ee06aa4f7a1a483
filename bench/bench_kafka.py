"""Consume -> produce over a real Kafka broker: samzapy beside a plain aiokafka loop.

One run, same broker, an 8-partition topic of N messages of 100 bytes (default 1,000,000):

(a) a plain aiokafka loop written as well as we can: one assigned consumer, ``getmany`` in
    large batches, and per-partition ``create_batch`` / ``send_batch`` on an idempotent
    ``acks=all`` producer: the practical ceiling;
(b) samzapy running a sync pass-through task (same partition out as in) on the same topic.

Prints both rates and b/a (goal >= 0.8), then end-to-end latency (p50/p99) of samzapy at a
fixed input rate of half the measured maximum. The broker comes from SAMZAPY_KAFKA_BOOTSTRAP,
or is started with scripts/kafka.sh on a free port and stopped at the end.

Usage: python bench/bench_kafka.py [--messages N] [--latency-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.cli.logging import configure_logging
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.container.event_loop import loop_factory

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 8
PAYLOAD = b"x" * 100


@contextlib.contextmanager
def broker() -> Iterator[str]:
    existing = os.environ.get("SAMZAPY_KAFKA_BOOTSTRAP")
    if existing:
        yield existing
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "KAFKA_PORT": str(port),
        "KAFKA_CONTROLLER_PORT": str(port + 1),
        "SAMZAPY_KAFKA_DIR": tempfile.mkdtemp(prefix="samzapy-bench-kafka-"),
    }
    script = str(ROOT / "scripts" / "kafka.sh")
    subprocess.run([script, "up"], env=env, check=True, stdout=subprocess.DEVNULL)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([script, "down"], env=env, check=False, stdout=subprocess.DEVNULL)


async def create_topics(bootstrap: str, *names: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        await admin.close()


async def fill(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        futures = []
        per = n // partitions
        for p in range(partitions):
            batch = producer.create_batch()
            for _ in range(per):
                if batch.append(key=None, value=PAYLOAD, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=None, value=PAYLOAD, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def end_offsets_total(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


async def plain_loop(bootstrap: str, source: str, sink: str, n: int) -> float:
    """(a): getmany + per-partition batches, idempotent acks=all producer."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, max_partition_fetch_bytes=4 << 20
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    await consumer.start()
    await producer.start()
    try:
        consumer.assign([TopicPartition(source, p) for p in range(PARTITIONS)])
        await consumer.seek_to_beginning()
        seen = 0
        pending = []
        start = time.perf_counter()
        while seen < n:
            records = await consumer.getmany(timeout_ms=200, max_records=10_000)
            for tp, batch_records in records.items():
                batch = producer.create_batch()
                for r in batch_records:
                    if batch.append(key=r.key, value=r.value, timestamp=None) is None:
                        pending.append(
                            await producer.send_batch(batch, sink, partition=tp.partition)
                        )
                        batch = producer.create_batch()
                        batch.append(key=r.key, value=r.value, timestamp=None)
                pending.append(await producer.send_batch(batch, sink, partition=tp.partition))
                seen += len(batch_records)
        await asyncio.gather(*pending)
        return n / (time.perf_counter() - start)
    finally:
        await consumer.stop()
        await producer.stop()


class PassThrough(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(
            OutgoingMessageEnvelope(
                SINK, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


SINK = SystemStream("kafka", "unset")


def job_config(bootstrap: str, source: str, sink: str, **extra: Any) -> Any:
    cfg = {
        "job.name": "bench-kafka",
        "job.id": uuid.uuid4().hex[:8],
        "task.class": "bench_kafka:PassThrough",
        "task.inputs": [f"kafka.{source}"],
        "task.progress.interval.ms": -1,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        **extra,
    }
    return resolve(load_config(text=json.dumps(cfg)))


async def samzapy_loop(bootstrap: str, source: str, sink: str, n: int) -> float:
    """(b): the same work as a samzapy job; timed until every output is acknowledged."""
    global SINK
    SINK = SystemStream("kafka", sink)
    return await timed_run(job_config(bootstrap, source, sink), PassThrough, n)


async def timed_run(config: Any, task_factory: Any, n: int) -> float:
    """Messages per second of a container processing ``n`` messages, timed from its start
    until everything it sent is acknowledged."""
    return await timed(SamzaContainer(config, task_factory=task_factory), n)


async def timed(container: SamzaContainer, n: int) -> float:
    """``timed_run`` of a container already built (its metrics stay readable after)."""
    job = asyncio.ensure_future(container.run())
    start = time.perf_counter()
    while container.processed < n:
        if job.done():
            job.result()
        await asyncio.sleep(0.01)
    await container.flush()
    elapsed = time.perf_counter() - start
    container.request_stop("benchmark done")
    await job
    return n / elapsed


async def latency(
    bootstrap: str, rate: float, seconds: float, *, committed: bool = False, **extra: Any
) -> tuple[float, float, int]:
    """samzapy's end-to-end latency (produce -> job -> consumed) at a fixed input rate;
    ``committed``: the reader reads ``read_committed``; ``extra``: more job keys."""
    source, sink = f"lat-in-{uuid.uuid4().hex[:6]}", f"lat-out-{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, source, sink)
    global SINK
    SINK = SystemStream("kafka", sink)
    container = SamzaContainer(
        job_config(bootstrap, source, sink, **{"task.commit.ms": 1000, **extra}),
        task_factory=PassThrough,
    )
    job = asyncio.ensure_future(container.run())
    reader = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks=1)
    await reader.start()
    await producer.start()
    reader.assign([TopicPartition(sink, p) for p in range(PARTITIONS)])
    await reader.seek_to_beginning()
    await asyncio.sleep(2.0)  # let the job start and position its consumer
    total = int(rate * seconds)
    latencies: list[float] = []

    async def read() -> None:
        while len(latencies) < total:
            for records in (await reader.getmany(timeout_ms=200)).values():
                now = time.time()
                latencies.extend(now - float(r.value.split(b"|")[0]) for r in records)

    reading = asyncio.ensure_future(read())
    # Load in 5 ms ticks, each sent as per-partition batches, so the generator itself stays
    # cheap and on schedule; every message carries its send time.
    start = time.perf_counter()
    sent, tick = 0, 0
    pending = []
    while sent < total:
        tick += 1
        due = min(total, int(rate * tick * 0.005))
        batches = [producer.create_batch() for _ in range(PARTITIONS)]
        stamp = f"{time.time():.6f}|".encode()
        for i in range(sent, due):
            p = i % PARTITIONS
            if batches[p].append(key=None, value=stamp + PAYLOAD[:80], timestamp=None) is None:
                pending.append(await producer.send_batch(batches[p], source, partition=p))
                batches[p] = producer.create_batch()
                batches[p].append(key=None, value=stamp + PAYLOAD[:80], timestamp=None)
        for p, batch in enumerate(batches):
            pending.append(await producer.send_batch(batch, source, partition=p))
        sent = due
        delay = start + tick * 0.005 - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
    await asyncio.gather(*pending)
    await asyncio.wait_for(reading, 60)
    await producer.stop()
    await reader.stop()
    container.request_stop("benchmark done")
    await job
    latencies.sort()
    return (
        latencies[len(latencies) // 2] * 1000,
        latencies[int(len(latencies) * 0.99)] * 1000,
        total,
    )


async def main(args: argparse.Namespace, bootstrap: str) -> None:
    run = uuid.uuid4().hex[:6]
    source, out_a, out_b = f"bench-in-{run}", f"bench-out-a-{run}", f"bench-out-b-{run}"
    await create_topics(bootstrap, source, out_a, out_b)
    t0 = time.perf_counter()
    await fill(bootstrap, source, args.messages)
    n = await end_offsets_total(bootstrap, source)
    print(
        f"broker {bootstrap}: {n:,} messages of {len(PAYLOAD)} bytes over {PARTITIONS} "
        f"partitions, filled in {time.perf_counter() - t0:.1f} s"
    )
    a = await plain_loop(bootstrap, source, out_a, n)
    b = await samzapy_loop(bootstrap, source, out_b, n)
    print(f"(a) plain aiokafka loop (getmany + send_batch)  {a:>10,.0f} msg/s")
    print(f"(b) samzapy, sync pass-through task             {b:>10,.0f} msg/s")
    print(f"    ratio b/a {b / a:.2f}   (goal >= 0.80)")
    rate = b / 2
    p50, p99, count = await latency(bootstrap, rate, args.latency_seconds)
    print(
        f"latency at {rate:,.0f} msg/s (half of (b)), {count:,} messages: "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    ns = parser.parse_args()
    configure_logging("console", "warning")
    sys.path.insert(0, str(Path(__file__).parent))
    factory, _ = loop_factory("uvloop")
    with broker() as bootstrap, asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(ns, bootstrap))
