"""How long the event loop stands still while tasks snapshot their stores at commits.

N tasks (default 8) each write M messages (default 100,000) to a RocksDB store with a changelog,
every write a value of V bytes (default 1,024) over K keys of the task's own (default 200, so
the changelog, in memory, stays small while RocksDB's memtable grows by every write), and commit
every C ms (default 500), each commit snapshotting the store (``task.transactional.state.
checkpoint.enabled``, the default). The job runs in this process on the in-memory system, on
uvloop, next to a probe coroutine that sleeps 1 ms in a loop: how much later than asked it
wakes is how long the loop stood still (a stall). Every task waits on any stall, whichever task
caused it.

Each run is a process of its own. Printed per round (``--rounds``, default 3), with snapshots
on and off (off: the stalls that processing and commits cause anyway) and, with ``--against
DIR``, with snapshots on in the checkout DIR (an earlier version, e.g. a ``git worktree`` of
it; the runs alternate, so a busy machine weighs on both alike): the longest stall, the 99.9th
percentile, the stalls over 5 ms, the commits and their mean and longest latency, and how long
each call of the store's ``snapshot`` held the loop (median and longest); then the medians
over the rounds.

Usage: python bench/bench_snapshot_stalls.py [--tasks N] [--messages M] [--keys K]
       [--value-bytes V] [--commit-ms C] [--rounds R] [--against DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog

from samzapy import InitableTask, StreamTask
from samzapy.container.event_loop import loop_factory
from samzapy.container.gauges import CONTAINER
from samzapy.storage.rocksdb import RocksDBStorageEngine
from samzapy.testing import TestRunner

PROBE_S = 0.001
ROOT = Path(__file__).resolve().parents[1]


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


#: How long each call of the engine's snapshot took: the loop is held that long (before the
#: change, the call wrote the memtable out too; after it, a thread did that first).
SNAPSHOT_CALLS: list[float] = []


def time_snapshot_calls() -> None:
    original = RocksDBStorageEngine.snapshot

    def timed(self: RocksDBStorageEngine, directory: Path) -> None:
        began = time.perf_counter()
        try:
            original(self, directory)
        finally:
            SNAPSHOT_CALLS.append(time.perf_counter() - began)

    RocksDBStorageEngine.snapshot = timed  # type: ignore[method-assign]


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
        "stores.big.write.buffer.max.bytes": 64 << 20,
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
        "snapshot_call_p50_ms": percentile(SNAPSHOT_CALLS, 0.5) * 1e3,
        "snapshot_call_max_ms": max(SNAPSHOT_CALLS, default=0.0) * 1e3,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def line(snapshots: bool, f: dict[str, float]) -> str:
    return (
        f"snapshots {'on ' if snapshots else 'off'}: longest stall {f['max_ms']:.1f} ms, "
        f"p99.9 {f['p999_ms']:.1f} ms, {f['over_5ms']:.0f} stalls > 5 ms; {f['commits']:.0f} "
        f"commits, mean {f['commit_ms']:.1f} ms, max {f['commit_max_ms']:.1f} ms; the "
        f"snapshot call held the loop {f['snapshot_call_p50_ms']:.1f} ms (median), "
        f"{f['snapshot_call_max_ms']:.1f} ms (max); {f['seconds']:.1f} s"
    )


def variants(args: argparse.Namespace) -> list[tuple[str, bool, Path]]:
    """(label, snapshots, checkout) of each run of a round: this checkout with snapshots on
    and off, and with ``--against`` the other checkout with snapshots on, in between."""
    runs = [("after" if args.against else "this", True, ROOT)]
    if args.against:
        runs.append(("before", True, Path(args.against).resolve()))
    runs.append(("off", False, ROOT))
    return runs


def run_in(checkout: Path, args: argparse.Namespace, snapshots: bool) -> dict[str, float]:
    """One run in a fresh process importing samzapy from ``checkout``."""
    sizes = ["--tasks", str(args.tasks), "--messages", str(args.messages), "--keys",
             str(args.keys), "--value-bytes", str(args.value_bytes), "--commit-ms",
             str(args.commit_ms)]  # fmt: skip
    command = [sys.executable, __file__, *sizes, "--one", "on" if snapshots else "off"]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"a run in {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--messages", type=int, default=100_000, help="per task")
    parser.add_argument("--keys", type=int, default=200, help="per task")
    parser.add_argument("--value-bytes", type=int, default=1_024)
    parser.add_argument("--commit-ms", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", help="a checkout of another version, run in turn")
    parser.add_argument("--one", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:  # one run, in this process: its figures as JSON
        time_snapshot_calls()
        Fill.keys, Fill.value = args.keys, b"v" * args.value_bytes
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
        factory, _ = loop_factory("uvloop")
        with (
            tempfile.TemporaryDirectory(prefix="bench-snapshot-stalls-") as tmp,
            asyncio.Runner(loop_factory=factory) as runner,
        ):
            figures = runner.run(one_run(args, args.one == "on", Path(tmp)))
        print(json.dumps(figures))
        return
    print(
        f"{args.tasks} tasks x {args.messages:,} writes of {args.value_bytes:,} B over "
        f"{args.keys:,} keys each, commit every {args.commit_ms} ms; uvloop; load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    results: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for label, snapshots, checkout in variants(args):
            figures = run_in(checkout, args, snapshots)
            results.setdefault(label, []).append(figures)
            print(f"  round {r + 1} {label:>6}: {line(snapshots, figures)}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    for label, runs in results.items():
        print(
            f"{label:>6}: longest stall, median of rounds "
            f"{statistics.median(f['max_ms'] for f in runs):.1f} ms (max "
            f"{max(f['max_ms'] for f in runs):.1f}); p99.9 "
            f"{statistics.median(f['p999_ms'] for f in runs):.1f} ms; stalls > 5 ms "
            f"{statistics.median(f['over_5ms'] for f in runs):.0f}; mean commit "
            f"{statistics.median(f['commit_ms'] for f in runs):.1f} ms; snapshot call "
            f"{statistics.median(f['snapshot_call_p50_ms'] for f in runs):.1f} ms median, "
            f"{max(f['snapshot_call_max_ms'] for f in runs):.1f} ms max"
        )


if __name__ == "__main__":
    main()
