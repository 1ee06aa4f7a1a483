"""The store's write path in-process: a count (``get`` + ``put`` per message) on RocksDB with
a changelog, as ``open_store`` assembles it for a task, at several settings, in interleaved
rounds; CPU time per message and changelog records per message.

No broker: the changelog sender only counts its records, and a "commit" (``TaskStores.flush``'s
store side: write-backs and changelog records) runs every ``--commit-every`` messages. Each
message's key is one of ``--keys`` (the keys a task sees), drawn at random.

Variants (the store options of each; the rest are defaults):

- ``default``: the shipped defaults;
- ``per-write``: ``write.buffer.max.bytes: 0``, every write to RocksDB and the changelog at once;
- ``cache-all``: ``object.cache.size`` larger than the keys;
- ``cache-tenth``: ``object.cache.size`` a tenth of the keys (a working set 10x the cache).

Printed: the median µs of CPU per message of each variant, its median per-round ratio to
``default``, and changelog records per message.

Usage: python bench/bench_store.py [--messages N] [--keys K] [--rounds R] [--commit-every C]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from samzapy.api.system import TaskName
from samzapy.storage.registry import OpenStore, open_store
from samzapy.system.serde import BytesSerde, LongSerde

TASK = TaskName("Partition 0")


def variants(keys: int) -> dict[str, dict[str, Any]]:
    return {
        "default": {},
        "per-write": {"write.buffer.max.bytes": 0},
        "cache-all": {"object.cache.size": keys * 2},
        "cache-tenth": {"object.cache.size": max(1, keys // 10)},
    }


def commit(opened: OpenStore) -> None:
    """The store side of a commit (``TaskStores.flush`` without the producer flush)."""
    if opened.buffer is not None:
        opened.buffer.write_back()


def run(options: dict[str, Any], order: list[bytes], commit_every: int) -> tuple[float, int]:
    """CPU seconds of counting ``order``, and changelog records sent."""
    records = 0

    def send(key: bytes, value: bytes | None) -> None:
        nonlocal records
        records += 1

    with tempfile.TemporaryDirectory(prefix="samzapy-bench-store-") as tmp:
        opened = open_store(
            "counts",
            TASK,
            Path(tmp),
            {"factory": "rocksdb", **options},
            BytesSerde(),
            LongSerde(),
            changelog=send,
        )
        store = opened.store
        get, put = store.get, store.put
        t0 = time.process_time()
        for start in range(0, len(order), commit_every):
            for key in order[start : start + commit_every]:
                put(key, (get(key) or 0) + 1)
            commit(opened)
        seconds = time.process_time() - t0
        total = sum(v for _, v in store.all())
        store.close()
    if total != len(order):
        raise SystemExit(f"the counts sum to {total}, expected {len(order)}")
    return seconds, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=12_500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commit-every", type=int, default=100_000)
    args = parser.parse_args()
    rng = random.Random(7)
    names = [f"key{i:05d}".encode() for i in range(args.keys)]
    order = [rng.choice(names) for _ in range(args.messages)]
    chosen = variants(args.keys)
    cpu: dict[str, list[float]] = {name: [] for name in chosen}
    ratios: dict[str, list[float]] = {name: [] for name in chosen}
    records: dict[str, int] = {}
    print(
        f"{args.messages:,} messages over {args.keys:,} keys, a commit every "
        f"{args.commit_every:,}; {args.rounds} interleaved rounds"
    )
    for _ in range(args.rounds):
        this_round: dict[str, float] = {}
        for name, options in chosen.items():
            seconds, records[name] = run(options, order, args.commit_every)
            this_round[name] = seconds / args.messages * 1e6
            cpu[name].append(this_round[name])
        for name in chosen:
            ratios[name].append(this_round[name] / this_round["default"])
    for name in chosen:
        print(
            f"{name:12} {statistics.median(cpu[name]):6.2f} µs CPU/msg  "
            f"{statistics.median(ratios[name]):5.2f}x default  "
            f"{records[name] / args.messages:.3f} changelog records/msg"
        )


if __name__ == "__main__":
    main()
