"""Exactly-once beside at-least-once on a real broker, in one run.

For each guarantee, at the default commit interval (60 s) and at 100 ms, in interleaved
rounds over the same topic (8 partitions, N messages of 100 bytes, checkpoints in Kafka):

- pass-through: a sync task copying each message to an output topic;
- stateful count: a RocksDB count per key (``bench_state``'s job, 100,000 keys) with a Kafka
  changelog.

Each run is timed from the container's start until everything it sent is acknowledged
(bench_kafka's ``timed_run``); the process CPU time per message is printed beside the rate.
Then the end-to-end latency (p50, p99) of the pass-through at half the measured
at-least-once maximum, with a commit interval of 1 s, read ``read_committed`` for
exactly-once (its outputs become visible at each commit).

Usage: python bench/bench_eos.py [--messages N] [--rounds R] [--latency-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bench_kafka
from bench_kafka import (
    PARTITIONS,
    PassThrough,
    broker,
    create_topics,
    end_offsets_total,
    job_config,
    latency,
    timed_run,
)
from bench_state import Count, fill_keyed, stateful_config

from samzapy import SystemStream
from samzapy.cli.logging import configure_logging
from samzapy.container.event_loop import loop_factory

GUARANTEES = ("at-least-once", "exactly-once")
INTERVALS = (60_000, 100)


async def measured(config: Any, task: Any, n: int) -> tuple[float, float]:
    """(messages/s, process CPU microseconds per message) of one timed run."""
    cpu = time.process_time()
    rate = await timed_run(config, task, n)
    return rate, (time.process_time() - cpu) / n * 1e6


def keys(guarantee: str, commit_ms: int) -> dict[str, Any]:
    return {
        "task.processing.guarantee": guarantee,
        "task.commit.ms": commit_ms,
        "task.checkpoint.factory": "kafka",
    }


async def main(args: argparse.Namespace, bootstrap: str) -> None:
    run = uuid.uuid4().hex[:6]
    source = f"bench-eos-in-{run}"
    await create_topics(bootstrap, source)
    await fill_keyed(bootstrap, source, args.messages, 100_000)
    n = await end_offsets_total(bootstrap, source)
    print(f"broker {bootstrap}: {n:,} messages over {PARTITIONS} partitions, {args.rounds} rounds")
    figures: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    base = Path(tempfile.mkdtemp(prefix="samzapy-bench-eos-"))
    for round_number in range(args.rounds):
        order = [(g, c) for g in GUARANTEES for c in INTERVALS]
        if round_number % 2:
            order.reverse()
        for guarantee, commit_ms in order:
            sink = f"bench-eos-out-{uuid.uuid4().hex[:6]}"
            await create_topics(bootstrap, sink)
            bench_kafka.SINK = SystemStream("kafka", sink)
            config = job_config(bootstrap, source, sink, **keys(guarantee, commit_ms))
            figures.setdefault(("pass-through", guarantee, commit_ms), []).append(
                await measured(config, PassThrough, n)
            )
            changelog = f"bench-eos-changelog-{uuid.uuid4().hex[:6]}"
            state = stateful_config(
                bootstrap,
                source,
                changelog,
                base,
                uuid.uuid4().hex[:8],
                **keys(guarantee, commit_ms),
            )
            figures.setdefault(("stateful count", guarantee, commit_ms), []).append(
                await measured(state, Count, n)
            )
        print(f"round {round_number + 1} done", file=sys.stderr)
    print(f"{'job':<16}{'commit.ms':>10}  {'at-least-once':>22}  {'exactly-once':>22}  ratio")
    for job in ("pass-through", "stateful count"):
        for commit_ms in INTERVALS:
            alos = figures[(job, "at-least-once", commit_ms)]
            eos = figures[(job, "exactly-once", commit_ms)]
            ratio = statistics.median(e[0] / a[0] for e, a in zip(eos, alos, strict=True))
            cells = [
                f"{statistics.median(r for r, _ in runs):>9,.0f}/s "
                f"{statistics.median(c for _, c in runs):5.1f} us"
                for runs in (alos, eos)
            ]
            print(f"{job:<16}{commit_ms:>10}  {cells[0]:>22}  {cells[1]:>22}  {ratio:5.2f}")
    alos_max = statistics.median(r for r, _ in figures[("pass-through", "at-least-once", 60_000)])
    rate = alos_max / 2
    for guarantee in GUARANTEES:
        p50, p99, count = await latency(
            bootstrap,
            rate,
            args.latency_seconds,
            committed=guarantee == "exactly-once",
            **keys(guarantee, 1000),
        )
        print(
            f"latency, {guarantee}, commit.ms 1000, {rate:,.0f} msg/s, {count:,} messages: "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    ns = parser.parse_args()
    configure_logging("console", "warning")
    factory, _ = loop_factory("uvloop")
    with broker() as bootstrap, asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main(ns, bootstrap))
