"""How long the event loop stands still while tasks snapshot their stores at commits.

N tasks (default 8) each write M messages (default 100,000) to a RocksDB store with a changelog,
every write a value of V bytes (default 1,024) over K keys of the task's own (default 200, so
the changelog, in memory, stays small while RocksDB's memtable grows by every write), and commit
every C ms (default 500), each commit snapshotting the store (``task.transactional.state.
checkpoint.enabled``, the default). The job runs in this process on the in-memory system, on
uvloop, next to a probe coroutine that sleeps 1 ms in a loop: how much later than asked it
wakes is how long the loop stood still (a stall). Every task waits on any stall, whichever task
caused it.

Printed, with snapshots on and off (off: the stalls that processing and commits cause anyway),
in alternating rounds (``--rounds``, default 2): the longest stall, the 99.9th percentile, the
stalls over 5 ms, the commits, and the mean commit latency.

To compare with an earlier version, run the script with ``PYTHONPATH`` at that checkout (the
script itself only uses the public TestRunner).

Usage: python bench/bench_snapshot_stalls.py [--tasks N] [--messages M] [--keys K]
       [--value-bytes V] [--commit-ms C] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from samzapy import InitableTask, StreamTask
from samzapy.container.event_loop import loop_factory
from samzapy.container.gauges import CONTAINER
from samzapy.testing import TestRunner

PROBE_S = 0.001


class Fill(InitableTask, StreamTask):
    """Writes the store ``big``: key ``message % keys``, a value of ``value_bytes``; notes
    when the first and the last message were processed (the window the probe measures)."""

    keys = 2_000
    value = b"v" * 1_024
    first: float | None = None
    last = 0.0

    def init(self, context: Any) -> None:
        self.store = context.get_store("big")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put(envelope.message % Fill.keys, Fill.value)
        Fill.last = time.perf_counter()
        if Fill.first is None:
            Fill.first = Fill.last


async def probe(stalls: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """Sleep ``PROBE_S`` at a time; note when each sleep began and how much later than asked
    it woke."""
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(PROBE_S)
        stalls.append((started, time.perf_counter() - started - PROBE_S))


async def one_run(args: argparse.Namespace, snapshots: bool, state: Path) -> dict[str, float]:
    config = {
        "task.commit.ms": args.commit_ms,
        # The consumer turns at most this many records into envelopes at a time.
        "systems.memory.samza.fetch.threshold": 4_000,
        "task.transactional.state.checkpoint.enabled": snapshots,
        "job.logged.store.base.dir": str(state),
        "stores.big.factory": "rocksdb",
        "stores.big.key.serde": "long",
        "stores.big.msg.serde": "bytes",
        "stores.big.changelog": "memory.big-changelog",
        # Every key's record once per commit: the changelog stays at keys x commits.
        "stores.big.changelog.dedup.max.bytes": 64 << 20,
    }
    runner = TestRunner(Fill, config).add_input("numbers", {p: [] for p in range(args.tasks)})
    # The inputs go in before the run (the runner would fill them on the loop), and the
    # collector leaves them alone: the probe measures the job, not the bench's own objects.
    runner.broker.create_stream("numbers", args.tasks)
    for p in range(args.tasks):
        for i in range(args.messages):
            runner.broker.append("numbers", p, None, i)
    runner.broker.end_stream("numbers")
    gc.collect()
    gc.freeze()
    stalls: list[tuple[float, float]] = []
    Fill.first = None
    stop = asyncio.Event()
    watcher = asyncio.create_task(probe(stalls, stop))
    started = time.perf_counter()
    try:
        result = await runner.run_async(timeout=600)
    finally:
        stop.set()
        await watcher
        gc.unfreeze()
    elapsed = time.perf_counter() - started
    container = result.metrics.snapshot()[CONTAINER]
    # Only while the tasks process: not the start-up (which fills the inputs) or the stop.
    assert Fill.first is not None
    ordered = sorted(s for began, s in stalls if Fill.first <= began <= Fill.last)
    return {
        "max_ms": ordered[-1] * 1e3,
        "p999_ms": ordered[int(len(ordered) * 0.999)] * 1e3,
        "over_5ms": sum(s > 0.005 for s in ordered),
        "seconds": elapsed,
        "commits": container["commits"],
        "commit_ms": container["commit-latency"]["mean_ms"],
        "commit_max_ms": container["commit-latency"]["max_ms"],
    }


def line(snapshots: bool, f: dict[str, float]) -> str:
    return (
        f"snapshots {'on ' if snapshots else 'off'}: longest stall {f['max_ms']:.1f} ms, "
        f"p99.9 {f['p999_ms']:.1f} ms, {f['over_5ms']:.0f} stalls > 5 ms; {f['commits']:.0f} "
        f"commits, mean {f['commit_ms']:.1f} ms, max {f['commit_max_ms']:.1f} ms; "
        f"{f['seconds']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--messages", type=int, default=100_000, help="per task")
    parser.add_argument("--keys", type=int, default=200, help="per task")
    parser.add_argument("--value-bytes", type=int, default=1_024)
    parser.add_argument("--commit-ms", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    Fill.keys, Fill.value = args.keys, b"v" * args.value_bytes
    print(
        f"{args.tasks} tasks x {args.messages:,} writes of {args.value_bytes:,} B over "
        f"{args.keys:,} keys each, commit every {args.commit_ms} ms"
    )
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    factory, name = loop_factory("uvloop")
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-stalls-") as tmp:
        for r in range(args.rounds):
            for snapshots in (True, False):
                state = Path(tmp) / f"state-{r}-{snapshots}"
                with asyncio.Runner(loop_factory=factory) as runner:
                    figures = runner.run(one_run(args, snapshots, state))
                results[snapshots].append(figures)
                print(f"  round {r + 1}: {line(snapshots, figures)}", flush=True)
    print(f"loop: {name}")
    for snapshots, runs in results.items():
        print(
            f"snapshots {'on ' if snapshots else 'off'}: longest stall "
            f"{max(f['max_ms'] for f in runs):.1f} ms (median of rounds "
            f"{statistics.median(f['max_ms'] for f in runs):.1f}), p99.9 "
            f"{statistics.median(f['p999_ms'] for f in runs):.1f} ms, stalls > 5 ms "
            f"{statistics.median(f['over_5ms'] for f in runs):.0f}"
        )


if __name__ == "__main__":
    main()
