"""Spark -> Kafka: how fast samzapy.spark.write_stream writes, beside Spark's plain Kafka sink.

N page-view rows (memberId, page, ts; default 1,000,000) generated in Spark (``spark.range``
and expressions, 4 Spark partitions), written to an 8-partition topic by

(a) Spark's own Kafka sink, key and JSON value only, no framing, no checks: the reference;
(b) ``write_stream(..., method="sink")``: framed, checked, control messages;
(c) ``write_stream(..., method="producer")``: the same through samzapy's producer in each
    Spark task's Python worker.

Each is run twice (rounds interleaved), each round on a fresh topic; the best round counts.
Prints rows/s and the ratio of each to (a). Every producer is idempotent with ``acks=all``
and otherwise has its defaults. The broker is SAMZAPY_KAFKA_BOOTSTRAP, or 127.0.0.1:9092.

Usage: python bench/bench_spark.py [--rows N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Callable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from samzapy.spark import Method, local_session, write_stream

TOPIC_PARTITIONS = 8
SPARK_PARTITIONS = 4
BASE_MS = 1_700_000_000_000

Write = Callable[[DataFrame, str, str], None]


def create_topic(bootstrap: str) -> str:
    topic = f"bench-spark-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, TOPIC_PARTITIONS, 1)])
        finally:
            await admin.close()

    asyncio.run(create())
    return topic


def page_views(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(0, rows, numPartitions=SPARK_PARTITIONS).select(
        (sf.col("id") * 7919 % 100_000).alias("memberId"),
        sf.concat(sf.lit("/page/"), (sf.col("id") % 1000).cast("string")).alias("page"),
        (sf.lit(BASE_MS) + sf.col("id")).alias("ts"),
    )


def plain_sink(df: DataFrame, bootstrap: str, topic: str) -> None:
    records = df.select(
        sf.col("memberId").cast("string").alias("key"),
        sf.to_json(sf.struct(*df.columns)).alias("value"),
    )
    (
        records.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.acks", "all")
        .option("kafka.enable.idempotence", "true")
        .option("topic", topic)
        .save()
    )


def framed(method: Method) -> Write:
    def write(df: DataFrame, bootstrap: str, topic: str) -> None:
        write_stream(
            df,
            bootstrap_servers=bootstrap,
            topic=topic,
            key_column="memberId",
            timestamp_column="ts",
            method=method,
        )

    return write


def best_rates(
    cases: list[tuple[str, Write]], df: DataFrame, bootstrap: str, rows: int, rounds: int
) -> list[float]:
    """Rounds interleave the cases, so a slower spell of a shared machine hits all alike."""
    best = [0.0] * len(cases)
    for _ in range(rounds):
        for i, (_, write) in enumerate(cases):
            topic = create_topic(bootstrap)
            started = time.perf_counter()
            write(df, bootstrap, topic)
            best[i] = max(best[i], rows / (time.perf_counter() - started))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bootstrap = os.environ.get("SAMZAPY_KAFKA_BOOTSTRAP", "127.0.0.1:9092")

    spark = local_session("samzapy-bench-spark")
    try:
        df = page_views(spark, args.rows)
        cases = [
            ("(a) Spark Kafka sink, plain (reference)", plain_sink),
            ('(b) write_stream framed, method="sink"', framed("sink")),
            ('(c) write_stream framed, method="producer"', framed("producer")),
        ]
        # Warm the JVM, the Kafka producers and the Python workers once, unmeasured.
        warm = page_views(spark, 10_000)
        for _, write in cases:
            write(warm, bootstrap, create_topic(bootstrap))
        print(
            f"{args.rows:,} rows, {SPARK_PARTITIONS} Spark partitions (local[2]) -> "
            f"{TOPIC_PARTITIONS}-partition topic at {bootstrap}, best of {args.rounds}"
        )
        rates = best_rates(cases, df, bootstrap, args.rows, args.rounds)
        for (name, _), rate in zip(cases, rates, strict=True):
            print(f"{name:44s} {rate:>10,.0f} rows/s   {rate / rates[0]:.2f} of (a)")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
