"""The pipeline's PySpark batch job: page views from CSV to the framed Kafka topic.

    python -m examples.pipeline.spark_job --input data/pipeline/page-views.csv \\
        --bootstrap 127.0.0.1:9092 --topic page-views [--spark-partitions 4]

Spark runs in local mode. Each row becomes one record keyed by its page, with the JSON value
{"member_id", "page", "ts"}; every Spark partition is one upstream task that ends the batch
with a watermark (its greatest ts) and end-of-stream on every partition of the topic, so the
samzapy job reading it finishes by itself. Prints the write summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from samzapy.spark import local_session, write_stream


def main() -> None:
    parser = argparse.ArgumentParser(description="write page views to Kafka, framed")
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="page-views")
    parser.add_argument("--spark-partitions", type=int, default=4)
    parser.add_argument("--method", choices=["sink", "producer"], default=None)
    args = parser.parse_args()
    started = time.monotonic()
    spark = local_session("pageviews-pipeline")
    try:
        df = (
            spark.read.option("header", True)
            .schema("member_id STRING, page STRING, ts LONG")
            .csv(str(args.input))
            .repartition(args.spark_partitions)
        )
        extra = {} if args.method is None else {"method": args.method}
        summary = write_stream(
            df,
            bootstrap_servers=args.bootstrap,
            topic=args.topic,
            key_column="page",
            timestamp_column="ts",
            value_columns=["member_id", "page", "ts"],
            **extra,  # type: ignore[arg-type]
        )
    finally:
        spark.stop()
    print(
        json.dumps(
            {
                "rows": summary.rows,
                "spark_partitions": summary.spark_partitions,
                "topic_partitions": summary.topic_partitions,
                "write_s": round(summary.seconds, 3),
                "total_s": round(time.monotonic() - started, 3),
                "method": summary.method,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
