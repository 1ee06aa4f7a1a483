"""Run-loop throughput on the memory system: 8 partitions, one task per partition.

Prints each figure beside a reference measured in the same run, and their ratio:

- sync pass-through (reads, sends to an output) vs a plain Python loop doing the same calls;
- AsyncStreamTask at concurrency 64 whose awaitable completes immediately;
- AsyncStreamTask sleeping 5 ms at concurrency 1, 8, 64 vs a bare asyncio loop with the same
  number of coroutines each awaiting asyncio.sleep(0.005) in turn.

Each pair is measured alternately ``--rounds`` times and the best of each is printed, which
keeps a noisy shared machine from favouring one side.

Usage: python bench/bench_container.py [--messages N] [--seconds S] [--rounds R]
                                       [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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

    @classmethod
    def mark(cls) -> None:
        if cls.first is None:
            cls.first = time.perf_counter()


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


async def run_job(task: type, per_partition: int, config: dict[str, Any]) -> float:
    """Messages per second from the first process call to the job's end."""
    Clock.first = None
    runner = TestRunner(task, {"task.progress.interval.ms": -1, **config})
    runner.add_input("in", {p: [PAYLOAD] * per_partition for p in range(PARTITIONS)})
    runner.add_output("out", partitions=PARTITIONS)
    await runner.run_async(timeout=600)
    elapsed = time.perf_counter() - (Clock.first or 0.0)
    # Free this run's streams so later runs do not pay for their memory.
    InMemoryBroker.drop_namespace(runner.namespace)
    gc.collect()
    return PARTITIONS * per_partition / elapsed


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


def row(name: str, value: float, ref_name: str, ref: float, goal: str) -> None:
    print(
        f"{name:<44} {value:>11,.0f} msg/s   {ref_name:<26} {ref:>11,.0f}   "
        f"ratio {value / ref:5.2f}   {goal}"
    )


async def best_of(rounds: int, measure: Any) -> float:
    return max([await measure() for _ in range(rounds)])


async def main(args: argparse.Namespace) -> None:
    loop_name = type(asyncio.get_running_loop()).__module__.split(".")[0]
    print(
        f"python {sys.version.split()[0]}, loop {loop_name}, {PARTITIONS} partitions, "
        f"best of {args.rounds} rounds, each figure and its reference measured alternately"
    )
    n = args.messages // PARTITIONS

    refs, syncs = [], []
    for _ in range(args.rounds):
        refs.append(plain_loop(n))
        syncs.append(await run_job(PassThrough, n, {}))
    ref, sync = max(refs), max(syncs)
    row("sync pass-through", sync, "plain loop, same calls", ref, "goal >= 200,000 msg/s")
    immediate = await best_of(
        args.rounds, lambda: run_job(ImmediateAsync, n, {"task.max.concurrency": 64})
    )
    row(
        "async, concurrency 64, completes at once",
        immediate,
        "sync pass-through",
        sync,
        "goal >= 100,000 msg/s",
    )
    for c in (1, 8, 64):
        bares, rates = [], []
        for _ in range(args.rounds):
            bare = await bare_sleep_loop(PARTITIONS * c, args.seconds)
            per_partition = max(1, int(bare * args.seconds / PARTITIONS))
            bares.append(bare)
            rates.append(await run_job(Sleeping, per_partition, {"task.max.concurrency": c}))
        row(
            f"async sleep 5 ms, concurrency {c}",
            max(rates),
            f"bare loop, {PARTITIONS * c} coroutines",
            max(bares),
            "goal ratio >= 0.90",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=800_000)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    ns = parser.parse_args()
    configure_logging("console", "warning")
    if ns.loop == "uvloop":
        import uvloop

        uvloop.run(main(ns))
    else:
        asyncio.run(main(ns))
