"""Kafka's topic IDs (KIP-516): the Metadata request (v10 and up) that returns them.

A topic's ID is given when the topic is created and changes when it is deleted and created
again under the same name: the checkpoints record their inputs' IDs, so that a restart
tells a recreated input from the topic its checkpointed offsets belong to
(``container/stale_offsets.py``). aiokafka defines Metadata up to v5 only, so v10 and v12
(flexible versions: compact strings and arrays, tagged fields) are defined here, the
response read only for what samzapy needs. An ID is shown as Kafka's tools show it
(``kafka-topics.sh --describe``: ``TopicId: vKlMTtsYQrWCVh3lu1ap7g``), URL-safe base64
without padding. A broker older than 2.8 does not know v10; a topic without an ID (all
zeros: one created by ZooKeeper before its cluster gave IDs) is left out.

The same request, sent through a running consumer's own client (``described``), is the
consumer's topic check (``topic_watch.py``): it says which topics exist and under which ID.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Awaitable, Callable, Sequence
from io import BytesIO
from typing import Any

from aiokafka.errors import IncompatibleBrokerVersion, NodeNotReadyError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    AbstractType,
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from samzapy.system.kafka.errors import NO_ERROR, UNREACHABLE

_NO_ID = bytes(16)

# aiokafka has no type hints (mypy sees its classes as Any): hence the ignores below.


class Uuid(AbstractType[bytes]):  # type: ignore[misc]
    """Kafka's ``uuid``: 16 bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return value

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        value = data.read(16)
        if len(value) != 16:
            raise ValueError("a uuid needs 16 bytes")
        return value


def _response(*tail: tuple[str, Any]) -> Schema:
    return Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            CompactArray(
                ("node_id", Int32),
                ("host", CompactString("utf-8")),
                ("port", Int32),
                ("rack", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("cluster_id", CompactString("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            CompactArray(
                ("error_code", Int16),
                ("name", CompactString("utf-8")),
                ("topic_id", Uuid),
                ("is_internal", Boolean),
                (
                    "partitions",
                    CompactArray(
                        ("error_code", Int16),
                        ("partition_index", Int32),
                        ("leader_id", Int32),
                        ("leader_epoch", Int32),
                        ("replica_nodes", CompactArray(Int32)),
                        ("isr_nodes", CompactArray(Int32)),
                        ("offline_replicas", CompactArray(Int32)),
                        ("tags", TaggedFields),
                    ),
                ),
                ("topic_authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        *tail,
        ("tags", TaggedFields),
    )


_TOPICS = (
    "topics",
    CompactArray(("topic_id", Uuid), ("name", CompactString("utf-8")), ("tags", TaggedFields)),
)


class MetadataResponseV10(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 10
    SCHEMA = _response(("cluster_authorized_operations", Int32))


class MetadataResponseV12(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 12
    SCHEMA = _response()


class MetadataRequestV10(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 10
    RESPONSE_TYPE = MetadataResponseV10
    SCHEMA = Schema(
        _TOPICS,
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class MetadataRequestV12(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 3
    API_VERSION = 12
    RESPONSE_TYPE = MetadataResponseV12
    SCHEMA = Schema(
        _TOPICS,
        ("allow_auto_topic_creation", Boolean),
        ("include_topic_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class TopicIdsRequest(Request[MetadataRequestV10 | MetadataRequestV12]):  # type: ignore[misc]
    """Metadata of ``topics`` (never creating one), at the highest version both sides know."""

    API_KEY = 3

    def __init__(self, topics: Sequence[str]) -> None:
        self._topics: list[tuple[bytes, str, dict[int, bytes]]] = [
            (_NO_ID, topic, {}) for topic in topics
        ]

    def build(
        self, request_struct_class: type[MetadataRequestV10 | MetadataRequestV12]
    ) -> MetadataRequestV10 | MetadataRequestV12:
        if request_struct_class is MetadataRequestV10:
            return MetadataRequestV10(self._topics, False, False, False, {})
        return MetadataRequestV12(self._topics, False, False, {})


def format_id(raw: bytes) -> str:
    """A topic ID as Kafka's tools show it."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def existing(response: Any) -> dict[str, str | None]:
    """Each topic a Metadata response (v10 and up) describes, with its ID (None: it has
    none); a topic it gives an error for (no such topic) is left out, as aiokafka's
    metadata leaves it out."""
    out: dict[str, str | None] = {}
    for topic in response.topics:
        code, name, raw = topic[0], topic[1], topic[2]
        if code == NO_ERROR and name is not None:
            out[name] = None if raw == _NO_ID else format_id(raw)
    return out


def ids_of(response: Any) -> dict[str, str]:
    """Each topic's ID in a Metadata response (v10 and up); a topic the broker does not
    describe, or without an ID, is left out."""
    return {name: i for name, i in existing(response).items() if i is not None}


async def lookup(
    send: Callable[[Request[Any]], Awaitable[Any]], topics: Sequence[str]
) -> dict[str, str] | None:
    """The ID of each of ``topics`` that exists, in one request through ``send``; None when
    the broker gives no topic IDs (it does not know Metadata v10)."""
    try:
        response = await send(TopicIdsRequest(topics))
    except (IncompatibleBrokerVersion, NotImplementedError):
        return None
    return ids_of(response)


async def described(client: Any, topics: Sequence[str]) -> dict[str, str | None] | None:
    """The topics of ``topics`` that exist, each with its ID (``existing``), in one request
    through the aiokafka network ``client`` to one of its brokers (the next when one cannot
    be reached); None when the brokers give no topic IDs. Raises when no broker answers."""
    nodes = [broker.nodeId for broker in client.cluster.brokers()]
    random.shuffle(nodes)
    error: BaseException = NodeNotReadyError("no broker is known")
    for node in nodes:
        try:
            response = await client.send(node, TopicIdsRequest(topics))
        except (IncompatibleBrokerVersion, NotImplementedError):
            return None
        except UNREACHABLE as exc:
            error = exc
            continue
        return existing(response)
    raise error


__all__ = ["TopicIdsRequest", "described", "existing", "format_id", "ids_of", "lookup"]
