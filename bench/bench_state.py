"""The cost of state: a stateful count beside a pass-through job and the plain aiokafka loop, in
interleaved rounds, with the client's CPU time per message; then the changelog restore rate.

One broker, an 8-partition topic of N messages of 100 bytes (default 1,000,000) whose first 8
bytes are one of K keys (default 100,000; message i on partition i % 8, so each task counts
its own K/8 keys). Each variant runs as bench_kafka's do (a fresh process, `samzapy run` with
Kafka checkpoints, the log reporter and JSON logs, measured from its first message to the end
of its graceful stop):

- ``plain``: bench_kafka's plain aiokafka loop (consume -> produce);
- ``samzapy@...``: bench_kafka's sync pass-through job;
- ``count@...``: ``get`` + ``put`` per message on a RocksDB store keyed by the message's first
  8 bytes, with a Kafka changelog, the store's settings as shipped: its write buffer sends
  each key to RocksDB and the changelog once per commit;
- ``count+cache@...``: the same with a read cache holding every key of a task
  (``stores.counts.object.cache.size: 20000`` per task);
- ``count+tenth@...``: the same with a read cache of a tenth of a task's keys (1,250): a
  working set ten times the cache.

Printed per variant: median rate and CPU time per message, and the median per-round ratio to
``plain``; for the counts, changelog records per message. The goals: the count >= 0.9 of the
pass-through's rate, and ``count+tenth`` no slower than ``count`` (median per-round ratios).
``--against COMMIT`` adds ``before:...`` variants of the pass-through and the count from a
temporary worktree of COMMIT.

Then the restore: the local state of the last ``count@5000`` run is deleted and its job started
again; every store is restored from its changelog up to the checkpointed offsets before the
job processes one new message per partition. Printed: the records replayed per second, from
the ``store_restored`` events (records, elapsed_s).

Usage: python bench/bench_state.py [--messages N] [--keys K] [--rounds R]
                                   [--commit-ms 5000,default] [--against COMMIT]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kafka import (
    PARTITIONS,
    PAYLOAD,
    Variant,
    arguments,
    end_offsets_total,
    interleaved,
    job_yaml,
    passthrough_variants,
    prepared,
    report,
    samzapy_run,
)

from samzapy import InitableTask, StreamTask

STORE = "counts"
KEY_BYTES = 8
CACHE_SIZE = 20_000
SMALL_CACHE_SIZE = 1_250


class Count(InitableTask, StreamTask):
    """Counts messages per key (the first 8 bytes) in the store ``counts``."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        key = envelope.message[:KEY_BYTES]
        store = self.store
        store.put(key, (store.get(key) or 0) + 1)


def keyed_message(i: int, keys: int) -> bytes:
    """100 bytes, the first 8 being key ``i % keys`` in decimal."""
    return b"%08d" % (i % keys) + PAYLOAD[KEY_BYTES:]


async def fill_keyed(
    bootstrap: str,
    topic: str,
    n: int,
    keys: int,
    start: int = 0,
    message: Callable[[int, int], bytes] = keyed_message,
) -> None:
    """Message ``i`` (``message(i, keys)``) on partition ``i % 8``: each partition gets its
    own ``keys / 8`` keys (when 8 divides ``keys``)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    await producer.start()
    try:
        futures = []
        for p in range(PARTITIONS):
            batch = producer.create_batch()
            for i in range(start + p, start + n, PARTITIONS):
                value = message(i, keys)
                if batch.append(key=None, value=value, timestamp=None) is None:
                    futures.append(await producer.send_batch(batch, topic, partition=p))
                    batch = producer.create_batch()
                    batch.append(key=None, value=value, timestamp=None)
            futures.append(await producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class CountJob:
    """Builds the count's job files: each run a new job (name, changelog, state directory)."""

    def __init__(
        self,
        bootstrap: str,
        workdir: Path,
        commit_ms: int | None,
        cache: int,
        guarantee: str = "at-least-once",
    ) -> None:
        self.bootstrap, self.workdir, self.commit_ms, self.cache = (
            bootstrap,
            workdir,
            commit_ms,
            cache,
        )
        self.guarantee = guarantee
        self.last: tuple[str, str, Path] | None = None  # job text, changelog, state directory

    def __call__(self, source: str, sink: str, name: str) -> str:
        changelog, state = f"{name}-changelog", self.workdir / f"state-{name}"
        extra: dict[str, Any] = {
            "job.logged.store.base.dir": str(state),
            f"stores.{STORE}.factory": "rocksdb",
            f"stores.{STORE}.key.serde": "bytes",
            f"stores.{STORE}.msg.serde": "long",
            f"stores.{STORE}.changelog": f"kafka.{changelog}",
            "task.processing.guarantee": self.guarantee,
        }
        if self.cache:
            extra[f"stores.{STORE}.object.cache.size"] = self.cache
        text = job_yaml(
            self.bootstrap,
            source,
            name=name,
            task_class="bench_state:Count",
            commit_ms=self.commit_ms,
            extra=extra,
        )
        self.last = (text, changelog, state)
        return text

    def changelog_records(self) -> int:
        assert self.last is not None
        return asyncio.run(end_offsets_total(self.bootstrap, self.last[1]))


def count_variants(
    bootstrap: str, workdir: Path, commits: list[int | None], before: Path | None, label: str
) -> list[Variant]:
    variants = []
    for ms in commits:
        tag = ms or "default"
        if before is not None:
            job = CountJob(bootstrap, workdir, ms, 0)
            variants.append(Variant(f"before:{label}:count@{tag}", job, before))
        variants.append(Variant(f"count@{tag}", CountJob(bootstrap, workdir, ms, 0)))
        for name, size in (("cache", CACHE_SIZE), ("tenth", SMALL_CACHE_SIZE)):
            job = CountJob(bootstrap, workdir, ms, size)
            variants.append(Variant(f"count+{name}@{tag}", job))
    return variants


def restore(job: CountJob, bootstrap: str, source: str, keys: int, n: int) -> None:
    """Delete the local state of ``job``'s last run, start it again, and print its restore."""
    assert job.last is not None
    text, changelog, state = job.last
    records = asyncio.run(end_offsets_total(bootstrap, changelog))
    shutil.rmtree(state)
    asyncio.run(fill_keyed(bootstrap, source, PARTITIONS, keys, start=n))
    job_file, log = job.workdir / "restore.yaml", job.workdir / "restore.log"
    job_file.write_text(text)
    env = {
        "SAMZAPY_BENCH_MESSAGES": str(PARTITIONS),  # one new message per task
        "SAMZAPY_BENCH_RESULT": str(job.workdir / "restore.json"),
    }
    code = samzapy_run(job_file, log, env)
    if code != 0:
        raise SystemExit(f"the restore failed (exit {code}):\n{log.read_text()[-3000:]}")
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    restored = [e for e in events if e.get("event") == "store_restored"]
    replayed = sum(int(e["records"]) for e in restored)
    seconds = sum(float(e["elapsed_s"]) for e in restored)
    print(
        f"restore of the deleted stores from a {records:,}-record changelog: {replayed:,} "
        f"records in {seconds:.2f} s of store_restored events, {replayed / seconds:,.0f} records/s"
    )


def paired(variants: list[Variant], a: str, b: str) -> tuple[float, float]:
    """The median per-round ratios of variant ``a`` to ``b``: rate, CPU per message."""
    runs = {v.name: v.runs for v in variants}
    pairs = list(zip(runs[a], runs[b], strict=True))
    return (
        statistics.median(x["rate"] / y["rate"] for x, y in pairs),
        statistics.median(x["cpu_us"] / y["cpu_us"] for x, y in pairs),
    )


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    args = parser.parse_args()
    about = f", {min(args.keys, args.messages):,} keys"

    async def fill(bootstrap: str, topic: str, n: int) -> None:
        await fill_keyed(bootstrap, topic, n, args.keys)

    with prepared(args, "bench-state-in", fill, about) as (bootstrap, before, workdir, source, n):
        label = (args.against or "")[:10]
        variants = passthrough_variants(bootstrap, args.commit_ms, before, label)
        counts = count_variants(bootstrap, workdir, args.commit_ms, before, label)
        variants += counts

        def changelog_per_message(variant: Variant, figures: dict[str, float]) -> None:
            if isinstance(variant.job, CountJob):
                figures["changelog_records_per_msg"] = variant.job.changelog_records() / n

        interleaved(variants, args.rounds, bootstrap, source, n, workdir, changelog_per_message)
        figures = report(variants)
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        for ms in args.commit_ms:
            tag = ms or "default"
            for a, b, goal in (
                (f"count@{tag}", f"samzapy@{tag}", 0.9),
                (f"count+tenth@{tag}", f"count@{tag}", 1.0),
            ):
                rate, cpu = paired(variants, a, b)
                print(f"{a} / {b}: {rate:.2f} of the rate (goal >= {goal}), {cpu:.2f} the CPU/msg")
        last = next(v for v in counts if v.name.startswith("count@"))
        restore(last.job, bootstrap, source, args.keys, n)
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
