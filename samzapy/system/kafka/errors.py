"""Kafka failures in samzapy's terms: which aiokafka errors mean "broker unreachable", the
translation of every other one into a StreamSystemError naming the topic and partition, and
what the producer says of a send that failed.

The rest of samzapy never sees an aiokafka exception: each call into aiokafka in this package
catches ``KAFKA_ERRORS`` and raises ``stream_error(...) from exc``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Collection, Iterable
from typing import Any

from aiokafka import errors as kafka_errors

from samzapy.api.errors import SerdeError, StreamSystemError

#: Errors of a broker that cannot be reached (yet): worth retrying until connect.timeout.ms.
UNREACHABLE: tuple[type[BaseException], ...] = (
    kafka_errors.KafkaConnectionError,
    kafka_errors.NodeNotReadyError,
    kafka_errors.RequestTimedOutError,
    kafka_errors.KafkaTimeoutError,
    kafka_errors.LeaderNotAvailableError,
    kafka_errors.NotLeaderForPartitionError,
    ConnectionError,
    TimeoutError,
)

#: Everything a call into aiokafka may raise that is Kafka's doing (not a bug of ours).
KAFKA_ERRORS: tuple[type[BaseException], ...] = (
    kafka_errors.KafkaError,
    kafka_errors.ConsumerStoppedError,
    OSError,
    TimeoutError,
)

#: How long a failed send's flush waits for the metadata that says whether its topic exists.
GONE_CHECK_S = 2.0

#: Broker error codes samzapy acts on.
NO_ERROR = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38
NOT_CONTROLLER = 41


def transient_topic_error(code: int, message: str | None) -> bool:
    """Whether a CreateTopics error is a broker between states rather than a bad request:
    a KRaft broker that is starting or stopping is fenced and takes no replicas for a moment
    (``InvalidReplicationFactorError: ... All brokers are currently fenced``)."""
    if code == NOT_CONTROLLER:
        return True
    return code == INVALID_REPLICATION_FACTOR and "fenced" in (message or "")


def describe(exc: BaseException) -> str:
    """``exc`` as one line: its class name (once) and its message."""
    name = type(exc).__name__
    text = str(exc).strip()
    if isinstance(exc, kafka_errors.KafkaError):
        # aiokafka's messages repeat the class name: "[Error 1] OffsetOutOfRangeError: ..."
        text = re.sub(rf"^(\[Error -?\d+\] )?{re.escape(name)}:?\s*", "", text)
        description = getattr(exc, "description", "")
        if not text and isinstance(description, str):
            text = description
    if isinstance(exc, TimeoutError) and not text:
        text = "timed out"
    codec = re.search(r"for (\w+) compression codec", text)
    if isinstance(exc, kafka_errors.UnsupportedCodecError) and codec:  # lz4, snappy, zstd
        text += (
            f" (the records are compressed with {codec[1]}: pip install "
            f"'aiokafka[{codec[1]}]', which installs the cramjam package)"
        )
    return f"{name}: {text}" if text else name


def error_name(code: int) -> str:
    """The name of broker error ``code`` (``UnknownTopicOrPartitionError``)."""
    try:
        name: str = kafka_errors.for_code(code).__name__
        return name
    except Exception:  # an error code this aiokafka does not know
        return f"error code {code}"


def stream_error(what: str, exc: BaseException) -> StreamSystemError:
    """``StreamSystemError("<what>: <exc described>")``; raise it ``from exc``."""
    return StreamSystemError(f"{what}: {describe(exc)}")


def where(topic: str, partition: int | None = None) -> str:
    """``Kafka topic 'x'`` or ``partition 3 of Kafka topic 'x'``, for messages."""
    if partition is None:
        return f"Kafka topic {topic!r}"
    return f"partition {partition} of Kafka topic {topic!r}"


def out_of_range(topic: str, partition: object, known: Collection[int] | None) -> str:
    """A partition ``topic`` does not have (``known``: its partitions, if known)."""
    held = f"it has partitions 0..{len(known) - 1}" if known else "its partitions are unknown"
    return f"partition {partition!r} is out of range for {where(topic)}: {held}"


async def send_failure(
    producer: Any,
    exc: BaseException,
    batches: int,
    topic: str,
    partition: int | None,
    servers: str,
    failed_sends: int,
) -> str:
    """What a producer's flush says of its first failed batch (of ``batches``); whether the
    brokers still have its topic is asked of the aiokafka ``producer`` (``topic_gone``)."""
    if isinstance(exc, StreamSystemError):
        reason = str(exc)
    else:
        reason = f"cannot write to {where(topic, partition)} at {servers}: {describe(exc)}"
        if await topic_gone(producer, topic):
            reason += f"; {where(topic)} does not exist (deleted while the job ran?)"
        elif "UnknownTopicOrPartition" in type(exc).__name__:
            reason += " (does the topic exist?)"
    more = f" ({batches} failed batches in all)" if batches > 1 else ""
    return f"{reason}{more}; {failed_sends} messages failed since the start"


async def topic_gone(producer: Any, topic: str) -> bool:
    """Whether the brokers answer a metadata request of the aiokafka ``producer`` without
    ``topic`` (deleted under the job): asked once a send to it failed, which the broker's
    last answer to the client's retries (NotLeaderForPartition, a timeout) does not say."""
    client: Any = getattr(producer, "client", None)
    if getattr(client, "force_metadata_update", None) is None:  # stopped, or not aiokafka's
        return False
    with contextlib.suppress(TimeoutError, *KAFKA_ERRORS):
        async with asyncio.timeout(GONE_CHECK_S):
            return bool(await missing_topics(client, [topic]))
    return False


async def missing_topics(client: Any, topics: Iterable[str]) -> list[str]:
    """Which of ``topics`` the brokers' answer to a metadata request of the aiokafka
    ``client`` lacks (none when no broker answered: that says nothing of the topics)."""
    if not await client.force_metadata_update():
        return []
    return [topic for topic in topics if client.cluster.partitions_for_topic(topic) is None]


def not_bytes(system_stream: object, what: str, value: object) -> SerdeError:
    """A key or message sent without a serde that is not bytes."""
    return SerdeError(
        f"cannot send to {system_stream}: a Kafka {what} must be bytes or None, got "
        f"{type(value).__name__}; set a {'key' if what == 'key' else 'msg'} serde for the "
        "stream (the kafka system's default serdes are none), or, with one set, make its "
        "to_bytes return bytes"
    )


__all__ = [
    "KAFKA_ERRORS",
    "LEADER_NOT_AVAILABLE",
    "NO_ERROR",
    "TOPIC_ALREADY_EXISTS",
    "transient_topic_error",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "UNREACHABLE",
    "describe",
    "error_name",
    "missing_topics",
    "not_bytes",
    "out_of_range",
    "send_failure",
    "stream_error",
    "topic_gone",
    "where",
]
