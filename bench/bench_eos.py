"""Exactly-once beside at-least-once on a real broker, in one run.

bench_kafka's harness: every job runs as `samzapy run` (Kafka checkpoints, logs, metrics) in
a process of its own, in interleaved rounds with the plain aiokafka loop as the reference,
with the process CPU time per message beside the rate. For each guarantee, at the default
commit interval (60 s) and at 100 ms:

- pass-through: a sync task copying each message to an output topic;
- stateful count: bench_state's RocksDB count per key (100,000 keys, Kafka changelog).

Then the end-to-end latency (p50, p99) of the pass-through at half the at-least-once
pass-through's median rate, with a commit interval of 1 s, read ``read_committed`` for
exactly-once (its outputs become visible at each commit).

With ``--against COMMIT`` the exactly-once jobs also run on that earlier commit, in the
same rounds, and the ratios of this checkout's to that commit's are printed.

Usage: python bench/bench_eos.py [--messages N] [--rounds R] [--latency-seconds S]
       [--against COMMIT]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_kafka import (
    Variant,
    arguments,
    interleaved,
    latency,
    passthrough_job,
    prepared,
    report,
)
from bench_state import CountJob, fill_keyed

GUARANTEES = ("at-least-once", "exactly-once")
INTERVALS = (None, 100)  # None: the default, 60 s


def variants(bootstrap: str, workdir: Path, before: Path | None = None) -> list[Variant]:
    out = [Variant("plain")]
    for ms in INTERVALS:
        for guarantee in GUARANTEES:
            job = passthrough_job(bootstrap, ms, **{"task.processing.guarantee": guarantee})
            count = CountJob(bootstrap, workdir, ms, 0, guarantee)
            tag = f"{guarantee}@{ms or 'default'}"
            out.append(Variant(f"pass-through {tag}", job))
            out.append(Variant(f"count {tag}", count))
            if before is not None and guarantee == "exactly-once":
                earlier = CountJob(bootstrap, workdir, ms, 0, guarantee)
                out.append(Variant(f"before: pass-through {tag}", job, before))
                out.append(Variant(f"before: count {tag}", earlier, before))
    return out


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.set_defaults(messages=300_000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    args = parser.parse_args()

    async def fill(bootstrap: str, topic: str, n: int) -> None:
        await fill_keyed(bootstrap, topic, n, 100_000)

    with prepared(args, "bench-eos-in", fill) as (bootstrap, before, workdir, source, n):
        measured = variants(bootstrap, workdir, before)
        interleaved(measured, args.rounds, bootstrap, source, n, workdir)
        figures = report(measured)
        for job in ("pass-through", "count"):
            for ms in INTERVALS:
                tag = ms or "default"
                by_name = {v.name: v for v in measured}
                pairs = list(
                    zip(
                        by_name[f"{job} exactly-once@{tag}"].runs,
                        by_name[f"{job} at-least-once@{tag}"].runs,
                        strict=True,
                    )
                )
                rate = statistics.median(a["rate"] / b["rate"] for a, b in pairs)
                cpu = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
                print(
                    f"{job}@{tag}: exactly-once / at-least-once, median of per-round ratios: "
                    f"rate {rate:.2f} (goal >= 0.95 at the default), CPU per message {cpu:.2f}"
                )
                if before is not None:
                    now = by_name[f"{job} exactly-once@{tag}"].runs
                    then = by_name[f"before: {job} exactly-once@{tag}"].runs
                    pairs = list(zip(now, then, strict=True))
                    rate = statistics.median(a["rate"] / b["rate"] for a, b in pairs)
                    cpu = statistics.median(a["cpu_us"] / b["cpu_us"] for a, b in pairs)
                    print(
                        f"{job} exactly-once@{tag}: this checkout / {args.against[:10]}, "
                        f"median of per-round ratios: rate {rate:.2f}, CPU per message {cpu:.2f}"
                    )
        rate = figures["pass-through at-least-once@default"]["rate"] / 2
        for guarantee in GUARANTEES if args.latency_seconds > 0 else ():
            p50, p99, count = asyncio.run(
                latency(
                    bootstrap,
                    rate,
                    args.latency_seconds,
                    workdir,
                    extra={"task.processing.guarantee": guarantee},
                    committed=guarantee == "exactly-once",
                )
            )
            print(
                f"latency, {guarantee}, commit.ms 1000, {rate:,.0f} msg/s, {count:,} messages: "
                f"p50 {p50:.0f} ms, p99 {p99:.0f} ms"
            )


if __name__ == "__main__":
    main()
