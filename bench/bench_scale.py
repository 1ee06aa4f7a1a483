"""Scale-out: three `samzapy run` containers of one job beside one, and what a rebalance costs
the tasks that move and those that do not (kafka-group coordinator, real broker).

One run, same broker, a 12-partition topic of N messages of 100 bytes (default 600,000):

(a) one container runs a pass-through task over the whole topic;
(b) three containers of one job run the same over a topic of the same size.
For (a) and (b) the containers start on an empty topic and the messages are written once the
group is stable (every task has its owner), so the rate is that of steady processing;
(c) a join: two containers run a pass-through job over a topic a producer writes at a steady
    rate (default 12,000 msg/s) when a third joins. The join lasts from the first
    ``rebalance_started`` of the two to the newcomer's ``rebalance_completed`` with its tasks
    running. Printed: the output rate of the tasks that did not move during the join beside
    their rate in the 5 s before it (goal >= 0.8), and the pause of each moved task (the
    longest gap in its output around the join, and the ``paused_ms`` its new owner logged).

Rates are measured from output record timestamps. On a 2-core machine shared with the broker,
three processes contend for two cores: the ratio says what the hardware allows, not an ideal.

Usage: python bench/bench_scale.py [--messages N] [--rate R]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_kafka import PAYLOAD, broker, create_topics, fill  # noqa: E402

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
    def __init__(
        self,
        bootstrap: str,
        source: str,
        out: str,
        job_id: str,
        log: Path,
        extra: dict[str, Any] | None = None,
    ) -> None:
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
            **(extra or {}),
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


class Feeder(threading.Thread):
    """Writes 100-byte messages round-robin over the partitions, ``rate`` a second."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.servers, self.topic, self.rate = bootstrap, topic, rate
        self.halt = threading.Event()

    def run(self) -> None:
        asyncio.run(self._feed())

    async def _feed(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.servers, linger_ms=5)
        await producer.start()
        try:
            started, sent = time.monotonic(), 0
            while not self.halt.is_set():
                due = int((time.monotonic() - started) * self.rate)
                futures = [
                    await producer.send(self.topic, PAYLOAD, partition=i % PARTITIONS)
                    for i in range(sent, due)
                ]
                await asyncio.gather(*futures)
                sent = due
                await asyncio.sleep(0.01)
        finally:
            await producer.stop()


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def join(bootstrap: str, rate: int, tmp: Path) -> dict[str, Any]:
    """(c): two containers at a steady input rate, then a third joins."""
    source = f"bench-scale-{uuid.uuid4().hex[:6]}"
    out = f"bench-out-{uuid.uuid4().hex[:6]}"
    asyncio.run(create(bootstrap, source))
    asyncio.run(create(bootstrap, out))
    job_id = uuid.uuid4().hex[:8]
    first = [Container(bootstrap, source, out, job_id, tmp / f"j-{i}.log") for i in range(2)]
    third = None
    feeder = Feeder(bootstrap, source, rate)
    try:
        wait_until(lambda: sorted(held(c) for c in first) == [6, 6], 120, "two containers")
        feeder.start()
        time.sleep(8)
        third = Container(bootstrap, source, out, job_id, tmp / "j-2.log")
        wait_until(
            lambda: any(e["event"] == "rebalance_completed" for e in third.events()),
            120,
            "the third container's tasks",
        )
        time.sleep(3)
    finally:
        feeder.halt.set()
        feeder.join(30)
        time.sleep(3)
        for c in [*first, *([third] if third else [])]:
            c.stop()
    assert third is not None
    came = next(e for e in third.events() if e["event"] == "rebalance_completed")
    moved = [int(t.split()[-1]) for t in came["tasks_added"]]
    joined_at = _at(next(e for e in third.events() if e["event"] == "tasks_assigned"))
    start = min(
        _at(e)
        for c in first
        for e in c.events()
        if e["event"] == "rebalance_started"
        if _at(e) >= joined_at - 1
    )
    end = _at(came)
    times = asyncio.run(output_times(bootstrap, out))
    kept = [p for p in range(PARTITIONS) if p not in moved]

    def kept_rate(since: float, until: float) -> float:
        count = sum(1 for p in kept for t in times[p] if since <= t / 1000 < until)
        return count / (until - since)

    pauses = []
    for p in moved:
        around = sorted(t / 1000 for t in times[p] if start - 2 <= t / 1000 <= end + 2)
        pauses.append(max(b - a for a, b in itertools.pairwise(around)))
    return {
        "window": end - start,
        "steady": kept_rate(start - 5, start),
        "during": kept_rate(start, end),
        "pauses": pauses,
        "logged": list(came["paused_ms"].values()),
        "kept": len(kept),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=600_000)
    parser.add_argument("--rate", type=int, default=12_000)
    args = parser.parse_args()
    n = args.messages - args.messages % PARTITIONS
    with broker() as bootstrap, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_dir:
        tmp = Path(tmp_dir)
        source = f"bench-scale-{uuid.uuid4().hex[:6]}"
        asyncio.run(create(bootstrap, source))
        asyncio.run(fill(bootstrap, source, n, PARTITIONS))
        one = run_containers(bootstrap, n, 1, tmp)
        three = run_containers(bootstrap, n, 3, tmp)
        joined = join(bootstrap, args.rate, tmp)
    print(f"{n:,} messages, {PARTITIONS} partitions, pass-through, kafka-group coordinator")
    print(f"one container          {one:12,.0f} msg/s")
    print(f"three containers       {three:12,.0f} msg/s   ratio {three / one:.2f} (2 cores)")
    print(
        f"a third container joins two at {args.rate:,} msg/s: the join took "
        f"{joined['window']:.2f} s; the {joined['kept']} tasks that stayed put processed "
        f"{joined['during']:,.0f} msg/s during it, {joined['steady']:,.0f} msg/s in the 5 s "
        f"before (ratio {joined['during'] / joined['steady']:.2f}, goal >= 0.8)"
    )
    pauses, logged = joined["pauses"], joined["logged"]
    print(
        f"moved tasks ({len(pauses)}): longest gap in their output median "
        f"{statistics.median(pauses) * 1000:,.0f} ms, max {max(pauses) * 1000:,.0f} ms; "
        f"paused_ms logged by the new owner median {statistics.median(logged):,.0f} ms"
    )


if __name__ == "__main__":
    main()
