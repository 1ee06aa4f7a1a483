"""The cost of state: a stateful count beside a pass-through job, and the changelog restore rate.

One run, same broker, an 8-partition topic of N messages of 100 bytes (default 1,000,000) whose
first 8 bytes are one of ~100,000 keys:

(a) samzapy running bench_kafka's sync pass-through task (one output message per input);
(b) samzapy running a stateful count: ``get`` + ``put`` per message on a RocksDB store keyed by
    the message's first 8 bytes, with a Kafka changelog (one changelog record per message) and
    Kafka checkpoints.

Prints both rates and b/a (goal >= 0.6). Then it deletes (b)'s local state and starts (b)'s job
again: the container restores every store from the changelog, up to the offsets (b)'s final
checkpoint recorded (N records over ~100,000 keys), before it processes one new message per
partition. Prints the restore rate in records/s, from the ``store_restored`` events (records,
elapsed_s) and from the wall time between the container's start and its first processed message.

The broker comes from SAMZAPY_KAFKA_BOOTSTRAP, or is started with scripts/kafka.sh on a free port
and stopped at the end (bench_kafka's ``broker()``).

Usage: python bench/bench_state.py [--messages N] [--keys K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kafka import (
    PARTITIONS,
    PAYLOAD,
    broker,
    create_topics,
    end_offsets_total,
    job_config,
    samzapy_loop,
    timed_run,
)

from samzapy import InitableTask, StreamTask
from samzapy.cli.logging import configure_logging
from samzapy.container import SamzaContainer
from samzapy.container.event_loop import loop_factory

JOB_NAME = "bench-state"
STORE = "counts"
KEY_BYTES = 8


class Count(InitableTask, StreamTask):
    """(b): counts messages per key (the first 8 bytes) in the store ``counts``."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        key = envelope.message[:KEY_BYTES]
        store = self.store
        store.put(key, (store.get(key) or 0) + 1)


class EventSink:
    """The log stream: keeps the store events, passes warnings and errors on to stderr."""

    def __init__(self) -> None:
        self.restored: list[dict[str, Any]] = []

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            if event.get("event") == "store_restored":
                self.restored.append(event)
            elif event.get("level") in ("warning", "error", "critical"):
                print(line, file=sys.stderr)
        return len(text)

    def flush(self) -> None:
        pass


def keyed_message(i: int, keys: int) -> bytes:
    """100 bytes, the first 8 being key ``i % keys`` in decimal."""
    return b"%08d" % (i % keys) + PAYLOAD[KEY_BYTES:]


async def fill_keyed(bootstrap: str, topic: str, n: int, keys: int) -> None:
    """Like bench_kafka's ``fill``, with message ``i`` on partition ``i % 8``: each partition
    gets its own ``keys / 8`` keys (when 8 divides ``keys``)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        futures = []
        for p in range(PARTITIONS):
            batch = producer.create_batch()
            for i in range(p, n, PARTITIONS):
                value = keyed_message(i, keys)
                if batch.append(key=None, value=value, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=None, value=value, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def stateful_config(
    bootstrap: str, source: str, changelog: str, base_dir: Path, job_id: str, **extra: Any
) -> Any:
    return job_config(
        bootstrap,
        source,
        "unused",
        **{
            "job.name": JOB_NAME,
            "job.id": job_id,
            "job.logged.store.base.dir": str(base_dir),
            "task.class": "bench_state:Count",
            "task.checkpoint.factory": "kafka",
            f"stores.{STORE}.factory": "rocksdb",
            f"stores.{STORE}.key.serde": "bytes",
            f"stores.{STORE}.msg.serde": "long",
            f"stores.{STORE}.changelog": f"kafka.{changelog}",
            **extra,
        },
    )


async def stateful_loop(config: Any, n: int) -> float:
    """(b): timed like bench_kafka's (b), until every changelog record is acknowledged."""
    return await timed_run(config, Count, n)


async def restore(config: Any, sink: EventSink) -> tuple[int, float, float]:
    """Runs the job until it has processed one message per partition after its restore:
    (records restored, sum of the stores' restore times, container start to first message)."""
    sink.restored.clear()
    container = SamzaContainer(config, task_factory=Count)
    start = time.perf_counter()
    job = asyncio.ensure_future(container.run())
    while container.processed < 1:
        if job.done():
            job.result()
        await asyncio.sleep(0.005)
    first = time.perf_counter() - start
    while container.processed < PARTITIONS:
        if job.done():
            job.result()
        await asyncio.sleep(0.01)
    container.request_stop("benchmark done")
    await job
    records = sum(int(e["records"]) for e in sink.restored)
    return records, sum(float(e["elapsed_s"]) for e in sink.restored), first


async def main(args: argparse.Namespace, bootstrap: str, sink: EventSink) -> None:
    run = uuid.uuid4().hex[:6]
    source, out_a = f"bench-state-in-{run}", f"bench-state-out-a-{run}"
    changelog = f"bench-state-changelog-{run}"
    await create_topics(bootstrap, source, out_a)
    t0 = time.perf_counter()
    await fill_keyed(bootstrap, source, args.messages, args.keys)
    n = await end_offsets_total(bootstrap, source)
    print(
        f"broker {bootstrap}: {n:,} messages of {len(PAYLOAD)} bytes over {PARTITIONS} "
        f"partitions, {min(args.keys, n):,} keys, filled in {time.perf_counter() - t0:.1f} s"
    )
    base_dir = Path(tempfile.mkdtemp(prefix="samzapy-bench-state-"))
    try:
        a = await samzapy_loop(bootstrap, source, out_a, n)
        print(f"(a) samzapy, sync pass-through task              {a:>10,.0f} msg/s")
        config = stateful_config(bootstrap, source, changelog, base_dir, uuid.uuid4().hex[:8])
        b = await stateful_loop(config, n)
        print(f"(b) samzapy, RocksDB count + Kafka changelog     {b:>10,.0f} msg/s")
        print(f"    ratio b/a {b / a:.2f}   (goal >= 0.60)")

        changelog_records = await end_offsets_total(bootstrap, changelog)
        shutil.rmtree(base_dir / JOB_NAME)
        await fill_keyed(bootstrap, source, PARTITIONS, args.keys)
        records, store_seconds, first = await restore(config, sink)
        print(
            f"restore of the deleted stores from a {changelog_records:,}-record changelog: "
            f"{records:,} records"
        )
        if store_seconds > 0:
            print(
                f"    store_restored events: {store_seconds:.2f} s in all, "
                f"{records / store_seconds:>10,.0f} records/s"
            )
        print(
            f"    container start to first message: {first:.2f} s, "
            f"{records / first:>10,.0f} records/s"
        )
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    ns = parser.parse_args()
    # Info level, so that the store_restored events reach the sink; the job logs little else
    # (bench_kafka's job_config turns the progress events off).
    events = EventSink()
    configure_logging("json", "info", stream=events)  # type: ignore[arg-type]
    factory, _ = loop_factory("uvloop")
    with broker() as bootstrap, asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(ns, bootstrap, events))
