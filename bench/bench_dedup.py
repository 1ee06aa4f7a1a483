"""The cost of origins: a two-stage job through an intermediate stream, with its records'
origins (the default: the reader drops what a restarted writer sends again) beside the same
job without them (``streams.mid.samza.origins: false``), in interleaved rounds.

One broker, an 8-partition topic of N messages of 100 bytes (default 1,000,000) whose first 8
bytes are one of K keys (default 100,000). The job, run as bench_kafka's are (a fresh process,
`samzapy run` with Kafka checkpoints, the log reporter and JSON logs, measured from its first
message to the end of its graceful stop, at 2N messages processed: both stages): stage 1
forwards every message to the intermediate stream ``mid`` (8 partitions) keyed by its first 8
bytes; stage 2 counts it in a RocksDB store with a Kafka changelog (``get`` + ``put``).

A third variant, ``padded``, is the job without origins whose stage 1 adds as many bytes to
each message as an origin does (type 5: 9 bytes and the input offset's, at an epoch and an
ordinal of 0): what the bytes cost, apart from the work.

Printed per variant: median rate (messages of both stages per second) and CPU time per
message, and the median per-round ratio to ``no-origins``. The goal: origins >= 0.97 of the
rate. ``--against COMMIT`` adds the job on an earlier commit (where ``samza.origins`` does not
exist, its records carry no origin).

Usage: python bench/bench_dedup.py [--messages N] [--keys K] [--rounds R]
                                   [--commit-ms 5000] [--against COMMIT]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kafka import (
    PARTITIONS,
    Variant,
    arguments,
    commit_settings,
    interleaved,
    job_yaml,
    prepared,
    report,
)
from bench_state import KEY_BYTES, fill_keyed
from rocksdict import AccessType, Options, Rdict

from samzapy import InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream

STORE = "counts"


class ForwardAndCount(InitableTask, StreamTask):
    """Stage 1: forward each input message to ``mid`` keyed by its first 8 bytes; stage 2:
    count the messages of ``mid`` per key in the store ``counts``."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)
        self.mid = SystemStream("kafka", context.config["app.mid"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        message = envelope.message
        key = message[:KEY_BYTES]
        if envelope.system_stream_partition.stream == self.mid.stream:
            store = self.store
            store.put(key, (store.get(key) or 0) + 1)
        else:
            collector.send(OutgoingMessageEnvelope(self.mid, message, key=key))


class PaddedForwardAndCount(ForwardAndCount):
    """``ForwardAndCount`` whose stage 1 adds ``app.padding`` bytes to each message
    (``padding``): what the origin's bytes cost without the origin."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.system_stream_partition.stream == self.mid.stream:
            super().process(envelope, collector, coordinator)
            return
        message = envelope.message
        collector.send(OutgoingMessageEnvelope(self.mid, message + self.padding, key=message[:8]))

    def init(self, context: Any) -> None:
        super().init(context)
        self.padding = b"p" * int(context.config["app.padding"])


def padding(n: int) -> int:
    """The bytes an origin adds to a record (type 5) at the largest input offset of ``n``
    messages over the bench's partitions (epochs and ordinals 0, which take no byte)."""
    from samzapy.control.wire import SIZES_AT  # here: --against's job imports this module

    largest = -(-n // PARTITIONS)
    return SIZES_AT + (largest.bit_length() + 7) // 8  # the source, the sizes byte, the offset


def counted_once(workdir: Path, n: int) -> str:
    """Check every run's store counted each of the ``n`` input messages once (a reader that
    dropped a record it never applied would run faster for counting less)."""
    runs = sorted(workdir.glob("state-*"))
    for state in runs:
        total = 0
        for partition in state.glob(f"*/{STORE}/Partition_*[0-9]"):
            db = Rdict(str(partition), Options(raw_mode=True), access_type=AccessType.read_only())
            total += sum(int.from_bytes(v, "big", signed=True) for v in db.values())
            db.close()
        if total != n:
            raise SystemExit(f"{state.name} counted {total:,} messages, not {n:,}")
    return f"each of the {len(runs)} runs counted the {n:,} messages once"


def two_stage_job(
    bootstrap: str, workdir: Path, commit_ms: int | None, origins: bool, padded: int = 0
) -> Any:
    def job(source: str, sink: str, name: str) -> str:
        mid = f"{name}-mid"
        extra: dict[str, Any] = {
            "app.mid": mid,
            "job.logged.store.base.dir": str(workdir / f"state-{name}"),
            "streams.mid.samza.system": "kafka",
            "streams.mid.samza.physical.name": mid,
            "streams.mid.samza.intermediate": True,
            "streams.mid.partitions": PARTITIONS,
            f"stores.{STORE}.factory": "rocksdb",
            f"stores.{STORE}.key.serde": "bytes",
            f"stores.{STORE}.msg.serde": "long",
            f"stores.{STORE}.changelog": f"kafka.{name}-changelog",
        }
        if not origins:
            extra["streams.mid.samza.origins"] = False
        if padded:
            extra["app.padding"] = padded
        text = job_yaml(
            bootstrap,
            source,
            name=name,
            task_class=f"bench_dedup:{'Padded' if padded else ''}ForwardAndCount",
            commit_ms=commit_ms,
            extra=extra,
        )
        cfg = json.loads(text)
        cfg["task.inputs"].append(f"kafka.{mid}")
        return json.dumps(cfg, indent=2)

    return job


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.set_defaults(commit_ms=commit_settings("5000"))
    args = parser.parse_args()

    async def fill(bootstrap: str, topic: str, n: int) -> None:
        await fill_keyed(bootstrap, topic, n, args.keys)

    about = f", {min(args.keys, args.messages):,} keys"
    with prepared(args, "bench-dedup-in", fill, about) as (bootstrap, before, workdir, source, n):
        variants: list[Variant] = []
        for ms in args.commit_ms:
            tag = ms or "default"
            variants.append(
                Variant(f"no-origins@{tag}", two_stage_job(bootstrap, workdir, ms, False))
            )
            variants.append(Variant(f"origins@{tag}", two_stage_job(bootstrap, workdir, ms, True)))
            variants.append(
                Variant(
                    f"padded@{tag}",
                    two_stage_job(bootstrap, workdir, ms, False, padded=padding(args.messages)),
                )
            )
            if before is not None:
                label = f"before:{(args.against or '')[:10]}@{tag}"
                variants.append(Variant(label, two_stage_job(bootstrap, workdir, ms, True), before))
        # Both stages count: the job stops once it processed 2N messages.
        interleaved(variants, args.rounds, bootstrap, source, 2 * n, workdir, warm_up=n)
        figures = report(variants, reference=variants[0].name)
        print(counted_once(workdir, n))
        print(f"load average {os.getloadavg()[0]:.2f} at the end")
        for ms in args.commit_ms:
            tag = ms or "default"
            ratio = figures[f"origins@{tag}"]["rate_ratio"]
            print(f"origins@{tag} / no-origins@{tag}: {ratio:.3f} of the rate (goal >= 0.97)")
        if args.json:
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
