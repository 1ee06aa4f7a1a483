"""Store snapshots: a restart after kill -9 with and without them, and what they cost.

(1) Restart after kill -9. For a store of K keys (default 100,000 and 1,000,000, over 8
    partitions: 8 tasks of K/8 keys), a `samzapy run` process (``static`` coordinator: a
    ``kafka-group`` member killed with -9 is only replaced once its old session expired,
    ``job.coordinator.session.timeout.ms``) counts an 8-partition topic of K distinct keys
    (RocksDB store, Kafka changelog, Kafka checkpoints every second) until its checkpoint
    covers every message, and is killed with SIGKILL. One new message per partition is
    written, and the job is started again: the time from starting the process to its first
    processed message, split at ``container_started`` (imports, config, connecting) and at the
    last ``store_restored``, with the records the restores replayed. Once with
    ``task.transactional.state.checkpoint.enabled: false`` (the whole changelog is replayed),
    once with it on (the default: the snapshot the checkpoint names is opened).
(2) Cost: the stateful count of bench_state.py (a RocksDB get and put per message on ~100,000
    keys, Kafka changelog) over N messages (default 2,000,000), in this process, with and
    without snapshots, alternating, ``--rounds`` times (default 2), at ``--commit-ms``
    (default 5000: a run lasts about 30 s here, so the default 60 s interval would commit
    never or once and measure nothing but noise). Printed: each rate, the median ratio, the
    commit latency with and without snapshots (a commit with snapshots writes every store's
    memtable out), and the ratio that extra commit time implies at the default interval
    (goal >= 0.9).

The broker comes from SAMZAPY_KAFKA_BOOTSTRAP, or is started with scripts/kafka.sh on a free port
and stopped at the end (bench_kafka's ``broker()``).

Usage: python bench/bench_snapshots.py [--keys 100000,1000000] [--messages N] [--commit-ms MS]
       [--rounds R] [--skip-restart] [--skip-cost]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kafka import PARTITIONS, ROOT, broker, create_topics, end_offsets_total
from bench_state import STORE, Count, fill_keyed

from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.cli.logging import configure_logging
from samzapy.config import ResolvedConfig, load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.container.event_loop import loop_factory
from samzapy.container.gauges import CONTAINER

JOB_NAME = "bench-snapshots"


def count_job(
    bootstrap: str, source: str, changelog: str, base_dir: Path, job_id: str, **extra: Any
) -> dict[str, Any]:
    """bench_state's count of ``source``'s keys as a job's keys (``extra`` added or
    overriding)."""
    return {
        "job.name": JOB_NAME,
        "job.id": job_id,
        "job.logged.store.base.dir": str(base_dir),
        "task.class": "bench_state:Count",
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        f"stores.{STORE}.factory": "rocksdb",
        f"stores.{STORE}.key.serde": "bytes",
        f"stores.{STORE}.msg.serde": "long",
        f"stores.{STORE}.changelog": f"kafka.{changelog}",
        **extra,
    }


def stateful_config(
    bootstrap: str, source: str, changelog: str, base_dir: Path, job_id: str, **extra: Any
) -> ResolvedConfig:
    """bench_state's count as an in-process container's configuration (no progress events)."""
    extra = {"task.progress.interval.ms": -1, **extra}
    cfg = count_job(bootstrap, source, changelog, base_dir, job_id, **extra)
    return resolve(load_config(text=json.dumps(cfg)))


async def timed(container: SamzaContainer, n: int) -> float:
    """Messages per second of ``container`` over ``n`` messages, from its start until
    everything it sent is acknowledged (its metrics stay readable after)."""
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


SNAPSHOTS = "task.transactional.state.checkpoint.enabled"


class FirstCount(Count):
    """bench_state's count; its first processed message writes the time to $BENCH_FIRST."""

    first = True

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if FirstCount.first:
            FirstCount.first = False
            Path(os.environ["BENCH_FIRST"]).write_text(repr(time.time()))
        super().process(envelope, collector, coordinator)


# -- (1) restart after kill -9 --------------------------------------------------------------------


async def checkpointed_total(bootstrap: str, job_id: str) -> int:
    """Messages the job's latest checkpoints cover, over every task."""
    topic = checkpoint_stream_name(JOB_NAME, job_id)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        if not consumer.partitions_for_topic(topic):
            return 0
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        end = (await consumer.end_offsets([tp]))[tp]
        latest: dict[bytes, Any] = {}
        while await consumer.position(tp) < end:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    latest[r.key] = json.loads(r.value) if r.value else None
        return sum(int(o["offset"]) + 1 for doc in latest.values() for o in doc["offsets"])
    finally:
        await consumer.stop()


class Run:
    """One `samzapy run` of the job, its JSON log in a file."""

    def __init__(self, config: Path, log: Path, first: Path) -> None:
        self.log = log
        self.handle = log.open("w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", "run", str(config)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "bench"), "BENCH_FIRST": str(first)},
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        events = (json.loads(x) for x in lines if x.startswith("{"))
        return [e for e in events if e["event"] == name]

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(120)
        self.handle.close()


def wait_until(condition: Any, timeout: float, what: str, run: Run) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if run.proc.poll() is not None:
            raise SystemExit(f"the job exited while waiting for {what}: see {run.log}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}: see {run.log}")
        time.sleep(0.2)


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def restart(bootstrap: str, source: str, snapshots: bool, tmp: Path) -> dict[str, Any]:
    """Count the topic, kill -9 once checkpointed, add a message per partition, restart."""
    job_id = uuid.uuid4().hex[:8]
    cfg = count_job(
        bootstrap,
        source,
        f"bench-snapshots-changelog-{job_id}",
        tmp / f"state-{job_id}",
        job_id,
        **{
            "task.class": "bench_snapshots:FirstCount",
            "task.commit.ms": 1000,
            "job.coordinator.factory": "static",
            SNAPSHOTS: snapshots,
        },
    )
    config = tmp / f"{job_id}.yaml"
    config.write_text(json.dumps(cfg))
    total = asyncio.run(end_offsets_total(bootstrap, source))
    first = Run(config, tmp / f"{job_id}-first.log", tmp / f"{job_id}-first.t")
    wait_until(
        lambda: asyncio.run(checkpointed_total(bootstrap, job_id)) >= total,
        1800,
        "a checkpoint of every message",
        first,
    )
    first.stop(signal.SIGKILL)
    asyncio.run(fill_keyed(bootstrap, source, PARTITIONS, PARTITIONS))
    marker = tmp / f"{job_id}-second.t"
    second = Run(config, tmp / f"{job_id}-second.log", marker)
    wait_until(marker.exists, 600, "the first message after the restart", second)
    while not marker.read_text():
        time.sleep(0.01)
    first_message = float(marker.read_text()) - second.started
    second.stop()
    restored = second.events("store_restored")
    started = second.events("container_started")[0]
    return {
        "records": sum(int(e["records"]) for e in restored),
        "snapshots": sum(1 for e in restored if e["snapshot"]),
        "to_container": _at(started) - second.started,
        "to_restored": max(_at(e) for e in restored) - second.started,
        "to_first": first_message,
    }


def restarts(bootstrap: str, sizes: list[int], tmp: Path) -> None:
    print(
        f"(1) restart after kill -9: {PARTITIONS} tasks, time from process start to "
        "(container started, stores restored, first message processed)"
    )
    for keys in sizes:
        source = f"bench-snapshots-in-{uuid.uuid4().hex[:6]}"
        asyncio.run(create_topics(bootstrap, source))
        asyncio.run(fill_keyed(bootstrap, source, keys, keys))
        for snapshots in (False, True):
            r = restart(bootstrap, source, snapshots, tmp)
            how = "snapshot restore" if snapshots else "full restore    "
            print(
                f"    {keys:>9,} keys  {how}  {r['to_container']:5.2f} s  "
                f"{r['to_restored']:6.2f} s  {r['to_first']:6.2f} s   "
                f"{r['records']:>9,} records replayed, {r['snapshots']} stores from snapshots"
            )


# -- (2) the cost ---------------------------------------------------------------------------------


async def cost_run(config: Any, n: int) -> tuple[float, dict[str, Any]]:
    """Rate over ``n`` messages (until every output is acknowledged), and commit latency."""
    container = SamzaContainer(config, task_factory=Count)
    rate = await timed(container, n)
    return rate, dict(container.metrics.snapshot().get(CONTAINER, {}).get("commit-latency", {}))


async def costs(bootstrap: str, n: int, keys: int, commit_ms: int, rounds: int, tmp: Path) -> None:
    source = f"bench-snapshots-cost-{uuid.uuid4().hex[:6]}"
    await create_topics(bootstrap, source)
    await fill_keyed(bootstrap, source, n, keys)
    print(
        f"(2) cost: stateful count over {n:,} messages, {keys:,} keys, {PARTITIONS} tasks, "
        f"task.commit.ms {commit_ms}"
    )
    rates: dict[bool, list[float]] = {False: [], True: []}
    latency: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for snapshots in (False, True):
            changelog = f"bench-snapshots-changelog-{uuid.uuid4().hex[:6]}"
            config = stateful_config(
                bootstrap,
                source,
                changelog,
                tmp / uuid.uuid4().hex[:6],
                uuid.uuid4().hex[:8],
                **{"task.commit.ms": commit_ms, SNAPSHOTS: snapshots},
            )
            rate, commits = await cost_run(config, n)
            rates[snapshots].append(rate)
            if commits.get("count"):
                latency[snapshots].append(float(commits["mean_ms"]))
            print(
                f"    snapshots {'on ' if snapshots else 'off'}  {rate:>9,.0f} msg/s   "
                f"commits {commits.get('count', 0):>3}, mean {commits.get('mean_ms', 0):7.1f} ms, "
                f"max {commits.get('max_ms', 0):7.1f} ms"
            )
    ratios = [on / off for on, off in zip(rates[True], rates[False], strict=True)]
    print(f"    ratio on/off: median {statistics.median(ratios):.2f} ({len(ratios)} rounds)")
    if latency[True] and latency[False]:
        extra = statistics.median(latency[True]) - statistics.median(latency[False])
        implied = 60_000 / (60_000 + max(extra, 0.0))
        print(
            f"    a commit takes {extra:+.1f} ms with snapshots (every task, all stores): at "
            f"the default 60 s interval that is a ratio of {implied:.4f}"
        )


async def main(args: argparse.Namespace, bootstrap: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-snapshots-") as tmp_dir:
        tmp = Path(tmp_dir)
        if not args.skip_restart:
            await asyncio.to_thread(restarts, bootstrap, args.keys, tmp)
        if not args.skip_cost:
            await costs(bootstrap, args.messages, 100_000, args.commit_ms, args.rounds, tmp)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keys", type=lambda v: [int(k) for k in v.split(",")], default=[100_000, 1_000_000]
    )
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--commit-ms", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-restart", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    ns = parser.parse_args()
    configure_logging("json", "warning")
    factory, _ = loop_factory("uvloop")
    with broker() as bootstrap, asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(ns, bootstrap))
