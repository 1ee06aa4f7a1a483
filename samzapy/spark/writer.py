"""``write_stream``: a DataFrame written to a Kafka topic as one finished batch of upstream
tasks that samzapy's containers reconcile (or, unframed, as plain Kafka records).

Each Spark partition of the DataFrame is one upstream task, ``spark-<write id>-<i>`` of
``taskCount`` = the number of Spark partitions. A framed write goes in three steps:

1. Check: the key, timestamp and value columns exist, and one Spark job over the DataFrame
   finds no null key or timestamp; it also takes each Spark partition's row count and
   greatest event time. The topic must exist; its partition count is looked up. Nothing has
   been written when any of this fails, or when a framed write finds a partition of the
   topic that ends with an end-of-stream: a batch ended there, and a framed reader would
   stop at it and never read this one.
2. Data: every row becomes a record ``frame(JSON of the value columns)`` keyed by the key
   column's string, on partition ``murmur2(key) % partitions`` (Kafka's default partitioner,
   ``samzapy.system.partitioner.partition_for``), written by Spark's own Kafka sink
   (``method="sink"``, the default, all in the JVM) or by samzapy's Kafka producer in each
   Spark task's Python worker (``method="producer"``). Step 3 starts only once every task has
   succeeded and Kafka acknowledged all of its records (idempotent producers, ``acks=all``).
3. Control: to every partition of the topic, one watermark per task that wrote rows with a
   timestamp column (its greatest event time in ms), then one end-of-stream per task,
   empty tasks included (without them the batch would never end). A write whose step 2
   failed leaves no end-of-stream, so the batch is never taken for complete; a Spark task
   retried after a failure writes its rows again (at least once), never after its
   end-of-stream.

The DataFrame is evaluated twice (steps 1 and 2): a non-deterministic one (random values, a
source that changes) should be cached first, so that both see the same rows in the same
partitions.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from pyspark import RDD
from pyspark.serializers import NoOpSerializer
from pyspark.sql import DataFrame

from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.spark.columns import RecordColumns
from samzapy.spark.errors import SparkWriteError, client_error, options_error
from samzapy.spark.producer import (
    SYSTEM,
    control_records,
    ended_batch,
    kafka_config,
    run,
    send_records,
    topic_partition_count,
    write_partition,
)
from samzapy.system.kafka import kafka_settings

Method = Literal["sink", "producer"]
#: The faster method on bench/bench_spark.py.
DEFAULT_METHOD: Method = "sink"
#: What both methods' producers use unless ``kafka_options`` says otherwise.
_SINK_DEFAULTS: Mapping[str, str] = {"acks": "all", "enable.idempotence": "true"}
#: Options that would break the guarantees above.
_REFUSED_OPTIONS = {
    "acks": "records must be acknowledged by every in-sync replica before end-of-stream",
    "enable.idempotence": "a retried batch must not duplicate or reorder records",
    "partitioner.class": "records go to Kafka's default (murmur2) partition of their key",
    "bootstrap.servers": "pass bootstrap_servers",
    "key.serializer": "keys are the key column's UTF-8 string",
    "value.serializer": "values are the JSON of the value columns",
}


@dataclass(frozen=True)
class WriteSummary:
    """What one ``write_stream`` wrote."""

    topic: str
    #: Rows written (user records).
    rows: int
    #: Spark partitions of the DataFrame (1 for a DataFrame of none): the upstream
    #: ``taskCount``.
    spark_partitions: int
    topic_partitions: int
    #: Wall-clock seconds from the first check to the last acknowledgement.
    seconds: float
    method: Method
    framed: bool
    #: The upstream task names, ``spark-<write id>-<i>`` (empty when not framed).
    task_names: tuple[str, ...]

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")


def write_stream(
    df: DataFrame,
    *,
    bootstrap_servers: str,
    topic: str,
    key_column: str,
    timestamp_column: str | None = None,
    value_columns: Sequence[str] | None = None,
    framed: bool = True,
    method: Method = DEFAULT_METHOD,
    write_id: str | None = None,
    kafka_options: Mapping[str, Any] | None = None,
) -> WriteSummary:
    """Write ``df`` to the existing Kafka ``topic``, one record per row (see the module doc).

    ``key_column``: its value as a string is the record key (UTF-8) and picks the partition;
    never null. ``timestamp_column``: the event time (timestamp, or integer epoch ms), never
    null; each task's watermark is its greatest value (no watermarks without it).
    ``value_columns``: the columns of the JSON value (default: all, the key's included).
    ``framed=False`` writes plain records: no type byte, no control messages, no event time
    (Kafka's timestamp is the write's; ``timestamp_column`` is refused).
    ``method``: ``"sink"`` (Spark's Kafka sink) or ``"producer"`` (samzapy's Python
    producer in each task). ``write_id`` names the tasks ``spark-<write_id>-<i>``
    (default: a random id, unique per write). ``kafka_options``: producer settings by
    Kafka's names (``linger.ms``, ``batch.size``, ``compression.type``...), the ones
    samzapy's Kafka producer takes (a job file's ``producer.*`` keys): it sends the control
    records with them, so they are checked before anything is written.

    Raises SparkWriteError naming the column, the topic or the failed step.
    """
    started = time.monotonic()
    if method not in ("sink", "producer"):
        raise SparkWriteError(f"method must be 'sink' or 'producer', got {method!r}")
    if not framed and timestamp_column is not None:
        raise SparkWriteError(
            f"timestamp_column {timestamp_column!r} needs framed=True: a plain record carries "
            "no event time (Spark's Kafka sink cannot set a record's timestamp, so Kafka "
            "stamps it with the time of the write); name the column in value_columns and "
            "read it with with_timestamp",
            column=timestamp_column,
        )
    options = _checked_options(bootstrap_servers, kafka_options)
    columns = RecordColumns.of(
        df, key_column=key_column, timestamp_column=timestamp_column, value_columns=value_columns
    )
    # 1. Check, before anything is written.
    try:
        partitions = run(topic_partition_count(bootstrap_servers, topic))
        ended = run(ended_batch(bootstrap_servers, topic, partitions)) if framed else None
    except StreamSystemError as exc:
        raise SparkWriteError(
            f"cannot look up Kafka topic {topic!r} at {bootstrap_servers}; nothing was "
            f"written: {client_error(exc)}"
        ) from exc
    if ended is not None:
        raise SparkWriteError(
            f"Kafka topic {topic!r} holds a finished batch (its partition {ended[0]} ends with "
            f"the end-of-stream of {ended[1]!r}): a samzapy job reading it framed ends there "
            "and would never read this write; write each batch to a topic of its own, or "
            "delete the topic and create it again; nothing was written"
        )
    scanned = columns.scan()
    tasks = max(df.rdd.getNumPartitions(), 1)  # an empty DataFrame still ends its batch
    prefix = f"spark-{write_id or uuid.uuid4().hex[:12]}"
    names = tuple(f"{prefix}-{i}" for i in range(tasks)) if framed else ()
    # 2. Data.
    if method == "sink":
        _write_with_sink(df, columns, bootstrap_servers, topic, framed, options)
        rows = sum(scan.rows for scan in scanned.values())
    else:
        rows = _write_with_producer(columns, bootstrap_servers, topic, partitions, framed, options)
    # 3. Control.
    if framed:
        max_event_times = {i: scan.max_event_time for i, scan in scanned.items()}
        controls = control_records(list(names), max_event_times, partitions)
        try:
            run(send_records(bootstrap_servers, topic, controls, options))
        except StreamSystemError as exc:
            raise SparkWriteError(
                f"the rows are in Kafka topic {topic!r} but its watermarks and end-of-stream "
                f"are not (a reader waits for the batch to end): {client_error(exc)}"
            ) from exc
    return WriteSummary(
        topic=topic,
        rows=rows,
        spark_partitions=tasks,
        topic_partitions=partitions,
        seconds=time.monotonic() - started,
        method=method,
        framed=framed,
        task_names=names,
    )


def _checked_options(servers: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` once checked as samzapy's producer takes them: whatever the method, it
    sends the control records with them, after the rows (so a problem found only then would
    leave rows without their end-of-stream)."""
    for name in options or {}:
        reason = _REFUSED_OPTIONS.get(name)
        if reason is not None:
            raise SparkWriteError(f"kafka_options cannot set {name!r}: {reason}")
    try:
        kafka_settings(SYSTEM, kafka_config(servers, options))
    except ConfigError as exc:
        raise SparkWriteError(f"{options_error(exc)}; nothing was written") from exc
    return dict(options or {})


def _write_with_sink(
    df: DataFrame,
    columns: RecordColumns,
    servers: str,
    topic: str,
    framed: bool,
    options: Mapping[str, Any],
) -> None:
    """Spark's Kafka sink. Without a partition column it leaves the partition to Kafka's
    default partitioner, which is murmur2 of the key bytes, as ``partition_for``."""
    value = columns.framed_value() if framed else columns.json_value()
    records = df.select(columns.key().alias("key"), value.alias("value"))
    writer = records.write.format("kafka").option("topic", topic)
    writer = writer.option("kafka.bootstrap.servers", servers)
    for name, setting in {**_SINK_DEFAULTS, **options}.items():
        writer = writer.option(f"kafka.{name}", str(setting))
    try:
        writer.save()
    except Exception as exc:
        raise SparkWriteError(
            f"Spark's Kafka sink failed writing to Kafka topic {topic!r} at {servers}: "
            f"{_failure(exc)}"
        ) from exc


def _write_with_producer(
    columns: RecordColumns,
    servers: str,
    topic: str,
    partitions: int,
    framed: bool,
    options: Mapping[str, Any],
) -> int:
    """samzapy's producer in each task's Python worker; the number of records sent."""
    packed = columns.df.select(columns.packed(framed=framed))
    context = packed.sparkSession.sparkContext
    jvm = context._jvm
    if jvm is None:
        raise SparkWriteError('method="producer" needs a classic SparkSession (not Spark Connect)')
    # A Dataset of byte arrays reaches Python as plain bytes: no Row is built per record.
    binary = getattr(packed._jdf, "as")(jvm.org.apache.spark.sql.Encoders.BINARY())
    rdd: RDD[bytes] = RDD(binary.toJavaRDD(), context, NoOpSerializer())
    write = partial(
        write_partition, servers=servers, topic=topic, partitions=partitions, options=options
    )
    try:
        results = rdd.mapPartitionsWithIndex(write).collect()
    except Exception as exc:
        raise SparkWriteError(
            f"samzapy's producer failed writing to Kafka topic {topic!r} at {servers}: "
            f"{_failure(exc)}"
        ) from exc
    return sum(count for _, count in results)


def _failure(exc: BaseException) -> str:
    """What made a Spark job fail: the innermost cause of its JVM exception, whose own
    first line (``An error occurred while calling o123.save.``) says nothing. A Python
    worker's exception is the last line of its traceback; the whole chain stays in
    ``__cause__``."""
    java = getattr(exc, "java_exception", None)
    root = None
    try:
        while java is not None:
            root, java = java, java.getCause()
        if root is None:
            return _first_line(exc)
        name = str(root.getClass().getName())
        message = str(root.getMessage() or "").strip()
    except Exception:  # the JVM went away: keep what Python holds
        return _first_line(exc)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if name.endswith(".PythonException") and lines:
        return lines[-1]
    return f"{name.rsplit('.', 1)[-1]}: {lines[0]}" if lines else name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = ["DEFAULT_METHOD", "Method", "WriteSummary", "write_stream"]
