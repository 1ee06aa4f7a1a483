"""What a join brings together is partitioned alike, or the job is refused at start-up
(docs/tables.md, Stream-stream joins): a stream-table join with a caching table in front of a
local table (the streams that fill the local table, through the cache or directly, and the
stream joined with the cache), and partition_by streams that serialize their keys alike."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from test_apps import Lambda
from test_table_apps import Enrich, OrderPayment

from samzapy import (
    KV,
    CachingTableDescriptor,
    ConfigError,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplicationDescriptor,
)
from samzapy.system.partitioner import partition_for
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
PROFILES = KAFKA.get_input_descriptor("profiles", KVSerde("string", "json")).with_bootstrap()
VIEWS = KAFKA.get_input_descriptor("views", KVSerde("string", "json"))
ENRICHED = KAFKA.get_output_descriptor("enriched", KVSerde("string", "json"))
MEMBERS = [f"m{i}" for i in range(6)]


def by_partition(messages: list[KV], partitions: int) -> dict[int, list[KV]]:
    """Each message where a producer's key hash puts it."""
    found: dict[int, list[KV]] = {p: [] for p in range(partitions)}
    for kv in messages:
        found[partition_for(kv.key.encode(), partitions)].append(kv)
    return found


@pytest.mark.parametrize("writes_to", ["cache", "local table"])
def test_a_cached_local_table_filled_from_a_stream_partitioned_otherwise_is_refused(
    writes_to: str,
) -> None:
    """Profiles in 2 partitions fill a local table, views in 3 are joined with a cache in
    front of it: most views would look in a task without their member's profile and be
    enriched with None. Refused, as without the cache."""

    def describe(d: StreamApplicationDescriptor) -> None:
        local = InMemoryTableDescriptor("profiles", KVSerde("string", "json"))
        table = d.get_table(local)
        cached = d.get_table(CachingTableDescriptor("cached-profiles", local))
        d.get_input_stream(PROFILES).send_to(cached if writes_to == "cache" else table)
        d.get_input_stream(VIEWS).join(cached, Enrich()).send_to(d.get_output_stream(ENRICHED))

    def runner(view_partitions: int) -> Any:
        return (
            TestRunner.of(Lambda(describe))
            .add_input_stream(PROFILES, by_partition([KV(m, {"city": m}) for m in MEMBERS], 2))
            .add_input_stream(VIEWS, by_partition([KV(m, "/") for m in MEMBERS], view_partitions))
            .add_output_stream(ENRICHED, 1)
        )

    with pytest.raises(
        ConfigError,
        match=r"stream-table-join '.*' brings together streams with different partition "
        r"counts \(kafka.views has 3, kafka.profiles has 2\)",
    ):
        runner(3).run(timeout=10)
    # partitioned alike, every view finds its member's profile
    enriched = runner(2).run(timeout=10).keyed_outputs(ENRICHED)[0]
    assert sorted(kv.value["city"] for kv in enriched) == MEMBERS


ORDERS = KAFKA.get_input_descriptor("orders", KVSerde("string", "json"))
PAYMENTS = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
PAID = KAFKA.get_output_descriptor("paid", KVSerde("string", "json"))


@pytest.mark.parametrize("payments_key_serde", ["json", "string"])
def test_partition_bys_that_serialize_the_join_key_differently_are_refused(
    payments_key_serde: str,
) -> None:
    """Orders and payments each repartitioned by order id into 2 partitions, the orders' keys
    as "string" (o1), the payments' as "json" ("o1"): the same id hashes to different
    partitions, and most pairs never meet. Refused, naming both; with one
    key serde every pair joins."""

    def describe(d: StreamApplicationDescriptor) -> None:
        orders = d.get_input_stream(ORDERS).partition_by(
            lambda kv: kv.key, lambda kv: kv.value, KVSerde("string", "json"), "orders-by-id"
        )
        payments = d.get_input_stream(PAYMENTS).partition_by(
            lambda kv: kv.key,
            lambda kv: kv.value,
            KVSerde(payments_key_serde, "json"),
            "payments-by-id",
        )
        orders.join(
            payments, OrderPayment(), "string", None, None, timedelta(minutes=1), "j"
        ).send_to(d.get_output_stream(PAID))

    ids = [f"o{i}" for i in range(6)]
    runner = (
        TestRunner.of(Lambda(describe), {"job.intermediate.stream.partitions": 2})
        .add_input_stream(ORDERS, by_partition([KV(o, 1) for o in ids], 2))
        .add_input_stream(PAYMENTS, by_partition([KV(o, 2) for o in ids], 2))
        .add_output_stream(PAID, 1)
    )
    if payments_key_serde == "json":
        with pytest.raises(
            ConfigError,
            match=r"join 'j' brings together partition_by streams whose keys are serialized "
            r"differently \(partition_by 'orders-by-id': string, partition_by "
            r"'payments-by-id': json\)",
        ):
            runner.run(timeout=10)
    else:
        paid = runner.run(timeout=10).keyed_outputs(PAID)[0]
        assert sorted(kv.key for kv in paid) == ids


@dataclass
class _OrderIdSerde:
    """A key serde object that compares by value, so unhashable (a dataclass's ``__eq__``
    without ``__hash__``), as many are."""

    encoding: str = "utf-8"

    def to_bytes(self, value: Any) -> bytes:
        return str(value).encode(self.encoding)

    def from_bytes(self, data: bytes) -> Any:
        return data.decode(self.encoding)


def test_partition_bys_with_unhashable_key_serde_objects_still_join() -> None:
    """Serde objects are not compared (two of different classes may write the same bytes), so
    ones that cannot be hashed neither fail the check nor keep the pairs apart."""

    def describe(d: StreamApplicationDescriptor) -> None:
        orders = d.get_input_stream(ORDERS).partition_by(
            lambda kv: kv.key, lambda kv: kv.value, KVSerde(_OrderIdSerde(), "json"), "o-by-id"
        )
        payments = d.get_input_stream(PAYMENTS).partition_by(
            lambda kv: kv.key, lambda kv: kv.value, KVSerde(_OrderIdSerde(), "json"), "p-by-id"
        )
        orders.join(
            payments, OrderPayment(), "string", None, None, timedelta(minutes=1), "j"
        ).send_to(d.get_output_stream(PAID))

    ids = [f"o{i}" for i in range(6)]
    runner = (
        TestRunner.of(Lambda(describe), {"job.intermediate.stream.partitions": 2})
        .add_input_stream(ORDERS, by_partition([KV(o, 1) for o in ids], 2))
        .add_input_stream(PAYMENTS, by_partition([KV(o, 2) for o in ids], 2))
        .add_output_stream(PAID, 1)
    )
    paid = runner.run(timeout=10).keyed_outputs(PAID)[0]
    assert sorted(kv.key for kv in paid) == ids
