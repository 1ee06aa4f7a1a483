"""Kafka topic IDs on the wire (``system/kafka/topic_ids.py``): the Metadata version asked
for, the response read, and a broker without topic IDs."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy.system.kafka.admin import KafkaSystemAdmin
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.kafka.topic_ids import (
    MetadataRequestV10,
    MetadataRequestV12,
    MetadataResponseV10,
    MetadataResponseV12,
    TopicIdsRequest,
    format_id,
    lookup,
)

RAW = uuid.UUID("bca94c4e-db18-42b5-8256-1de5bb56a9ee").bytes


def test_an_id_reads_as_kafka_tools_show_it() -> None:
    assert format_id(RAW) == "vKlMTtsYQrWCVh3lu1ap7g"


@pytest.mark.parametrize(
    ("broker_max", "sent"),
    [(13, MetadataRequestV12), (12, MetadataRequestV12), (11, MetadataRequestV10)],
)
def test_the_highest_version_both_sides_know_is_asked_for(broker_max: int, sent: type) -> None:
    request = TopicIdsRequest(["a"]).prepare({3: (0, broker_max)})
    assert type(request) is sent
    assert request.allow_auto_topic_creation is False  # a look-up never creates a topic
    assert request.FLEXIBLE_VERSION
    assert sent.decode(request.encode()).topics == [(bytes(16), "a", {})]  # asked by name


def response(cls: Any, topics: list[tuple[int, str, bytes]]) -> Any:
    entries = [(code, name, raw, False, [], -2147483648, {}) for code, name, raw in topics]
    fields: list[Any] = [0, [(1, "127.0.0.1", 9092, None, {})], "cluster", 1, entries]
    if cls is MetadataResponseV10:
        fields.append(-2147483648)
    return cls.decode(cls(*fields, {}).encode())


@pytest.mark.parametrize("cls", [MetadataResponseV10, MetadataResponseV12])
async def test_each_existing_topic_with_an_id_is_found(cls: Any) -> None:
    topics = [(0, "a", RAW), (3, "missing", bytes(16)), (0, "zk-made", bytes(16))]

    async def send(request: Any) -> Any:
        return response(cls, topics)

    assert await lookup(send, ["a", "missing", "zk-made"]) == {"a": "vKlMTtsYQrWCVh3lu1ap7g"}


async def test_a_broker_without_topic_ids_gives_none() -> None:
    """A broker before 2.8 knows Metadata up to v9: no request fits."""

    async def send(request: Any) -> Any:
        return request.prepare({3: (0, 9)})

    assert await lookup(send, ["a"]) is None


async def test_an_admin_told_once_that_the_brokers_give_no_ids_asks_no_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = KafkaSystemAdmin(KafkaSettings("kafka", ("x:1",), ("x:1",), ("x:1",)))
    asked: list[list[str]] = []

    async def clients() -> tuple[Any, Any]:
        return SimpleNamespace(_send_request=None), None

    async def no_ids(send: Any, topics: list[str]) -> None:
        asked.append(topics)

    monkeypatch.setattr(admin, "_clients", clients)
    monkeypatch.setattr("samzapy.system.kafka.admin.lookup", no_ids)
    with capture_logs() as logs:
        assert await admin.topic_ids(["a"]) is None
        assert await admin.topic_ids(["a", "b"]) is None
    assert asked == [["a"]]
    [told] = [e for e in logs if e["event"] == "topic_ids_unavailable"]
    assert (told["log_level"], told["system"]) == ("info", "kafka")
