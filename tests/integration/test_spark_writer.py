"""samzapy.spark.write_stream against real local Spark and the real broker.

Every DataFrame carries ``sparkTask``, the index of the Spark partition that holds the row
(``spark_partition_id()``), in its JSON value: reading the topic back tells which upstream
task wrote each user record, so the order of user records and end-of-stream messages can be
checked per task and per topic partition.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

import samzapy.spark as samzapy_spark
import samzapy.spark.producer as samzapy_producer
import samzapy.spark.writer as samzapy_writer
from samzapy.api.errors import StreamSystemError
from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    EndOfStreamMessage,
    WatermarkMessage,
    decode,
    decode_timed,
)
from samzapy.spark import Method, SparkWriteError, WriteSummary, local_session, write_stream
from samzapy.spark.columns import RecordColumns
from samzapy.spark.session import kafka_connector_jars
from samzapy.system.partitioner import partition_for

pytestmark = pytest.mark.timeout(600)

METHODS: list[Method] = ["sink", "producer"]
BASE_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_session("samzapy-test-spark-writer")
    yield session
    session.stop()


# -- Kafka helpers ----------------------------------------------------------------------------


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"spark-writer-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            await admin.close()

    asyncio.run(create())
    return topic


@dataclass
class Record:
    offset: int
    key: bytes | None
    value: bytes


def read_topic(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    """Every record of every partition, up to the end offsets at the time of the call."""

    async def read() -> dict[int, list[Record]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            for tp, offset in (await consumer.beginning_offsets(tps)).items():
                consumer.seek(tp, offset)
            got: dict[int, list[Record]] = {p: [] for p in range(partitions)}
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                batches = await consumer.getmany(timeout_ms=1000)
                for tp, messages in batches.items():
                    got[tp.partition].extend(Record(m.offset, m.key, m.value) for m in messages)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(read())


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    return [len(records) for records in read_topic(bootstrap, topic, partitions).values()]


# -- DataFrames -------------------------------------------------------------------------------


def page_views(spark: SparkSession, rows: int, spark_partitions: int) -> DataFrame:
    """(memberId, page, ts epoch ms, sparkTask): row ``i`` of ``rows``, in partitions of
    ``spark.range``; ``sparkTask`` is the partition each row is in."""
    return spark.range(0, rows, numPartitions=spark_partitions).select(
        (sf.col("id") % 17).alias("memberId"),
        sf.concat(sf.lit("/page/"), sf.col("id").cast("string")).alias("page"),
        (sf.lit(BASE_MS) + sf.col("id") * 1000).alias("ts"),
        sf.spark_partition_id().alias("sparkTask"),
    )


@dataclass
class Expected:
    """The rows of a DataFrame as the topic must hold them."""

    values: list[dict[str, Any]]
    key_column: str
    #: Greatest ``ts`` (ms) per Spark partition that has rows.
    max_ts: dict[int, int] = field(default_factory=dict)
    #: Each row's event time (ms) as its framed record carries it, by the row's JSON; empty
    #: when the write has no timestamp column (its records carry none).
    times: dict[str, int] = field(default_factory=dict)


def expected(df: DataFrame, key_column: str, value_columns: list[str], ts: str) -> Expected:
    rows = df.collect()
    values = [{c: row[c] for c in value_columns} for row in rows]
    max_ts: dict[int, int] = {}
    times: dict[str, int] = {}
    for row, value in zip(rows, values, strict=True):
        millis = row[ts] if isinstance(row[ts], int) else round(row[ts].timestamp() * 1000)
        max_ts[row["sparkTask"]] = max(max_ts.get(row["sparkTask"], millis), millis)
        times[json.dumps(value, sort_keys=True, default=str)] = millis
    return Expected(values, key_column, max_ts, times)


# -- checks -----------------------------------------------------------------------------------


def check_user_records(got: dict[int, list[Record]], want: Expected, partitions: int) -> None:
    """Every row exactly once, on its key's murmur2 partition, with its JSON."""
    seen: Counter[str] = Counter()
    for partition, records in got.items():
        for record in records:
            kind, payload, event_time = decode_timed(record.value)
            if kind != USER_MESSAGE:
                continue
            value = json.loads(payload)
            assert record.key == str(value[want.key_column]).encode()
            assert partition == partition_for(record.key, partitions)
            seen[json.dumps(value, sort_keys=True)] += 1
            if not want.times:
                assert event_time is None
            elif (row := json.dumps(value, sort_keys=True)) in want.times:
                assert event_time == want.times[row]  # the row's event time, in its frame
            else:
                assert event_time is not None
    assert seen == Counter(json.dumps(v, sort_keys=True) for v in want.values)


def check_control(
    got: dict[int, list[Record]], summary: WriteSummary, want: Expected, tasks: int
) -> None:
    """Per partition: an end-of-stream from every task, after all of that task's user
    records and after its watermark; the watermarks are each non-empty task's max event time."""
    names = summary.task_names
    assert len(names) == tasks == len(set(names))
    for partition, records in got.items():
        last_user: dict[str, int] = {}
        eos_at: dict[str, int] = {}
        watermarks: dict[str, tuple[int, int]] = {}
        for record in records:
            kind, body = decode(record.value)
            if kind == USER_MESSAGE:
                task = names[json.loads(body)["sparkTask"]]
                assert task not in eos_at, f"{task} wrote a record after its end-of-stream"
                last_user[task] = record.offset
                continue
            assert record.key is None
            assert body.task_count == tasks
            if kind == WATERMARK:
                assert isinstance(body, WatermarkMessage)
                assert body.task_name not in watermarks
                watermarks[body.task_name] = (record.offset, body.timestamp)
            else:
                assert kind == END_OF_STREAM and isinstance(body, EndOfStreamMessage)
                assert body.task_name not in eos_at, f"two end-of-streams from {body.task_name}"
                eos_at[body.task_name] = record.offset
        assert set(eos_at) == set(names), f"partition {partition}"
        for task, offset in last_user.items():
            assert offset < eos_at[task]
        assert {task: ts for task, (_, ts) in watermarks.items()} == {
            names[i]: ts for i, ts in want.max_ts.items()
        }
        for task, (offset, _) in watermarks.items():
            assert offset < eos_at[task]


# -- framed writes ----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_more_spark_partitions_than_topic_partitions(
    spark: SparkSession, kafka_bootstrap: str, method: Method
) -> None:
    # 6 Spark partitions of 10 rows into 3 topic partitions; partition 4 (ids 40-49) is empty.
    df = page_views(spark, 60, 6).where("page not like '/page/4_'")
    topic = create_topic(kafka_bootstrap, 3)
    columns = ["memberId", "page", "ts", "sparkTask"]
    want = expected(df, "memberId", columns, "ts")
    assert sorted(want.max_ts) == [0, 1, 2, 3, 5]

    summary = write_stream(
        df,
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        key_column="memberId",
        timestamp_column="ts",
        method=method,
    )

    assert (summary.rows, summary.spark_partitions, summary.topic_partitions) == (50, 6, 3)
    assert (summary.method, summary.framed) == (method, True)
    got = read_topic(kafka_bootstrap, topic, 3)
    check_user_records(got, want, 3)
    check_control(got, summary, want, tasks=6)


@pytest.mark.parametrize("method", METHODS)
def test_fewer_spark_partitions_than_topic_partitions(
    spark: SparkSession, kafka_bootstrap: str, method: Method
) -> None:
    # A TimestampType event time, and value columns that leave it out.
    df = page_views(spark, 40, 2).withColumn("ts", sf.timestamp_millis("ts"))
    topic = create_topic(kafka_bootstrap, 5)
    columns = ["memberId", "page", "sparkTask"]
    want = expected(df, "memberId", columns, "ts")
    assert want.max_ts == {0: BASE_MS + 19_000, 1: BASE_MS + 39_000}

    summary = write_stream(
        df,
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        key_column="memberId",
        timestamp_column="ts",
        value_columns=columns,
        method=method,
    )

    assert (summary.rows, summary.spark_partitions, summary.topic_partitions) == (40, 2, 5)
    got = read_topic(kafka_bootstrap, topic, 5)
    check_user_records(got, want, 5)
    check_control(got, summary, want, tasks=2)


def test_without_a_timestamp_column_tasks_send_end_of_stream_only(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    df = page_views(spark, 12, 3)
    topic = create_topic(kafka_bootstrap, 2)

    summary = write_stream(df, bootstrap_servers=kafka_bootstrap, topic=topic, key_column="page")

    got = read_topic(kafka_bootstrap, topic, 2)
    want = expected(df, "page", df.columns, "ts")
    check_user_records(got, Expected(want.values, "page"), 2)  # no event time in the frames
    check_control(got, summary, Expected(want.values, "page"), tasks=3)


# -- plain writes -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_unframed_writes_plain_json_records(
    spark: SparkSession, kafka_bootstrap: str, method: Method
) -> None:
    df = page_views(spark, 30, 3)
    topic = create_topic(kafka_bootstrap, 4)

    summary = write_stream(
        df,
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        key_column="memberId",
        value_columns=["page", "ts"],
        framed=False,
        method=method,
    )

    assert (summary.rows, summary.framed, summary.task_names) == (30, False, ())
    got = read_topic(kafka_bootstrap, topic, 4)
    written: Counter[tuple[bytes, str]] = Counter()
    for partition, records in got.items():
        for record in records:
            assert record.key is not None
            assert partition == partition_for(record.key, 4)
            assert record.value.startswith(b'{"page":')  # no type byte
            written[(record.key, json.dumps(json.loads(record.value), sort_keys=True))] += 1
    assert written == Counter(
        (str(row["memberId"]).encode(), json.dumps({"page": row["page"], "ts": row["ts"]}))
        for row in df.collect()
    )


@pytest.mark.parametrize("method", METHODS)
def test_column_names_with_dots_and_backticks_are_written_as_named(
    spark: SparkSession, kafka_bootstrap: str, method: Method
) -> None:
    # A CSV header such as "page.url" is one column: never a field of a struct "page".
    df = page_views(spark, 6, 2).select(
        sf.col("memberId").alias("member.id"),
        sf.col("page").alias("page`url"),
        sf.col("ts").alias("event.ts"),
    )
    topic = create_topic(kafka_bootstrap, 2)

    summary = write_stream(
        df,
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        key_column="member.id",
        timestamp_column="event.ts",
        method=method,
    )

    assert summary.rows == 6
    got = read_topic(kafka_bootstrap, topic, 2)
    values = []
    for records in got.values():
        for record in records:
            kind, payload, event_time = decode_timed(record.value)
            if kind == USER_MESSAGE:
                value = json.loads(payload)
                assert record.key == str(value["member.id"]).encode()
                assert event_time == value["event.ts"]
                values.append(value)
    assert sorted(values, key=lambda v: v["event.ts"]) == [
        {"member.id": row["member.id"], "page`url": row["page`url"], "event.ts": row["event.ts"]}
        for row in df.orderBy("`event.ts`").collect()
    ]


def test_an_empty_dataframe_ends_its_batch(spark: SparkSession, kafka_bootstrap: str) -> None:
    """A DataFrame of no partition at all still writes one task's end-of-stream to every
    partition: a reader of the topic finishes (the module doc: "empty tasks included")."""
    df = spark.createDataFrame(spark.sparkContext.emptyRDD(), page_views(spark, 1, 1).schema)
    assert df.rdd.getNumPartitions() == 0
    for method in METHODS:
        topic = create_topic(kafka_bootstrap, 2)
        summary = write_stream(
            df,
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
            timestamp_column="ts",
            method=method,
        )
        assert (summary.rows, summary.spark_partitions) == (0, 1)
        got = read_topic(kafka_bootstrap, topic, 2)
        for records in got.values():
            assert [decode(record.value)[0] for record in records] == [END_OF_STREAM]


# -- refused writes ---------------------------------------------------------------------------


def test_null_keys_are_refused_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    df = page_views(spark, 10, 2).withColumn(
        "memberId",
        sf.when(sf.col("page").isin("/page/3", "/page/7"), None).otherwise(sf.col("memberId")),
    )
    topic = create_topic(kafka_bootstrap, 2)
    for method in METHODS:
        with pytest.raises(SparkWriteError, match=r"key column 'memberId' is null in 2 of 10 rows"):
            write_stream(
                df,
                bootstrap_servers=kafka_bootstrap,
                topic=topic,
                key_column="memberId",
                method=method,
            )
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


def test_null_timestamps_are_refused_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    df = page_views(spark, 10, 2).withColumn(
        "ts", sf.when(sf.col("page") == "/page/5", None).otherwise(sf.col("ts"))
    )
    topic = create_topic(kafka_bootstrap, 2)
    with pytest.raises(
        SparkWriteError, match=r"timestamp column 'ts' is null in 1 of 10 rows"
    ) as info:
        write_stream(
            df,
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
            timestamp_column="ts",
        )
    assert info.value.column == "ts"
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


@pytest.mark.parametrize(
    ("kind", "bad", "count"),
    [("double", "nan", 2), ("float", "inf", 1), ("double", "-inf", 1)],
)
def test_nan_and_infinite_values_are_refused_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str, kind: str, bad: str, count: int
) -> None:
    """Spark's to_json writes NaN as the string "NaN" (and infinity as "Infinity"), which a
    job would read as text: JSON has neither, so the write is refused, naming the column."""
    views = page_views(spark, 10, 2)
    pages = ["/page/3", "/page/7"][:count]
    df = views.select(
        "*",
        sf.when(sf.col("page").isin(*pages), sf.lit(bad).cast(kind))
        .otherwise(sf.col("memberId").cast(kind))
        .alias("score"),
        sf.lit(None).cast("double").alias("unknown"),  # nulls are JSON's null: kept
    )
    topic = create_topic(kafka_bootstrap, 2)
    for method in METHODS:
        with pytest.raises(
            SparkWriteError,
            match=rf"the value column 'score' is NaN or infinite in {count} of 10 rows",
        ) as info:
            write_stream(
                df,
                bootstrap_servers=kafka_bootstrap,
                topic=topic,
                key_column="memberId",
                method=method,
            )
        assert info.value.column == "score"
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]
    # Made null as the message says, the same rows are written.
    fixed = df.withColumn("score", sf.nanvl("score", sf.lit(None).cast(kind)))
    fixed = fixed.withColumn(
        "score", sf.when(sf.col("score").isin(math.inf, -math.inf), None).otherwise("score")
    )
    summary = write_stream(
        fixed, bootstrap_servers=kafka_bootstrap, topic=topic, key_column="memberId"
    )
    assert summary.rows == 10


def test_a_timestamp_ntz_column_is_read_as_utc_whatever_the_session_time_zone(
    spark: SparkSession,
) -> None:
    """A TimestampNTZ has no zone, and its JSON text carries none: its event time is the same
    in every session time zone (a cast to TIMESTAMP would read it in the session's)."""
    rows = [(1, datetime(2024, 1, 1, 0, 0, 0, 123000)), (2, datetime(1969, 12, 31, 23, 0))]
    schema = "memberId long, ts timestamp_ntz"
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        for session_zone in ("UTC", "America/New_York", "Asia/Kolkata"):
            spark.conf.set("spark.sql.session.timeZone", session_zone)
            df = spark.createDataFrame(rows, schema).repartition(1)
            columns = RecordColumns.of(df, key_column="memberId", timestamp_column="ts")
            times = [row[0] for row in df.select(columns.event_time()).collect()]
            assert times == [1_704_067_200_123, -3_600_000], session_zone
            assert [scan.max_event_time for scan in columns.scan().values()] == [1_704_067_200_123]
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"key_column": "member"}, r"the key column 'member' is not in the DataFrame"),
        (
            {"key_column": "memberId", "timestamp_column": "time"},
            r"the timestamp column 'time' is not in the DataFrame",
        ),
        (
            {"key_column": "memberId", "value_columns": ["page", "url"]},
            r"the value column 'url' is not in the DataFrame",
        ),
        (
            {"key_column": "memberId", "timestamp_column": "page"},
            r"timestamp column 'page' must be a timestamp or an integer of epoch milliseconds, "
            r"got string",
        ),
        (
            {"key_column": "memberId", "timestamp_column": "ts", "framed": False},
            r"timestamp_column 'ts' needs framed=True: a plain record carries no event time "
            r"\(Spark's Kafka sink cannot set a record's timestamp, so Kafka stamps it with the "
            r"time of the write\); name the column in value_columns and read it with "
            r"with_timestamp",
        ),
    ],
)
def test_bad_columns_are_refused_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str, arguments: dict[str, Any], message: str
) -> None:
    df = page_views(spark, 4, 2)
    topic = create_topic(kafka_bootstrap, 2)
    with pytest.raises(SparkWriteError, match=message):
        write_stream(df, bootstrap_servers=kafka_bootstrap, topic=topic, **arguments)
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


@pytest.mark.parametrize(
    ("column", "kind"), [("even", "boolean"), ("score", "double"), ("ratio", "float")]
)
def test_a_key_whose_text_differs_from_python_s_is_refused(
    spark: SparkSession, kafka_bootstrap: str, column: str, kind: str
) -> None:
    """Spark writes True as 'true' and 1e20 as '1.0E20': a samzapy job's send of the same
    key (str(True) is 'True') would go to another partition, so such a key is refused."""
    views = page_views(spark, 4, 2)
    df = views.select(
        "*",
        (sf.col("memberId") % 2 == 0).alias("even"),
        sf.col("memberId").cast("double").alias("score"),
        sf.col("memberId").cast("float").alias("ratio"),
    )
    topic = create_topic(kafka_bootstrap, 2)
    with pytest.raises(SparkWriteError, match=rf"the key column '{column}' is {kind}: ") as info:
        write_stream(df, bootstrap_servers=kafka_bootstrap, topic=topic, key_column=column)
    assert info.value.column == column
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


def test_a_column_named_twice_is_refused_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    views = page_views(spark, 4, 2)
    pages = views.select(sf.col("page").alias("url"), sf.col("memberId").alias("page"))
    df = views.join(pages, views["page"] == pages["url"])  # two columns called "page"
    topic = create_topic(kafka_bootstrap, 2)
    for arguments in ({"key_column": "page"}, {"key_column": "memberId"}):
        with pytest.raises(
            SparkWriteError, match=r"column 'page' names 2 columns of the DataFrame"
        ) as info:
            write_stream(df, bootstrap_servers=kafka_bootstrap, topic=topic, **arguments)
        assert info.value.column == "page"
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"foo.bar": 1},
            r"kafka_options\['foo\.bar'\] is not an option of the Kafka producer .*valid names "
            r"are acks, ",
        ),
        ({"linger.ms": "soon"}, r"kafka_options\['linger\.ms'\] must be an integer, got 'soon'"),
    ],
)
def test_kafka_options_are_checked_before_anything_is_written(
    spark: SparkSession, kafka_bootstrap: str, options: dict[str, Any], message: str
) -> None:
    """Spark's sink takes any option and writes the rows; samzapy's producer, which sends
    the end-of-stream after them, is as strict as a job file: both are checked first."""
    topic = create_topic(kafka_bootstrap, 2)
    for method in METHODS:
        with pytest.raises(SparkWriteError, match=message + r".*; nothing was written"):
            write_stream(
                page_views(spark, 4, 2),
                bootstrap_servers=kafka_bootstrap,
                topic=topic,
                key_column="memberId",
                method=method,
                kafka_options=options,
            )
    assert end_offsets(kafka_bootstrap, topic, 2) == [0, 0]


def test_a_malformed_bootstrap_servers_is_named(spark: SparkSession) -> None:
    with pytest.raises(
        SparkWriteError, match=r"^bootstrap_servers holds 'nohost', expected 'host:port'"
    ):
        write_stream(
            page_views(spark, 4, 2), bootstrap_servers="nohost", topic="t", key_column="memberId"
        )
    with pytest.raises(SparkWriteError, match=r"^cannot create Kafka topic 't': bootstrap_servers"):
        samzapy_spark.create_topic("nohost", "t", partitions=1)


@pytest.mark.slow
def test_a_failed_write_names_its_cause(spark: SparkSession, kafka_bootstrap: str) -> None:
    """Not the JVM call's first line ("An error occurred while calling o123.save."): the
    innermost cause, from the JVM (the sink) or from a Python worker (the producer)."""
    topic = create_topic(kafka_bootstrap, 1)
    views = spark.range(0, 2, numPartitions=1).select(sf.col("id").alias("memberId"))
    with pytest.raises(
        SparkWriteError,
        match=rf"^Spark's Kafka sink failed writing to Kafka topic '{topic}' at .*: "
        r"RecordTooLargeException: The message is \d+ bytes when serialized which is larger "
        r"than 200, which is the value of the max\.request\.size configuration\.$",
    ):
        write_stream(
            views.withColumn("page", sf.repeat(sf.lit("x"), 500)),
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
            kafka_options={"max.request.size": 200},
        )
    with pytest.raises(
        SparkWriteError,
        match=rf"^samzapy's producer failed writing to Kafka topic '{topic}' at .*: "
        rf"samzapy\.api\.errors\.SendFailedError: cannot write to partition 0 of Kafka topic "
        rf"'{topic}': a record of \d+ bytes .* is larger than "
        r"systems\.spark\.producer\.max\.request\.size \(200\); not sent",
    ):
        write_stream(  # samzapy's producer refuses it too, as Java's does
            views.withColumn("page", sf.repeat(sf.lit("x"), 500)),
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
            method="producer",
            kafka_options={"max.request.size": 200},
        )
    assert end_offsets(kafka_bootstrap, topic, 1) == [0]


class _JavaClass:
    def __init__(self, name: str) -> None:
        self.name = name

    def getName(self) -> str:  # noqa: N802 - the JVM's name
        return self.name


class _JavaException:
    """What py4j hands over of a JVM exception: its class, message and cause."""

    def __init__(self, name: str, message: str | None, cause: _JavaException | None) -> None:
        self.name, self.message, self.cause = name, message, cause

    def getClass(self) -> _JavaClass:  # noqa: N802
        return _JavaClass(self.name)

    def getMessage(self) -> str | None:  # noqa: N802
        return self.message

    def getCause(self) -> _JavaException | None:  # noqa: N802
        return self.cause


class _Py4JError(Exception):
    def __init__(self, java_exception: _JavaException) -> None:
        super().__init__("An error occurred while calling o145.save.\n: org.apache.spark...")
        self.java_exception = java_exception


def test_a_spark_failure_is_told_by_its_innermost_cause() -> None:
    aborted = "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, ..."
    too_large = _JavaException(
        "org.apache.kafka.common.errors.RecordTooLargeException",
        "The message is 602 bytes when serialized which is larger than 200.\nmore",
        None,
    )
    job = _JavaException("org.apache.spark.SparkException", aborted, too_large)
    assert samzapy_writer._failure(_Py4JError(job)) == (
        "RecordTooLargeException: The message is 602 bytes when serialized which is larger "
        "than 200."
    )
    worker = _JavaException(
        "org.apache.spark.api.python.PythonException",
        "Traceback (most recent call last):\n  File ...\n"
        "samzapy.api.errors.SendFailedError: cannot write to partition 0\n\n",
        None,
    )
    job = _JavaException("org.apache.spark.SparkException", aborted, worker)
    assert samzapy_writer._failure(_Py4JError(job)) == (
        "samzapy.api.errors.SendFailedError: cannot write to partition 0"
    )
    assert samzapy_writer._failure(RuntimeError("plain\nmore")) == "plain"


def test_a_missing_topic_is_named(spark: SparkSession, kafka_bootstrap: str) -> None:
    topic = f"spark-writer-missing-{uuid.uuid4().hex[:10]}"
    with pytest.raises(
        SparkWriteError,
        match=rf"Kafka topic '{topic}' does not exist at .*samzapy\.spark\.create_topic",
    ):
        write_stream(
            page_views(spark, 4, 2),
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
        )


def test_an_unreachable_broker_is_a_spark_write_error(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(samzapy_producer, "CONNECT_TIMEOUT_MS", 1500)
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(
        SparkWriteError,
        match=rf"cannot look up Kafka topic 'views' at 127\.0\.0\.1:{port}; nothing was "
        r"written: cannot reach Kafka",
    ) as info:
        write_stream(
            page_views(spark, 4, 2),
            bootstrap_servers=f"127.0.0.1:{port}",
            topic="views",
            key_column="memberId",
        )
    # The argument a Spark job gives, not the job-file keys of samzapy's Kafka client.
    assert str(info.value).endswith("(check bootstrap_servers)")
    assert "systems." not in str(info.value)


def test_a_failed_end_of_stream_is_a_spark_write_error_naming_the_step(
    spark: SparkSession, kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = create_topic(kafka_bootstrap, 2)

    async def failing(*args: Any, **kwargs: Any) -> int:
        raise StreamSystemError("cannot reach Kafka at the brokers (the broker went away)")

    monkeypatch.setattr(samzapy_writer, "send_records", failing)
    with pytest.raises(
        SparkWriteError,
        match=rf"the rows are in Kafka topic '{topic}' but its watermarks and end-of-stream "
        r"are not \(a reader waits for the batch to end\): .*the broker went away",
    ):
        write_stream(
            page_views(spark, 4, 2),
            bootstrap_servers=kafka_bootstrap,
            topic=topic,
            key_column="memberId",
        )
    assert sum(end_offsets(kafka_bootstrap, topic, 2)) == 4  # the rows, and nothing after

    # Run again, the write goes through (no batch ended in the topic), after the rows of
    # the failed one: a reader gets those twice (README, "PySpark").
    monkeypatch.undo()
    summary = write_stream(
        page_views(spark, 4, 2),
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        key_column="memberId",
    )
    got = read_topic(kafka_bootstrap, topic, 2)
    kinds = Counter(decode(record.value)[0] for records in got.values() for record in records)
    assert kinds == {USER_MESSAGE: 8, END_OF_STREAM: 2 * len(summary.task_names)}


def test_a_topic_whose_batch_ended_refuses_another_batch(
    spark: SparkSession, kafka_bootstrap: str
) -> None:
    """A framed reader ends each partition at the first batch's end-of-stream: a second
    batch written after it would never be read (a job that read the first ends at once
    when run again, and a new one reads the first only)."""
    topic = create_topic(kafka_bootstrap, 2)
    first = write_stream(
        page_views(spark, 4, 2), bootstrap_servers=kafka_bootstrap, topic=topic, key_column="page"
    )
    ends = end_offsets(kafka_bootstrap, topic, 2)
    for method in METHODS:
        with pytest.raises(
            SparkWriteError,
            match=rf"^Kafka topic '{topic}' holds a finished batch \(its partition [01] ends "
            r"with the end-of-stream of 'spark-[0-9a-f]+-[01]'\): a samzapy job reading it "
            r"framed ends there and would never read this write; .*nothing was written$",
        ) as info:
            write_stream(
                page_views(spark, 4, 2),
                bootstrap_servers=kafka_bootstrap,
                topic=topic,
                key_column="page",
                method=method,
            )
        assert str(info.value).split("'")[3] in first.task_names
    assert end_offsets(kafka_bootstrap, topic, 2) == ends


def test_create_topic_creates_a_missing_topic_once(kafka_bootstrap: str) -> None:
    topic = f"spark-writer-created-{uuid.uuid4().hex[:10]}"
    assert samzapy_spark.create_topic(kafka_bootstrap, topic, partitions=3) is True
    assert samzapy_spark.create_topic(kafka_bootstrap, topic, partitions=5) is False  # kept
    assert end_offsets(kafka_bootstrap, topic, 3) == [0, 0, 0]
    with pytest.raises(SparkWriteError, match=r"partitions must be an integer >= 1, got 0"):
        samzapy_spark.create_topic(kafka_bootstrap, topic, partitions=0)


# -- installation -----------------------------------------------------------------------------


def test_connector_jars_are_fetched_into_an_empty_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMZAPY_CACHE", str(tmp_path))
    jars = kafka_connector_jars("4.0.0")
    assert [Path(jar).name for jar in jars] == [
        "commons-pool2-2.12.0.jar",
        "kafka-clients-3.9.0.jar",
        "spark-sql-kafka-0-10_2.13-4.0.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.0.0.jar",
    ]
    assert all(Path(jar).parent == tmp_path / "spark-kafka-4.0.0" for jar in jars)
    assert kafka_connector_jars("4.0.0") == jars  # cached: no second fetch
