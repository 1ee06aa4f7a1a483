"""Failover under the kafka-group coordinator: how long a killed container's tasks stand still.

One run, same broker, a 12-partition pass-through job (bench_scale's) over a topic a producer
writes at a steady rate (default 6,000 msg/s), two `samzapy run` containers:

(a) static members (``job.container.id`` set, 30 s session): one is killed with -9 and
    started again at once. Printed, from the kill: the new process's event loop running,
    its group join, its tasks started, its first message processed (from its progress
    events, every 200 ms), the first output of its tasks; the longest gap in their output,
    and whether the other container rebalanced (it must not);
(b) dynamic members (no id, 6 s session): one is killed with -9 and not restarted. Printed:
    the longest gap in its tasks' output until the survivor runs them (about the session);
(c) a join (bench_scale's): the pause of each task that moves to a third container, and the
    rate of the tasks that stay, during the handover beside the 5 s before it.

Usage: python bench/bench_restart.py [--rate R] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.bench_kafka import broker  # noqa: E402
from bench.bench_scale import (  # noqa: E402
    PARTITIONS,
    Container,
    Feeder,
    _at,
    create,
    held,
    join,
    output_times,
    wait_until,
)

STATIC_SESSION_MS = 30_000
DYNAMIC_SESSION_MS = 6_000


def tasks(c: Container) -> list[int]:
    out: list[int] = []
    for e in c.events():
        if e["event"] in ("tasks_assigned", "rebalance_completed"):
            out = [int(t.split()[-1]) for t in e["tasks"]]
    return out


def rebalances(c: Container) -> int:
    return sum(e["event"] == "rebalance_started" for e in c.events())


def kill(bootstrap: str, rate: int, tmp: Path, static: bool) -> dict[str, float]:
    """(a) with ``static``, else (b)."""
    source = f"bench-restart-{uuid.uuid4().hex[:6]}"
    out = f"bench-out-{uuid.uuid4().hex[:6]}"
    asyncio.run(create(bootstrap, source))
    asyncio.run(create(bootstrap, out))
    job_id = uuid.uuid4().hex[:8]
    session = STATIC_SESSION_MS if static else DYNAMIC_SESSION_MS
    extra = {"job.coordinator.session.timeout.ms": session, "task.progress.interval.ms": 200}

    def start(n: int, log: str) -> Container:
        ids = {"job.container.id": f"bench-{n}"} if static else {}
        return Container(bootstrap, source, out, job_id, tmp / log, {**extra, **ids})

    survivor, victim = start(0, f"{static}-0.log"), start(1, f"{static}-1.log")
    again = None
    feeder = Feeder(bootstrap, source, rate)
    try:
        wait_until(lambda: sorted(held(c) for c in (survivor, victim)) == [6, 6], 120, "a group")
        feeder.start()
        time.sleep(5)
        moved, before = tasks(victim), rebalances(survivor)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        killed_at = time.time()
        if static:
            again = start(1, f"{static}-1b.log")
            wait_until(lambda: tasks(again) == moved, 120, "the restarted member's tasks")
        else:
            wait_until(lambda: held(survivor) == PARTITIONS, 120, "the survivor's takeover")
        time.sleep(3)
        rebalanced = rebalances(survivor) - before
    finally:
        feeder.halt.set()
        feeder.join(30)
        time.sleep(2)
        for c in (survivor, victim, *([again] if again else [])):
            c.stop()
    times = asyncio.run(output_times(bootstrap, out))
    after = [min(t / 1000 for t in times[p] if t / 1000 > killed_at) for p in moved]
    gaps = []
    for p in moved:
        around = sorted(t / 1000 for t in times[p] if killed_at - 5 <= t / 1000)
        gaps.append(max(b - a for a, b in itertools.pairwise(around)))
    stages: dict[str, float] = {}
    if again is not None:  # where the restart's time goes, from its log
        at = {e["event"]: _at(e) for e in reversed(again.events())}  # first of each
        first = min(
            _at(e) for e in again.events() if e["event"] == "progress" and e["processed"] > 0
        )
        stages = {
            "python_started_s": at["event_loop_chosen"] - killed_at,
            "group_joined_s": at["static_member_joined"] - killed_at,
            "tasks_started_s": at["tasks_assigned"] - killed_at,
            "first_processed_s": first - killed_at,
        }
    return {
        **stages,
        "first_output_s": min(after) - killed_at,
        "all_tasks_s": max(after) - killed_at,
        "longest_gap_s": max(gaps),
        "survivor_rebalances": rebalanced,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=6_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with broker() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        results: dict[str, list[dict[str, float]]] = {"static": [], "dynamic": []}
        joins = []
        for _ in range(args.rounds):
            results["static"].append(kill(bootstrap, args.rate, Path(tmp), static=True))
            results["dynamic"].append(kill(bootstrap, args.rate, Path(tmp), static=False))
            joins.append(join(bootstrap, args.rate, Path(tmp)))
        for kind, runs in results.items():
            print(f"({kind}) kill -9, {len(runs)} rounds, medians:")
            for key in runs[0]:
                print(f"  {key:22} {statistics.median(r[key] for r in runs):8.2f}")
        pauses = [p for j in joins for p in j["pauses"]]
        ratio = statistics.median(j["during"] / j["steady"] for j in joins if j["steady"])
        print(
            f"(join) moved tasks' pause: median {statistics.median(pauses):.2f} s, "
            f"max {max(pauses):.2f} s; kept tasks' rate during/before: {ratio:.2f}"
        )


if __name__ == "__main__":
    main()
