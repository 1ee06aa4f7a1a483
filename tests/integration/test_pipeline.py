"""The PySpark pipeline end to end (make demo's steps): real local Spark, a broker of the
module's own, the real `samzapy run`, and exact results; and its application on its own,
through TestRunner.of."""

from __future__ import annotations

import asyncio
import csv
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples.pipeline.app import PageViewPipelineApp
from examples.pipeline.dataset import generate
from examples.pipeline.demo import run_pipeline
from examples.pipeline.profiles import ProfileService, profile
from samzapy import KafkaSystemDescriptor
from samzapy.testing import TestRunner
from samzapy.testing.runner import TestResult

pytestmark = pytest.mark.timeout(600)


def test_a_spark_batch_runs_through_the_daemon_with_exact_results(
    own_kafka_broker: object, tmp_path: Path
) -> None:
    csv_path = generate(3000, tmp_path / "page-views.csv", seed=5)
    with csv_path.open() as f:
        expected = Counter(row["member_id"] for row in csv.DictReader(f))
    result = run_pipeline(own_kafka_broker.bootstrap, csv_path, tmp_path, tmp_path)  # type: ignore[attr-defined]
    assert result.code == 0, (tmp_path / "samzapy.log").read_text()[-3000:]
    assert result.written["rows"] == 3000
    assert {m: e["views"] for m, e in result.counts.items()} == expected
    assert all(e["country"] == profile(m)["country"] for m, e in result.counts.items())
    assert Counter(e["member_id"] for e in result.enriched) == expected
    assert all(e["country"] == profile(e["member_id"])["country"] for e in result.enriched)
    log = (tmp_path / "samzapy.log").read_text()
    assert '"reason": "every input partition reached end-of-stream"' in log


KAFKA = KafkaSystemDescriptor("kafka")
PAGE_VIEWS = KAFKA.get_input_descriptor("page-views")
ENRICHED = KAFKA.get_output_descriptor("enriched-page-views")
COUNTS = KAFKA.get_output_descriptor("member-view-counts")


def test_the_application_sends_each_members_counts_in_order_under_concurrent_lookups() -> None:
    """16 lookups in flight per task, several views of a member waiting on one lookup: each
    member's running counts still arrive 1, 2, 3... on its partition, so the last is the
    final count (the results of a view that found the country cached must not overtake those
    of an earlier view still waiting for the lookup)."""
    rng = random.Random(3)
    views = {
        p: [{"member_id": f"member-{rng.randrange(12)}", "page": "/p", "ts": i} for i in range(300)]
        for p in range(3)
    }
    expected = Counter(v["member_id"] for vs in views.values() for v in vs)

    async def run() -> tuple[TestResult, int]:
        service = ProfileService(delay_ms=1.0)
        await service.start()
        try:
            config: dict[str, Any] = {
                "task.max.concurrency": 16,
                "job.intermediate.stream.partitions": 4,
                "stores.views.factory": "inmemory",
                "stores.views.key.serde": "string",
                "stores.views.msg.serde": "long",
                "app.profiles.url": service.url,
            }
            runner = (
                TestRunner.of(PageViewPipelineApp, config)
                .add_input_stream(PAGE_VIEWS, views)
                .add_output_stream(ENRICHED, 4)
                .add_output_stream(COUNTS, 4)
            )
            return await runner.run_async(timeout=60), service.requests
        finally:
            await service.stop()

    result, lookups = asyncio.run(run())
    final: dict[str, int] = {}
    for partition, records in result.keyed_outputs(COUNTS).items():
        for kv in records:
            assert kv.value["views"] == final.get(kv.key, 0) + 1, (partition, kv)
            assert kv.value["country"] == profile(kv.key)["country"]
            final[kv.key] = kv.value["views"]
    assert final == expected
    enriched = [e for records in result.outputs(ENRICHED).values() for e in records]
    assert Counter(e["member_id"] for e in enriched) == expected
    assert all(e["country"] == profile(e["member_id"])["country"] for e in enriched)
    assert lookups == len(expected)  # one lookup per member, shared by its waiting views
