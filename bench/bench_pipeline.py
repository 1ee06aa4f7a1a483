"""The pipeline's end-to-end rate: Spark writes N page views to Kafka (framed), then the
samzapy job of configs/pageviews-pipeline.yaml repartitions, counts (RocksDB + changelog),
enriches (HTTP lookups, concurrency 16) and finishes by itself.

Reference, in the same run and on the same topic: a plain aiokafka loop that only reads and
decodes every record of ``page-views`` (what any consumer must do at least).

    python bench/bench_pipeline.py [--rows 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from examples.pipeline.dataset import generate  # noqa: E402
from examples.pipeline.demo import Broker, run_pipeline  # noqa: E402
from samzapy.control import decode  # noqa: E402


async def plain_read(bootstrap: str, topic: str) -> tuple[int, float]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        # seek to the beginning offsets explicitly: seek_to_beginning() is lazy, and a
        # position() right after it can report the end (seen with Kafka 4.3).
        for tp, offset in (await consumer.beginning_offsets(tps)).items():
            consumer.seek(tp, offset)
        ends = await consumer.end_offsets(tps)
        started = time.perf_counter()
        n = 0
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for batch in (await consumer.getmany(timeout_ms=500, max_records=5000)).values():
                for record in batch:
                    kind, _ = decode(record.value)
                    n += kind == 0
        return n, time.perf_counter() - started
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="samzapy-bench-") as tmp:
        broker = Broker(Path(tmp) / "kafka")
        broker.up()
        try:
            csv_path = generate(args.rows, Path(tmp) / "page-views.csv")
            result = run_pipeline(broker.bootstrap, csv_path, Path(tmp), Path(tmp))
            assert result.code == 0, "the samzapy job failed"
            counted = sum(int(e["views"]) for e in result.counts.values())
            assert counted == args.rows, f"counted {counted} of {args.rows}"
            read, read_s = asyncio.run(plain_read(broker.bootstrap, "page-views"))
        finally:
            broker.down()
    written = result.written
    spark_rate = written["rows"] / written["write_s"]
    daemon_rate = args.rows / result.elapsed
    plain_rate = read / read_s
    print(f"rows: {args.rows:,}; Spark write method: {written['method']}")
    print(f"Spark -> Kafka (framed)                   {spark_rate:12,.0f} rows/s")
    print(
        f"samzapy job, start to finish (all stages) {daemon_rate:12,.0f} rows/s   "
        f"plain aiokafka read+decode {plain_rate:12,.0f} rows/s   "
        f"ratio {daemon_rate / plain_rate:.2f}"
    )


if __name__ == "__main__":
    main()
