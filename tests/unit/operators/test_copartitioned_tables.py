"""A stream-table join with a caching table in front of a local table: the streams that fill
the local table, through the cache or directly, are partitioned as the stream joined with the
cache, or the job is refused at start-up (docs/tables.md, Stream-stream joins)."""

from __future__ import annotations

from typing import Any

import pytest
from test_apps import Lambda
from test_table_apps import Enrich

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
