"""Failover of a stateful task with and without a standby replica, and what a standby costs.

(1) Failover. A 2-partition topic holds K distinct keys on partition 0 (default 100,000 and
    1,000,000) and a few on partition 1. Two kafka-group `samzapy run` processes (each with a
    state directory of its own: two hosts) count them (bench_state's count: RocksDB store,
    Kafka changelog, checkpoints every second): the first owns ``Partition 0`` and its K-key
    store, the second ``Partition 1`` and, with ``job.standbytasks.replication.factor: 2``, a
    standby of ``Partition 0``. Once every message is checkpointed (and the standby has
    reached the checkpoint, as the second's ``/readyz`` says), the first is killed with -9
    and 1,000 messages are written to partition 0. Printed: the time from the survivor
    noticing the death (its ``rebalance_started`` log event) to the first message its new
    ``Partition 0`` processes, split at ``store_restored``, with the records the restore
    replayed; without a standby (factor 1) the survivor replays the whole changelog.
    Goal: <= 2 s with a standby, whatever K.
(2) Cost. Both processes count N messages (default 1,000,000, half per partition, 100,000 keys
    each) with and without standbys (each process then also keeps the other's task's store
    current from its changelog, on the same event loop), alternating, ``--rounds`` times:
    the messages per second over both and the two processes' CPU time per message over the
    same span (read from /proc while they run), and the median ratios with/without (goal
    >= 0.95 of the rate). A standby replays what its task checkpointed, a commit behind, so
    part of its work falls after that span: the CPU time is also read until all the work was
    done (every message checkpointed and, with standbys, each standby's replay at its
    changelog's end), and the median difference is the standbys' whole work per message.

(3) Cost to the active alone, the standby on a core of its own (Linux CPU affinity): the
    stand-in, on this 2-core machine, for a standby on another host. Two processes split the
    2-partition topic as in (1), the first owning ``Partition 0``, the second ``Partition 1``
    (which gets no messages) and, with standbys, a standby of ``Partition 0``; the first is
    pinned to CPU 0, and the second, the broker and this script (which writes the N
    messages to partition 0 once the split is done) to CPU 1. Printed: the first process's
    rate and CPU time per message from the end of that writing (a backlog, worked through
    at its own pace) to its last message, with and without the standby, alternating, and
    the median ratios (goal >= 0.95 of the rate). Each run with a standby checks that it
    replayed the changelog to its end.

The broker comes from SAMZAPY_KAFKA_BOOTSTRAP, or is started with scripts/kafka.sh on a free port
and stopped at the end (bench_kafka's ``broker()``).

Usage: python bench/bench_failover.py [--keys 100000,1000000] [--messages N] [--rounds R]
       [--skip-failover] [--skip-cost] [--skip-isolated]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kafka import PAYLOAD, ROOT, broker, create_topics
from bench_snapshots import checkpointed_total, count_job
from bench_state import KEY_BYTES, Count

TOPIC_PARTITIONS = 2


class FirstCount(Count):
    """bench_state's count; each task instance's first message appends ``<partition>
    <time>`` to $BENCH_FIRST."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if not getattr(self, "noted", False):
            self.noted = True
            with open(os.environ["BENCH_FIRST"], "a") as out:
                out.write(f"{envelope.system_stream_partition.partition} {time.time()!r}\n")
        super().process(envelope, collector, coordinator)


async def fill(bootstrap: str, topic: str, partition: int, n: int, keys: int, start: int) -> None:
    """``n`` 100-byte messages on ``partition``, message i with key ``(start + i) % keys``."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        futures = []
        batch = producer.create_batch()
        for i in range(start, start + n):
            value = b"%08d" % (i % keys) + PAYLOAD[KEY_BYTES:]
            if batch.append(key=None, value=value, timestamp=None) is None:
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                batch = producer.create_batch()
                batch.append(key=None, value=value, timestamp=None)
        futures.append(await producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    """One `samzapy run` of the job, its JSON log in a file, a Prometheus port of its own."""

    def __init__(self, cfg: dict[str, Any], tmp: Path, name: str) -> None:
        self.port = free_port()
        cfg = {**cfg, "metrics.reporters": ["prometheus"], "metrics.prometheus.port": self.port}
        config = tmp / f"{name}.yaml"
        config.write_text(json.dumps(cfg))
        self.log = tmp / f"{name}.log"
        self.first = tmp / f"{name}.first"
        self.handle = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", "run", str(config)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "bench"), "BENCH_FIRST": str(self.first)},
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        events = (json.loads(x) for x in lines if x.startswith("{"))
        return [e for e in events if e["event"] == name]

    def tasks(self) -> list[str]:
        held: list[str] = []
        for e in self.events("tasks_assigned") + self.events("rebalance_completed"):
            held = e["tasks"]
        return held

    def readyz(self) -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                return dict(json.loads(r.read()))
        except Exception:
            return {}

    def firsts(self, partition: int) -> list[float]:
        if not self.first.exists():
            return []
        out = []
        for line in self.first.read_text().splitlines():
            p, _, at = line.partition(" ")
            if at and int(p) == partition:
                out.append(float(at))
        return out

    def processed(self) -> int:
        return max((int(e["processed"]) for e in self.events("progress")), default=0)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(120)
        self.handle.close()


def wait_until(condition: Any, timeout: float, what: str, *runs: Run) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for run in runs:
            if run.proc.poll() is not None:
                raise SystemExit(f"the job exited while waiting for {what}: see {run.log}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}: see {runs[0].log if runs else ''}")
        time.sleep(0.2)


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def job(bootstrap: str, source: str, tmp: Path, job_id: str, n: int, factor: int) -> dict[str, Any]:
    return count_job(
        bootstrap,
        source,
        f"bench-failover-changelog-{job_id}",
        tmp / f"state-{job_id}-{n}",
        job_id,
        **{
            "task.class": "bench_failover:FirstCount",
            "task.commit.ms": 1000,
            "task.progress.interval.ms": 200,
            "job.coordinator.factory": "kafka-group",
            "job.coordinator.session.timeout.ms": 6000,
            "job.standbytasks.replication.factor": factor,
        },
    )


# -- (1) failover ---------------------------------------------------------------------------------


def failover(bootstrap: str, source: str, keys: int, standby: bool, tmp: Path) -> dict[str, Any]:
    job_id = uuid.uuid4().hex[:8]
    factor = 2 if standby else 1
    victim = Run(job(bootstrap, source, tmp, job_id, 0, factor), tmp, f"{job_id}-0")
    survivor: Run | None = None
    try:
        total = keys + 1000
        wait_until(
            lambda: asyncio.run(checkpointed_total(bootstrap, job_id)) >= total,
            900,
            "a checkpoint of every message",
            victim,
        )
        survivor = Run(job(bootstrap, source, tmp, job_id, 1, factor), tmp, f"{job_id}-1")
        wait_until(lambda: survivor.tasks() == ["Partition 1"], 120, "the split", survivor)
        if standby:

            def warm() -> bool:
                assert survivor is not None
                stores = (survivor.readyz().get("standbys") or {}).get("Partition 0") or {}
                return bool(stores) and all(s["checkpoint_lag"] == 0 for s in stores.values())

            wait_until(warm, 600, "a warm standby", survivor)
        time.sleep(1.5)  # a commit or two with nothing new
        victim.stop(signal.SIGKILL)
        killed = time.time()
        asyncio.run(fill(bootstrap, source, 0, 1000, keys, keys + 1000))
        wait_until(lambda: bool(survivor.firsts(0)), 600, "the takeover", survivor)
        started = [e for e in survivor.events("rebalance_started") if _at(e) >= killed]
        restored = [
            e
            for e in survivor.events("store_restored")
            if e["task"] == "Partition 0" and _at(e) >= killed
        ]
        first = min(survivor.firsts(0))
        noticed = _at(started[0])
        return {
            "to_restored": _at(restored[-1]) - noticed,
            "to_first": first - noticed,
            "records": sum(int(e["records"]) for e in restored),
            "kept": all(e["kept_local"] for e in restored),
            "detected": noticed - killed,
        }
    finally:
        victim.stop(signal.SIGKILL)
        if survivor is not None:
            survivor.stop()


def failovers(bootstrap: str, sizes: list[int], tmp: Path) -> None:
    print(
        "(1) failover after kill -9 of the owner of a task with K keys: from the survivor's "
        "rebalance_started to (stores restored, first message of the task processed)"
    )
    for keys in sizes:
        source = f"bench-failover-in-{uuid.uuid4().hex[:6]}"
        asyncio.run(create_topics(bootstrap, source, partitions=TOPIC_PARTITIONS))
        asyncio.run(fill(bootstrap, source, 0, keys, keys, 0))
        asyncio.run(fill(bootstrap, source, 1, 1000, 1000, 0))
        for standby in (False, True):
            r = failover(bootstrap, source, keys, standby, tmp)
            how = "with a standby   " if standby else "without a standby"
            print(
                f"    {keys:>9,} keys  {how}  {r['to_restored']:6.2f} s  {r['to_first']:6.2f} s"
                f"   {r['records']:>9,} records replayed (local store kept: {r['kept']}; "
                f"death noticed {r['detected']:.1f} s after the kill)",
                flush=True,
            )


# -- (2) the cost ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_at(samples: list[tuple[float, float]], at: float) -> float:
    """The CPU time the samples ``(time, cpu)`` imply at ``at``, interpolated."""
    for (t0, c0), (t1, c1) in itertools.pairwise(samples):
        if t0 <= at <= t1:
            return c0 + (c1 - c0) * (at - t0) / (t1 - t0) if t1 > t0 else c1
    return samples[0][1] if at < samples[0][0] else samples[-1][1]


async def changelog_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of each of the changelog's partitions."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(TOPIC_PARTITIONS)]
        return {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


def replayed_to(runs: list[Run], ends: dict[int, int]) -> bool:
    """Whether each process's standby has applied its task's changelog up to ``ends``."""
    for r in runs:
        standbys = r.readyz().get("standbys") or {}
        if not standbys:
            return False
        for task, stores in standbys.items():
            end = ends[int(task.rsplit(" ", 1)[-1])]
            if not stores or any(int(s["applied"] or -1) < end for s in stores.values()):
                return False
    return True


def cost_run(bootstrap: str, n: int, standby: bool, tmp: Path) -> tuple[float, float, float]:
    """Both processes started together on N waiting messages: N over the time from the first
    message processed to the last change of either process's count, the CPU time both
    processes used over that span, and the CPU time they used from the first message until
    all the work was done (every message checkpointed and, with standbys, each standby's
    replay at the changelog's end), both in us per message."""
    source = f"bench-failover-cost-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topics(bootstrap, source, partitions=TOPIC_PARTITIONS))
    for p in (0, 1):
        asyncio.run(fill(bootstrap, source, p, n // 2, 100_000, 0))
    job_id = uuid.uuid4().hex[:8]
    factor = 2 if standby else 1
    runs = [
        Run(job(bootstrap, source, tmp, job_id, i, factor), tmp, f"{job_id}-{i}") for i in (0, 1)
    ]
    samples: list[tuple[float, float]] = []  # (time, both processes' CPU time)

    def done() -> bool:
        samples.append((time.time(), sum(cpu_seconds(r.proc.pid) for r in runs)))
        return bool(asyncio.run(checkpointed_total(bootstrap, job_id)) >= n)

    try:
        wait_until(done, 900, "a checkpoint of every message", *runs)
        complete = time.time()
        if standby:
            ends = asyncio.run(changelog_ends(bootstrap, f"bench-failover-changelog-{job_id}"))

            def replayed() -> bool:
                samples.append((time.time(), sum(cpu_seconds(r.proc.pid) for r in runs)))
                return replayed_to(runs, ends)

            wait_until(replayed, 300, "the standbys' replay to the changelog's end", *runs)
            complete = time.time()
        # Each process ended its work when its count last moved.
        end = 0.0
        for r in runs:
            counts = [(_at(e), int(e["processed"])) for e in r.events("progress")]
            moved = [
                at for (at, c), (_, before) in zip(counts[1:], counts, strict=False) if c != before
            ]
            end = max([end, *moved])
        start = min(f for r in runs for f in r.firsts(0) + r.firsts(1))
        cpu = _cpu_at(samples, end) - _cpu_at(samples, start)
        whole = _cpu_at(samples, complete) - _cpu_at(samples, start)
        return n / (end - start), cpu / n * 1e6, whole / n * 1e6
    finally:
        for r in runs:
            r.stop()


def costs(bootstrap: str, n: int, rounds: int, tmp: Path) -> None:
    print(f"(2) cost: {n:,} messages over 2 tasks in 2 processes, with and without standbys")
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    wholes: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(rounds):
        for standby in (False, True):
            rate, cpu, whole = cost_run(bootstrap, n, standby, tmp)
            rates[standby].append(rate)
            cpus[standby].append(cpu)
            wholes[standby].append(whole)
            print(
                f"    {'with' if standby else 'without'} standbys: {rate:,.0f} msg/s, "
                f"{cpu:.2f} us of CPU a message (both processes), {whole:.2f} us until all "
                "the work was done"
            )

    def median_ratio(figures: dict[bool, list[float]]) -> float:
        return statistics.median(
            w / wo for w, wo in zip(figures[True], figures[False], strict=True)
        )

    extra = statistics.median(w - wo for w, wo in zip(wholes[True], wholes[False], strict=True))
    print(
        f"    with / without: rate median {median_ratio(rates):.3f} (goal >= 0.95), "
        f"CPU a message median {median_ratio(cpus):.3f}; until all the work was done "
        f"{median_ratio(wholes):.3f} (the standbys' work: {extra:.2f} us a message, median)"
    )


# -- (3) the cost to the active, the standby on a core of its own ------------------------------


def _listener_pid(bootstrap: str) -> int:
    """The process listening on the broker's port (``ss``)."""
    port = bootstrap.rsplit(":", 1)[1]
    out = subprocess.run(
        ["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split("pid=", 1)[1].split(",", 1)[0])


def isolated_run(bootstrap: str, n: int, standby: bool, tmp: Path) -> tuple[float, float]:
    """The owner of ``Partition 0`` on CPU 0, everything else on CPU 1: its rate and its CPU
    time per message (us) over the messages it processes after all ``n``, written once the
    split is done, are there."""
    source = f"bench-failover-isolated-{uuid.uuid4().hex[:6]}"
    asyncio.run(create_topics(bootstrap, source, partitions=TOPIC_PARTITIONS))
    job_id = uuid.uuid4().hex[:8]
    factor = 2 if standby else 1
    owner = Run(job(bootstrap, source, tmp, job_id, 0, factor), tmp, f"{job_id}-0")
    other: Run | None = None
    try:
        wait_until(lambda: len(owner.tasks()) == 2, 120, "the first process's tasks", owner)
        other = Run(job(bootstrap, source, tmp, job_id, 1, factor), tmp, f"{job_id}-1")
        wait_until(lambda: other.tasks() == ["Partition 1"], 120, "the split", other)
        wait_until(lambda: owner.tasks() == ["Partition 0"], 120, "the split", owner)
        if standby:
            wait_until(lambda: "Partition 0" in (other.readyz().get("standbys") or {}), 60,
                       "the standby", other)  # fmt: skip
        os.sched_setaffinity(owner.proc.pid, {0})
        for pid in (other.proc.pid, _listener_pid(bootstrap), os.getpid()):
            os.sched_setaffinity(pid, {1})
        samples: list[tuple[float, float]] = []

        def counted() -> bool:
            samples.append((time.time(), cpu_seconds(owner.proc.pid)))
            return bool(asyncio.run(checkpointed_total(bootstrap, job_id)) >= n)

        samples.append((time.time(), cpu_seconds(owner.proc.pid)))
        asyncio.run(fill(bootstrap, source, 0, n, 100_000, 0))
        filled = time.time()
        wait_until(counted, 900, "a checkpoint of every message", owner, other)
        counts = [(_at(e), int(e["processed"])) for e in owner.events("progress")]
        end = max(at for (at, c), (_, b) in itertools.pairwise(counts) if c != b)
        if standby:
            ends = asyncio.run(changelog_ends(bootstrap, f"bench-failover-changelog-{job_id}"))
            wait_until(lambda: replayed_to([other], {0: ends[0]}), 300, "the replay", other)
        # From the end of the writing on: the active works through a backlog at its own pace.
        left = n - _cpu_at([(float(at), float(c)) for at, c in counts], filled)
        cpu = _cpu_at(samples, end) - _cpu_at(samples, filled)
        return left / (end - filled), cpu / left * 1e6
    finally:
        all_cpus = set(range(os.cpu_count() or 1))
        for pid in (_listener_pid(bootstrap), os.getpid()):
            os.sched_setaffinity(pid, all_cpus)
        owner.stop()
        if other is not None:
            other.stop()


def isolated_costs(bootstrap: str, n: int, rounds: int, tmp: Path) -> None:
    print(
        f"(3) cost to the active, the standby on a core of its own: {n:,} messages to the "
        "owner of Partition 0 (CPU 0), the other process (with or without its standby), the "
        "broker and the writer on CPU 1"
    )
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("(3) needs 2 CPUs")
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpus: dict[bool, list[float]] = {False: [], True: []}
    for i in range(rounds):
        for standby in (False, True) if i % 2 == 0 else (True, False):
            rate, cpu = isolated_run(bootstrap, n, standby, tmp)
            rates[standby].append(rate)
            cpus[standby].append(cpu)
            print(
                f"    {'with' if standby else 'without'} the standby: the active at "
                f"{rate:,.0f} msg/s, {cpu:.2f} us of CPU a message",
                flush=True,
            )

    def median_ratio(figures: dict[bool, list[float]]) -> float:
        return statistics.median(
            w / wo for w, wo in zip(figures[True], figures[False], strict=True)
        )

    print(
        f"    with / without: the active's rate median {median_ratio(rates):.3f} "
        f"(goal >= 0.95), its CPU a message median {median_ratio(cpus):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", default="100000,1000000")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-failover", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-isolated", action="store_true")
    args = parser.parse_args()
    sizes = [int(k) for k in args.keys.split(",") if k]
    with broker() as bootstrap, tempfile.TemporaryDirectory(prefix="bench-failover-") as d:
        tmp = Path(d)
        if not args.skip_failover:
            failovers(bootstrap, sizes, tmp)
        if not args.skip_cost:
            costs(bootstrap, args.messages, args.rounds, tmp)
        if not args.skip_isolated:
            isolated_costs(bootstrap, args.messages, args.rounds, tmp)


if __name__ == "__main__":
    main()
