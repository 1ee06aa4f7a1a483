"""Tables on the high-level API: a stream-table join against a remote table, with and without
a cache in front, on the memory system, in interleaved rounds.

Every job is an application run by ``TestRunner.of`` on the memory system (as bench_container
runs its jobs: logs at warning, no progress reports, uvloop), each run in a fresh process of
its own (so that no run pays for an earlier one's heap), measured from its first message to
the job's end (every input ended, the tasks closed): wall time and process CPU time. Each
round runs every variant once, in an order that rotates and runs backwards every other round.

One partition (one task) of N views (default 50,000), ``KV("m0000123", {"page": ..., "i":
i})``, joined with a table of profiles by their key, ``views.join(profiles, Enrich())
.send_to(output)``, at ``task.max.concurrency: 64``; one view is one look-up, so the rate in
views/s is the look-ups' rate:

- ``remote-5ms``: a remote table (``RemoteTableDescriptor``) whose read function's
  ``get_async`` awaits ``asyncio.sleep(0.005)`` and returns a profile; every view has a key of
  its own;
- ``remote-0ms``: the same with ``asyncio.sleep(0)``: what the CPU allows;
- ``bare-loop``: the reference for the timers, no samzapy: 64 coroutines each awaiting
  ``asyncio.sleep(0.005)`` in turn on uvloop, N sleeps in all (libuv's timers count whole
  milliseconds: a sleep and its wake-up take about 5.3 ms here, 0.94 of the ceiling below);
- ``cached-5ms``: ``remote-5ms`` behind a ``CachingTableDescriptor`` (the default 1,000
  entries per task, read ttl 5 minutes): every tenth view has a fresh key, the others repeat
  a key first seen 100 to 600 views earlier (cached by then: a hit); the hit rate is the
  caching table's ``<id>-cache-hits`` over its hits and misses;
- ``cached-5ms@640``: the same at ``task.max.concurrency: 640``.

Goal: ``remote-5ms`` >= 0.8 of its ceiling, 64 / 5 ms = 12,800 look-ups/s, or of
``remote-0ms``'s rate if the CPU allows less (per round, then the median).

Printed: bench_kafka's table (median rate and CPU time per message of the rounds, their spread,
the median per-round ratios to ``remote-5ms``, the remote calls per look-up and the remote
call's median latency), the cached variants' hit rates, then the goal's per-round ratios,
their median and whether it is met, and ``remote-5ms``'s ratio to ``bare-loop``. The
``cached`` variants show what a cache does at a fixed concurrency: a join's results go on in
input order, so a hit waits for the misses before it, and holds its slot meanwhile.

Harness shared with bench_joins: ``First`` (the first-message mark), ``run_app`` (a measured
TestRunner run in the child) and ``run_rounds`` (fresh processes in interleaved rounds).

Usage: python bench/bench_tables.py [--messages N] [--rounds R] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kafka import BENCH, ROOT, Variant, cpu_seconds, report

from samzapy import (
    KV,
    CachingTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
)
from samzapy.cli.logging import configure_logging
from samzapy.container.event_loop import loop_factory
from samzapy.testing import TestResult, TestRunner

CONCURRENCY = 64
LATENCY_S = 0.005
#: 64 look-ups in flight, each 5 ms: the most a task can do.
CEILING = CONCURRENCY / LATENCY_S
TABLE = "profiles"  # the table the join reads (the cache, when there is one)
REMOTE = "profiles-remote"  # the remote table behind the cache

KAFKA = KafkaSystemDescriptor("kafka")  # TestRunner makes every system its memory system
VIEWS = KAFKA.get_input_descriptor("views", KVSerde("string", "json"))
ENRICHED = KAFKA.get_output_descriptor("enriched", KVSerde("string", "json"))

# -- the harness (bench_joins uses it too) ------------------------------------------------------


class First:
    """The first message's wall and CPU time: the functions the jobs call per message call
    ``First.mark()`` (the same call on every side of a comparison)."""

    t0: float | None = None
    cpu0 = 0.0

    @classmethod
    def mark(cls) -> None:
        if cls.t0 is None:
            cls.t0 = time.perf_counter()
            cls.cpu0 = cpu_seconds()


def run_app(
    app: StreamApplication,
    inputs: Sequence[tuple[Any, dict[int, list[Any]]]],
    outputs: dict[Any, int],
    messages: int,
    config: dict[str, Any] | None = None,
) -> tuple[dict[str, float], TestRunner, TestResult]:
    """Run ``app`` over ``inputs`` ((descriptor, {partition: messages})...) to its end,
    its stores in a temporary directory; its figures over ``messages`` (from the first
    message's mark to the job's end; ``rss_peak_mb``: the process's, inputs and outputs
    included), the runner and its result."""
    First.t0 = None
    with tempfile.TemporaryDirectory(prefix="samzapy-bench-") as stores:
        settings = {"task.progress.interval.ms": -1, "job.logged.store.base.dir": stores}
        runner = TestRunner.of(app, {**settings, **(config or {})})
        for descriptor, by_partition in inputs:
            runner.add_input_stream(descriptor, by_partition)
        for descriptor, partitions in outputs.items():
            runner.add_output_stream(descriptor, partitions)
        result = runner.run(timeout=900)
        wall = time.perf_counter() - (First.t0 or 0.0)
        cpu = cpu_seconds() - First.cpu0
    if First.t0 is None:
        raise SystemExit("no message reached a function that calls First.mark()")
    figures = {
        "messages": messages,
        "rate": messages / wall,
        "cpu_us": cpu / messages * 1e6,
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    return figures, runner, result


def run_child(script: str, name: str, args: list[str]) -> dict[str, float]:
    """Run variant ``name`` in a fresh process (``script --child name args...``); the figures
    it prints as JSON on its last line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH)])}
    argv = [sys.executable, script, "--child", name, *args]
    done = subprocess.run(argv, cwd=BENCH, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def run_rounds(
    variants: Sequence[Variant],
    rounds: int,
    run: Callable[[Variant], dict[str, float]],
) -> None:
    """``rounds`` rounds of every variant, as bench_kafka's ``interleaved`` orders them: round
    r starts at variant r, and every other round runs backwards; except with two variants,
    which that would keep in one order: they alternate."""
    for r in range(rounds):
        order = [variants[(r + i) % len(variants)] for i in range(len(variants))]
        if r % 2 and len(variants) > 2:
            order.reverse()
        for variant in order:
            variant.runs.append(run(variant))
        print(f"round {r + 1} of {rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)


def per_round(variants: Sequence[Variant], name: str) -> list[dict[str, float]]:
    return next(v for v in variants if v.name == name).runs


def ratios_line(label: str, ratios: list[float], target: float | None = None) -> float:
    """Print ``label``: the median of the per-round ``ratios`` (and the verdict against
    ``target``), then the rounds'; return the median."""
    mid = statistics.median(ratios)
    verdict = ""
    if target is not None:
        verdict = f" (goal >= {target:.2f}: {'met' if mid >= target else 'NOT met'})"
    print(f"{label}: {mid:.2f}{verdict}; per round {' '.join(f'{r:.2f}' for r in ratios)}")
    return mid


# -- the jobs ------------------------------------------------------------------------------------


class Profiles:
    """The remote read function: a profile after ``delay_s`` (a sleep of 0 yields once)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    async def get_async(self, key: str) -> dict[str, Any]:
        await asyncio.sleep(self.delay_s)
        return {"member": key, "city": "Oslo", "tier": len(key) % 3}


class Enrich:
    """Samza's StreamTableJoinFunction: a view and its member's profile."""

    def get_message_key(self, message: KV) -> Any:
        First.mark()
        return message.key

    def get_record_key(self, record: KV) -> Any:
        return record.key

    def apply(self, message: KV, record: KV | None) -> KV:
        profile = None if record is None else record.value
        return KV(message.key, {"view": message.value, "profile": profile})


class EnrichApp(StreamApplication):
    """``views.join(table, Enrich()).send_to(enriched)``; the table remote, after
    ``delay_s``, with a cache in front when ``cached``."""

    def __init__(self, delay_s: float, cached: bool) -> None:
        self.delay_s, self.cached = delay_s, cached

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        remote = RemoteTableDescriptor(REMOTE if self.cached else TABLE)
        remote.with_read_function(Profiles(self.delay_s))
        descriptor: Any = remote
        if self.cached:
            descriptor = CachingTableDescriptor(TABLE, remote).with_read_ttl(timedelta(minutes=5))
        table = app_desc.get_table(descriptor)
        views = app_desc.get_input_stream(VIEWS)
        views.join(table, Enrich()).send_to(app_desc.get_output_stream(ENRICHED))


def view_key(i: int, cached: bool) -> str:
    """View ``i``'s member: its own; or, for the cached variants, every tenth view's own and
    the others' one first seen 100 to 600 views earlier (10 to 59 fresh keys back)."""
    if not cached or i % 10 == 0:
        return f"m{i:07d}"
    fresh = i // 10 - 10 - (i * 7919) % 50
    return f"m{max(0, fresh) * 10:07d}"


def enrich_job(n: int, delay_s: float, cached: bool, concurrency: int) -> dict[str, float]:
    views = [KV(view_key(i, cached), {"page": f"/p/{i % 100}", "i": i}) for i in range(n)]
    app = EnrichApp(delay_s, cached)
    config = {"task.max.concurrency": concurrency}
    figures, _, result = run_app(app, [(VIEWS, {0: views})], {ENRICHED: 1}, n, config)
    enriched = sum(len(ms) for ms in result.outputs(ENRICHED).values())
    if enriched != n:
        raise SystemExit(f"{enriched:,} views enriched of {n:,}")
    task = result.metrics.snapshot()["task.Partition 0"]
    remote = REMOTE if cached else TABLE
    figures["calls_per_msg"] = task[f"{remote}-gets"] / n
    figures["call_p50_ms"] = task[f"{remote}-call-latency"]["p50_ms"]
    if cached:
        hits, misses = task[f"{TABLE}-cache-hits"], task[f"{TABLE}-cache-misses"]
        figures["hit_rate"] = hits / (hits + misses)
    return figures


async def bare_loop(n: int) -> dict[str, float]:
    """64 coroutines, each awaiting asyncio.sleep(0.005) in turn, n sleeps in all."""
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await asyncio.sleep(LATENCY_S)

    t0, cpu0 = time.perf_counter(), cpu_seconds()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return {"messages": n, "rate": n / wall, "cpu_us": cpu / n * 1e6, "wall_s": wall, "cpu_s": cpu}


def bare_job(n: int) -> dict[str, float]:
    factory, _ = loop_factory("uvloop")  # the jobs' loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(bare_loop(n))


VARIANTS: dict[str, Callable[[int], dict[str, float]]] = {
    "remote-5ms": lambda n: enrich_job(n, LATENCY_S, False, CONCURRENCY),
    "remote-0ms": lambda n: enrich_job(n, 0.0, False, CONCURRENCY),
    "bare-loop": bare_job,
    "cached-5ms": lambda n: enrich_job(n, LATENCY_S, True, CONCURRENCY),
    "cached-5ms@640": lambda n: enrich_job(n, LATENCY_S, True, 10 * CONCURRENCY),
}


# -- the parent ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000, help="views (look-ups) per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        configure_logging("console", "warning")
        print(json.dumps(VARIANTS[args.child](args.messages)))
        return
    print(
        f"python {sys.version.split()[0]}, memory system, one task, {args.messages:,} views "
        f"per run (one look-up each), task.max.concurrency {CONCURRENCY}; {args.rounds} "
        f"interleaved rounds, each run a fresh process; load average "
        f"{os.getloadavg()[0]:.2f} at the start",
        flush=True,
    )
    variants = [Variant(name) for name in VARIANTS]
    script, size = str(Path(__file__).resolve()), ["--messages", str(args.messages)]
    run_rounds(variants, args.rounds, lambda v: run_child(script, v.name, size))
    print("\nstream-table join, remote table: look-ups/s (= views/s) and CPU per look-up")
    figures = report(variants, "remote-5ms")
    for v in variants:
        if "hit_rate" in v.runs[0]:
            rates = [r["hit_rate"] for r in v.runs]
            figures[v.name]["hit_rate"] = statistics.median(rates)
            print(
                f"{v.name}: cache hit rate {statistics.median(rates):.3f} (per round "
                f"{' '.join(f'{r:.3f}' for r in rates)}), remote calls per look-up "
                f"{statistics.median(r['calls_per_msg'] for r in v.runs):.3f}"
            )
    remote = per_round(variants, "remote-5ms")
    cpu_bound = per_round(variants, "remote-0ms")
    goal = [a["rate"] / min(CEILING, b["rate"]) for a, b in zip(remote, cpu_bound, strict=True)]
    figures["goal"] = ratios_line(
        f"remote-5ms / min({CEILING:,.0f} = {CONCURRENCY} / 5 ms, remote-0ms)", goal, 0.8
    )
    bare = per_round(variants, "bare-loop")
    ratios_line(
        "remote-5ms / bare-loop (what uvloop's timers allow)",
        [a["rate"] / b["rate"] for a, b in zip(remote, bare, strict=True)],
    )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
