"""Values Kafka is sent as int16 or int32 are bounded at load, naming the key and the range,
instead of failing in the client's request encoding (a struct.error at start-up, or a fetcher
that logs the error for ever while the job reads nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve
from samzapy.system.kafka.settings import client_option_problems

BASE: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["kafka.words"],
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
}
INT32 = "an integer from {} to 2147483647"
REPLICAS = "-1 (the broker's default) or a replica count from 1 to 32767"


@pytest.mark.parametrize(
    ("key", "too_big", "largest", "expected"),
    [
        ("job.coordinator.session.timeout.ms", 2**31, 2**31 - 1, INT32.format(1000)),
        ("task.transaction.timeout.ms", 3000000000, 2**31 - 1, INT32.format(-1)),
        ("job.intermediate.stream.partitions", 2**31, 2**31 - 1, INT32.format(1)),
        ("streams.words.partitions", 2**31, 2**31 - 1, INT32.format(1)),
        ("task.checkpoint.replication.factor", 40000, 32767, REPLICAS),
        ("streams.words.replication.factor", 32768, 32767, REPLICAS),
        ("systems.kafka.default.stream.replication.factor", 32768, 32767, REPLICAS),
    ],
)
def test_a_value_beyond_kafka_s_field_is_refused_naming_key_and_range(
    key: str, too_big: int, largest: int, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(load_config(base={**BASE, key: too_big}))
    assert f"{key} must be {expected}, got {too_big}" in info.value.problems
    resolve(load_config(base={**BASE, key: largest}))  # the largest is taken


@pytest.mark.parametrize(
    "name",
    [
        "consumer.fetch.max.bytes",
        "consumer.max.partition.fetch.bytes",
        "consumer.fetch.max.wait.ms",
        "consumer.request.timeout.ms",
        "producer.max.request.size",
        "producer.batch.size",
        "producer.request.timeout.ms",
    ],
)
def test_a_client_option_kafka_sends_as_int32_is_bounded(name: str) -> None:
    least = 1 if name.endswith("request.timeout.ms") else 0
    assert client_option_problems("kafka", {name: 3000000000}) == [
        f"systems.kafka.{name} must be an integer from {least} to 2147483647, got 3000000000"
    ]
    assert client_option_problems("kafka", {name: 2**31 - 1}) == []


def test_a_client_option_kafka_types_as_a_long_is_not_bounded() -> None:
    assert client_option_problems("kafka", {"consumer.metadata.max.age.ms": 3000000000}) == []
