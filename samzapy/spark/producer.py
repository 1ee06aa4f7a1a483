"""Kafka through samzapy's own clients: the topic's partition count, the control records, and
the records of one Spark partition sent from a Python worker (``method="producer"``).

Every producer here is samzapy's KafkaSystemProducer (idempotent, ``acks=all``), so the
records of one partition arrive in the order they were sent. The coroutines run on a loop of
their own (``run``), in the driver or in a Spark Python worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.control.wire import (
    END_OF_STREAM,
    EndOfStreamMessage,
    FrameError,
    WatermarkMessage,
    decode,
    encode_control,
)
from samzapy.spark.errors import SparkWriteError, client_error, options_error
from samzapy.system.kafka import (
    KafkaSystemAdmin,
    KafkaSystemConsumer,
    KafkaSystemProducer,
    kafka_settings,
)
from samzapy.system.partitioner import partition_for

T = TypeVar("T")

#: The system name samzapy's Kafka clients report in their errors and client ids.
SYSTEM = "spark"
#: How long a client keeps trying to reach the brokers before the write fails.
CONNECT_TIMEOUT_MS = 30_000
#: How long ``ended_batch`` waits for the last records of a topic's partitions.
LAST_RECORDS_TIMEOUT_S = 10.0
#: Rows sent between two turns of the event loop (the producer's senders run in those turns).
_ROWS_PER_TURN = 2048

#: (partition, key, value) of one Kafka record.
Record = tuple[int, bytes | None, bytes]


def kafka_config(servers: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The kafka system's keys: ``options`` are producer options by Kafka's names
    (``linger.ms``, ``batch.size``, ``compression.type``...)."""
    config: dict[str, Any] = {
        "bootstrap.servers": servers,
        "connect.timeout.ms": CONNECT_TIMEOUT_MS,
    }
    for name, value in (options or {}).items():
        config[f"producer.{name}"] = value
    return config


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end on a new event loop, in a thread of its own when this
    thread already runs one (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(asyncio.run(coroutine))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="samzapy-spark-kafka")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome[0]


async def topic_partition_count(servers: str, topic: str) -> int:
    """The number of partitions of ``topic``; SparkWriteError when it does not exist."""
    admin = KafkaSystemAdmin(kafka_settings(SYSTEM, kafka_config(servers)))
    try:
        counts = await admin.partition_counts([topic])
    finally:
        await admin.stop()
    if topic not in counts:
        raise SparkWriteError(
            f"Kafka topic {topic!r} does not exist at {servers}; create it before writing "
            "(samzapy.spark.create_topic; write_stream does not create topics)"
        )
    return counts[topic]


async def ended_batch(servers: str, topic: str, partitions: int) -> tuple[int, str] | None:
    """A partition of ``topic`` whose last record is an end-of-stream, with the upstream task
    that sent it: a batch ended there, and a framed reader stops at it. None when no
    partition ends so (empty partitions, rows of a write that failed before its end)."""
    settings = kafka_settings(SYSTEM, kafka_config(servers))
    admin = KafkaSystemAdmin(settings)
    try:
        bounds = await admin.offset_bounds(
            SystemStreamPartition(SYSTEM, topic, p) for p in range(partitions)
        )
    finally:
        await admin.stop()
    last = {ssp: int(b.upcoming) - 1 for ssp, b in bounds.items() if b.oldest is not None}
    if not last:
        return None
    consumer = KafkaSystemConsumer(settings)
    for ssp, offset in last.items():
        consumer.register(ssp, str(offset), "oldest")
    await consumer.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LAST_RECORDS_TIMEOUT_S
    try:
        while last and loop.time() < deadline:
            polled = await consumer.poll(list(last), 16, 0.5)
            for ssp, envelopes in polled.items():
                for envelope in envelopes:
                    if int(envelope.offset) == last[ssp] and _ends(envelope.message):
                        return ssp.partition, decode(envelope.message)[1].task_name
            for ssp in list(last):  # read, or a transaction marker that is never delivered
                position = await consumer.position(ssp)
                if position is not None and int(position) > last[ssp]:
                    del last[ssp]
    finally:
        await consumer.stop()
    return None


def _ends(value: Any) -> bool:
    if not isinstance(value, bytes | bytearray) or value[:1] != bytes([END_OF_STREAM]):
        return False
    try:
        return decode(value)[0] == END_OF_STREAM
    except FrameError:
        return False


async def _create_topic(
    servers: str, topic: str, partitions: int, replication_factor: int | None
) -> bool:
    admin = KafkaSystemAdmin(kafka_settings(SYSTEM, kafka_config(servers)))
    try:
        if topic in await admin.partition_counts([topic]):
            return False
        await admin.create_stream(topic, partitions, replication_factor=replication_factor)
        return True
    finally:
        await admin.stop()


def create_topic(
    bootstrap_servers: str, topic: str, *, partitions: int, replication_factor: int | None = None
) -> bool:
    """Create the Kafka ``topic`` with ``partitions`` partitions (``replication_factor``
    replicas; None: the broker's default) unless it exists, which is kept as it is. True when
    this call created it. ``write_stream`` writes only to existing topics: call this first."""
    if type(partitions) is not int or partitions < 1:
        raise SparkWriteError(f"partitions must be an integer >= 1, got {partitions!r}")
    try:
        return run(_create_topic(bootstrap_servers, topic, partitions, replication_factor))
    except ConfigError as exc:
        raise SparkWriteError(f"cannot create Kafka topic {topic!r}: {options_error(exc)}") from exc
    except StreamSystemError as exc:
        raise SparkWriteError(
            f"cannot create Kafka topic {topic!r} at {bootstrap_servers}: {client_error(exc)}"
        ) from exc


def control_records(
    task_names: list[str], max_event_times: Mapping[int, int | None], partitions: int
) -> list[Record]:
    """To every partition: a watermark from each task that wrote rows with event times
    (``max_event_times[i]`` not None), then an end-of-stream from every task."""
    count = len(task_names)
    watermarks = []
    for i, name in enumerate(task_names):
        latest = max_event_times.get(i)
        if latest is not None:
            watermarks.append(encode_control(WatermarkMessage(name, count, latest)))
    ends = [encode_control(EndOfStreamMessage(name, count)) for name in task_names]
    return [(p, None, value) for p in range(partitions) for value in (*watermarks, *ends)]


async def send_records(
    servers: str, topic: str, records: Iterable[Record], options: Mapping[str, Any] | None = None
) -> int:
    """Send ``records`` in order and wait until every one is acknowledged; their count."""
    producer = KafkaSystemProducer(kafka_settings(SYSTEM, kafka_config(servers, options)))
    stream = SystemStream(SYSTEM, topic)
    await producer.start()
    sent = 0
    try:
        for partition, key, value in records:
            producer.send(stream, partition, key, value)
            sent += 1
            if sent % _ROWS_PER_TURN == 0:
                await _make_room(producer)
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def _make_room(producer: KafkaSystemProducer) -> None:
    full = producer.backpressure()
    if full is not None:
        await full
    else:
        await asyncio.sleep(0)


def unpack(packed: Iterable[bytes], partitions: int) -> Iterator[Record]:
    """Records from the binaries of ``RecordColumns.packed``, each on its key's partition."""
    for record in packed:
        end = 4 + int.from_bytes(record[:4], "big")
        key = record[4:end]
        yield partition_for(key, partitions), key, record[end:]


def write_partition(
    index: int,
    packed: Iterable[bytes],
    *,
    servers: str,
    topic: str,
    partitions: int,
    options: Mapping[str, Any] | None = None,
) -> Iterator[tuple[int, int]]:
    """Spark's ``mapPartitionsWithIndex`` function of ``method="producer"``: send the packed
    records of Spark partition ``index``; yield one ``(index, records sent)``."""
    yield index, run(send_records(servers, topic, unpack(packed, partitions), options))


__all__ = [
    "CONNECT_TIMEOUT_MS",
    "SYSTEM",
    "Record",
    "control_records",
    "create_topic",
    "ended_batch",
    "kafka_config",
    "run",
    "send_records",
    "topic_partition_count",
    "unpack",
    "write_partition",
]
