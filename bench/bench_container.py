"""Run-loop throughput on the memory system: 8 partitions, one task per partition.

Prints each figure beside a reference measured in the same run, and their ratio:

- sync pass-through (reads, sends to an output) vs a plain Python loop doing the same calls;
- AsyncStreamTask at concurrency 64 whose awaitable completes immediately;
- AsyncStreamTask sleeping 5 ms at concurrency 1, 8, 64 vs a bare asyncio loop with the same
  number of coroutines each awaiting asyncio.sleep(0.005) in turn.

Each pair is measured alternately ``--rounds`` times and the best of each is printed, which
keeps a noisy shared machine from favouring one side. Beside each rate: the process CPU time
per message of the samzapy run (lowest of the rounds), steadier than the rate on a shared
machine. ``--json`` prints the figures as one JSON object instead (``bench/ab.py`` reads it).

Usage: python bench/bench_container.py [--messages N] [--seconds S] [--rounds R]
                                       [--loop uvloop|asyncio] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from typing import Any

from samzapy import AsyncStreamTask, OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.cli.logging import configure_logging
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing import TestRunner

PARTITIONS = 8
OUT = SystemStream("memory", "out")
PAYLOAD = "x" * 100


class Clock:
    first: float | None = None
    first_cpu: float = 0.0

    @classmethod
    def mark(cls) -> None:
        if cls.first is None:
            cls.first = time.perf_counter()
            cls.first_cpu = time.process_time()


class PassThrough(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Clock.mark()
        collector.send(
            OutgoingMessageEnvelope(
                OUT, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


class ImmediateAsync(AsyncStreamTask):
    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Clock.mark()
        collector.send(
            OutgoingMessageEnvelope(
                OUT, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


class Sleeping(AsyncStreamTask):
    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Clock.mark()
        await asyncio.sleep(0.005)


class Figure:
    """One samzapy run: messages per second, and process CPU microseconds per message, from
    the first process call to the job's end."""

    def __init__(self, rate: float, cpu_us: float) -> None:
        self.rate = rate
        self.cpu_us = cpu_us


async def run_job(task: type, per_partition: int, config: dict[str, Any]) -> Figure:
    Clock.first = None
    runner = TestRunner(task, {"task.progress.interval.ms": -1, **config})
    runner.add_input("in", {p: [PAYLOAD] * per_partition for p in range(PARTITIONS)})
    runner.add_output("out", partitions=PARTITIONS)
    await runner.run_async(timeout=600)
    elapsed = time.perf_counter() - (Clock.first or 0.0)
    cpu = time.process_time() - Clock.first_cpu
    # Free this run's streams so later runs do not pay for their memory.
    InMemoryBroker.drop_namespace(runner.namespace)
    gc.collect()
    messages = PARTITIONS * per_partition
    return Figure(messages / elapsed, cpu / messages * 1e6)


def plain_loop(per_partition: int) -> float:
    """The same calls without a container: a ceiling for the sync path."""
    from samzapy import IncomingMessageEnvelope, SystemStreamPartition

    sent: list[Any] = []

    class Collector:
        def send(self, envelope: Any) -> None:
            sent.append(envelope)

    task, collector = PassThrough(), Collector()
    envelopes = [
        IncomingMessageEnvelope(SystemStreamPartition("memory", "in", p), str(i), None, PAYLOAD)
        for p in range(PARTITIONS)
        for i in range(per_partition)
    ]
    start = time.perf_counter()
    for env in envelopes:
        task.process(env, collector, None)
    return len(envelopes) / (time.perf_counter() - start)


async def bare_sleep_loop(coroutines: int, seconds: float) -> float:
    """N coroutines, each awaiting asyncio.sleep(0.005) in turn: the runtime's own limit."""
    count = 0
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < stop:
            await asyncio.sleep(0.005)
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(coroutines)))
    return count / (time.perf_counter() - start)


class Report:
    """Prints each figure beside its reference, or collects them for ``--json``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.figures: dict[str, dict[str, float]] = {}

    def row(self, name: str, runs: list[Figure], ref_name: str, ref: float, goal: str) -> None:
        rate = max(f.rate for f in runs)
        cpu_us = min(f.cpu_us for f in runs)
        self.figures[name] = {"rate": rate, "cpu_us": cpu_us, "reference": ref}
        if not self.as_json:
            print(
                f"{name:<40} {rate:>10,.0f} msg/s {cpu_us:6.2f} us cpu/msg   "
                f"{ref_name:<24} {ref:>10,.0f}   ratio {rate / ref:5.2f}   {goal}"
            )


async def main(args: argparse.Namespace) -> None:
    loop_name = type(asyncio.get_running_loop()).__module__.split(".")[0]
    report = Report(args.json)
    if not args.json:
        print(
            f"python {sys.version.split()[0]}, loop {loop_name}, {PARTITIONS} partitions, "
            f"best of {args.rounds} rounds, each figure and its reference measured alternately"
        )
    n = args.messages // PARTITIONS

    refs, syncs = [], []
    for _ in range(args.rounds):
        refs.append(plain_loop(n))
        syncs.append(await run_job(PassThrough, n, {}))
    sync = max(f.rate for f in syncs)
    report.row("sync pass-through", syncs, "plain loop, same calls", max(refs), "goal >= 200,000")
    immediates = [
        await run_job(ImmediateAsync, n, {"task.max.concurrency": 64}) for _ in range(args.rounds)
    ]
    report.row(
        "async, concurrency 64, completes at once",
        immediates,
        "sync pass-through",
        sync,
        "goal >= 100,000",
    )
    for c in (1, 8, 64):
        bares, runs = [], []
        for _ in range(args.rounds):
            bare = await bare_sleep_loop(PARTITIONS * c, args.seconds)
            per_partition = max(1, int(bare * args.seconds / PARTITIONS))
            bares.append(bare)
            runs.append(await run_job(Sleeping, per_partition, {"task.max.concurrency": c}))
        report.row(
            f"async sleep 5 ms, concurrency {c}",
            runs,
            f"bare loop, {PARTITIONS * c} coroutines",
            max(bares),
            "goal ratio >= 0.90",
        )
    if args.json:
        print(json.dumps(report.figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=800_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    ns = parser.parse_args()
    configure_logging("console", "warning")
    if ns.loop == "uvloop":
        import uvloop

        uvloop.run(main(ns))
    else:
        asyncio.run(main(ns))
