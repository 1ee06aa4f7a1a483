"""Scale-out: three `samzapy run` containers of one job beside one, and the handover time of
a task during a rebalance (kafka-group coordinator, real broker).

One run, same broker, a 12-partition topic of N messages of 100 bytes (default 600,000):

(a) one container runs a pass-through task over the whole topic;
(b) three containers of one job run the same over a topic of the same size.
For (a) and (b) the containers start on an empty topic and the messages are written once the
group is stable (every task has its owner), so the rate is that of steady processing;
(c) handover: two containers are running a fresh job over the topic when a third joins; for
    each task that moved, the time from the revocation (``rebalance_started`` in the old
    owner's log) to the first message of that task's partition processed by its new owner
    (the first output record on that partition after the revocation).

Rates are measured from the first to the last output record's timestamp. On a 2-core
machine shared with the broker, three processes contend for two cores: the ratio says what
the hardware allows, not an ideal.

Usage: python bench/bench_scale.py [--messages N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_kafka import broker, create_topics, fill  # noqa: E402

PARTITIONS = 12


class PassThrough(StreamTask):
    """Each message to the output topic named by BENCH_OUTPUT, same partition."""

    def __init__(self) -> None:
        self.out = SystemStream("kafka", os.environ["BENCH_OUTPUT"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(
            OutgoingMessageEnvelope(
                self.out, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


async def create(bootstrap: str, topic: str) -> None:
    await create_topics(bootstrap, topic, partitions=PARTITIONS)


async def output_times(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """The record timestamps (ms) of every partition of ``topic``."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp, offset in (await consumer.beginning_offsets(tps)).items():
            consumer.seek(tp, offset)
        ends = await consumer.end_offsets(tps)
        times: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for tp, batch in (await consumer.getmany(timeout_ms=500, max_records=20000)).items():
                times[tp.partition].extend(r.timestamp for r in batch)
        return times
    finally:
        await consumer.stop()


async def total(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum((await consumer.end_offsets(tps)).values())
    except Exception:
        return 0
    finally:
        await consumer.stop()


class Container:
    def __init__(self, bootstrap: str, source: str, out: str, job_id: str, log: Path) -> None:
        cfg = {
            "job.name": "bench-scale",
            "job.id": job_id,
            "job.coordinator.session.timeout.ms": 6000,
            "task.class": "bench_scale:PassThrough",
            "task.inputs": [f"kafka.{source}"],
            "task.checkpoint.factory": "kafka",
            "task.commit.ms": 1000,
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.bootstrap.servers": bootstrap,
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            f"streams.{out}.partitions": PARTITIONS,
        }
        path = log.with_suffix(".yaml")
        path.write_text(json.dumps(cfg))
        self.log = log
        self.handle = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", "run", str(path)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "bench"), "BENCH_OUTPUT": out},
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.log.read_text().splitlines() if x.startswith("{")]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.handle.close()


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def held(c: Container) -> int:
    """How many tasks the container holds now, from its latest assignment event."""
    count = 0
    for e in c.events():
        if e["event"] in ("tasks_assigned", "rebalance_completed"):
            count = len(e["tasks"])
        elif e["event"] == "rebalance_started":
            count = 0
    return count


def run_containers(bootstrap: str, n: int, count: int, tmp: Path) -> float:
    """The rate of ``count`` containers once their group is stable: they start on an empty
    topic, and the messages arrive once every task has its owner."""
    source = f"bench-scale-{uuid.uuid4().hex[:6]}"
    out = f"bench-out-{uuid.uuid4().hex[:6]}"
    asyncio.run(create(bootstrap, source))
    asyncio.run(create(bootstrap, out))
    job_id = uuid.uuid4().hex[:8]
    containers = [
        Container(bootstrap, source, out, job_id, tmp / f"{count}-{i}.log") for i in range(count)
    ]
    try:
        wait_until(
            lambda: (
                sum(held(c) for c in containers) == PARTITIONS and all(held(c) for c in containers)
            ),
            120,
            "a stable group",
        )
        asyncio.run(fill(bootstrap, source, n, PARTITIONS))
        wait_until(lambda: asyncio.run(total(bootstrap, out)) >= n, 600, f"{n} outputs")
    finally:
        for c in containers:
            c.stop()
    stamps = [t for ts in asyncio.run(output_times(bootstrap, out)).values() for t in ts]
    return n / max((max(stamps) - min(stamps)) / 1000, 1e-3)


def handover(bootstrap: str, source: str, n: int, tmp: Path) -> list[float]:
    out = f"bench-out-{uuid.uuid4().hex[:6]}"
    asyncio.run(create(bootstrap, out))
    job_id = uuid.uuid4().hex[:8]
    first = [Container(bootstrap, source, out, job_id, tmp / f"h-{i}.log") for i in range(2)]
    third = None
    try:
        wait_until(lambda: asyncio.run(total(bootstrap, out)) >= n // 5, 300, "a fifth done")
        third = Container(bootstrap, source, out, job_id, tmp / "h-2.log")
        wait_until(
            lambda: any(e["event"] == "tasks_assigned" and e["tasks"] for e in third.events()),
            120,
            "the third container's tasks",
        )
        time.sleep(2)
    finally:
        for c in [*first, *([third] if third else [])]:
            c.stop()
    revoked_at: dict[int, float] = {}
    for c in first:
        for e in c.events():
            if e["event"] == "rebalance_started":
                at = datetime.fromisoformat(e["timestamp"]).timestamp()
                for task in e["tasks_revoked"]:
                    revoked_at.setdefault(int(task.split()[-1]), at)
    moved = (
        [
            int(t.split()[-1])
            for e in third.events()
            if e["event"] == "tasks_assigned"
            for t in e["tasks"]
        ]
        if third
        else []
    )
    times = asyncio.run(output_times(bootstrap, out))
    result = []
    for k in moved:
        since = revoked_at.get(k)
        later = [t / 1000 for t in times[k] if since is not None and t / 1000 > since]
        if since is not None and later:
            result.append(min(later) - since)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=600_000)
    args = parser.parse_args()
    n = args.messages - args.messages % PARTITIONS
    with broker() as bootstrap, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_dir:
        tmp = Path(tmp_dir)
        source = f"bench-scale-{uuid.uuid4().hex[:6]}"
        asyncio.run(create(bootstrap, source))
        asyncio.run(fill(bootstrap, source, n, PARTITIONS))
        one = run_containers(bootstrap, n, 1, tmp)
        three = run_containers(bootstrap, n, 3, tmp)
        moves = handover(bootstrap, source, n, tmp)
    print(f"{n:,} messages, {PARTITIONS} partitions, pass-through, kafka-group coordinator")
    print(f"one container          {one:12,.0f} msg/s")
    print(f"three containers       {three:12,.0f} msg/s   ratio {three / one:.2f} (2 cores)")
    if moves:
        print(
            f"handover of a task (revocation -> first message processed by its new owner): "
            f"median {statistics.median(moves) * 1000:,.0f} ms, max {max(moves) * 1000:,.0f} ms "
            f"over {len(moves)} moved tasks"
        )
    else:
        print("handover: no task moved (the third container joined after the input was done)")


if __name__ == "__main__":
    main()
