"""The PySpark pipeline end to end (make demo's steps): real local Spark, a broker of the
module's own, the real `samzapy run`, and exact results, the windowed counts in event time
included; and its application on its own, through TestRunner.of."""

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
from examples.pipeline.demo import check_windows, run_pipeline
from examples.pipeline.profiles import ProfileService, profile
from samzapy import KafkaSystemDescriptor
from samzapy.testing import TestRunner
from samzapy.testing.runner import TestResult

pytestmark = pytest.mark.timeout(600)


#: The window of the end-to-end run: 3,000 views span about 10 minutes of event time.
WINDOW_MINUTES = 1
WINDOW_MS = WINDOW_MINUTES * 60_000


def test_a_spark_batch_runs_through_the_daemon_with_exact_results(
    own_kafka_broker: object, tmp_path: Path
) -> None:
    csv_path = generate(3000, tmp_path / "page-views.csv", seed=5)
    with csv_path.open() as f:
        rows = list(csv.DictReader(f))
    expected = Counter(row["member_id"] for row in rows)
    expected_panes = Counter(
        (row["member_id"], int(row["ts"]) - int(row["ts"]) % WINDOW_MS) for row in rows
    )
    result = run_pipeline(
        own_kafka_broker.bootstrap,  # type: ignore[attr-defined]
        csv_path,
        tmp_path,
        tmp_path,
        window_minutes=WINDOW_MINUTES,
    )
    assert result.code == 0, (tmp_path / "samzapy.log").read_text()[-3000:]
    assert result.written["rows"] == 3000
    assert {m: e["views"] for m, e in result.counts.items()} == expected
    assert all(e["country"] == profile(m)["country"] for m, e in result.counts.items())
    assert Counter(e["member_id"] for e in result.enriched) == expected
    assert all(e["country"] == profile(e["member_id"])["country"] for e in result.enriched)
    log = (tmp_path / "samzapy.log").read_text()
    assert '"reason": "every input partition reached end-of-stream"' in log
    # The windowed counts, in event time (the views' ts): one DEFAULT pane per member and
    # minute, holding exactly that member's views of that minute, so a member's panes sum to
    # its views; all of a member's panes on its key's partition, in window order.
    panes = [pane for _, pane in result.panes]
    assert Counter((p["member_id"], p["window_start"]) for p in panes) == Counter(
        set(expected_panes)
    )
    assert {(p["member_id"], p["window_start"]): p["views"] for p in panes} == dict(expected_panes)
    assert {p["firing"] for p in panes} == {"DEFAULT"}
    partition_of: dict[str, int] = {}
    last_start: dict[str, int] = {}
    for partition, pane in result.panes:
        member = pane["member_id"]
        assert partition_of.setdefault(member, partition) == partition
        assert pane["window_start"] > last_start.get(member, -1)
        last_start[member] = pane["window_start"]
    windows = check_windows(result)
    assert windows.ok, windows
    # Spark's watermark (each Spark task's greatest ts, the lowest of them) closed every
    # window that ended by it; only the windows after it waited for end-of-stream.
    first, last = min(int(r["ts"]) for r in rows), max(int(r["ts"]) for r in rows)
    assert result.spark_watermark is not None
    assert first < result.spark_watermark <= last
    assert windows.closed_by_watermark > windows.closed_at_end > 0


KAFKA = KafkaSystemDescriptor("kafka")
PAGE_VIEWS = KAFKA.get_input_descriptor("page-views")
ENRICHED = KAFKA.get_output_descriptor("enriched-page-views")
COUNTS = KAFKA.get_output_descriptor("member-view-counts")
WINDOW_COUNTS = KAFKA.get_output_descriptor("member-window-counts")


def test_the_application_sends_each_members_counts_in_order_under_concurrent_lookups() -> None:
    """16 lookups in flight per task, several views of a member waiting on one lookup: each
    member's running counts still arrive 1, 2, 3... on its partition, so the last is the
    final count (the results of a view that found the country cached must not overtake those
    of an earlier view still waiting for the lookup)."""
    rng = random.Random(3)
    views = {
        p: [
            {"member_id": f"member-{rng.randrange(12)}", "page": "/p", "ts": i * 7_000}
            for i in range(300)
        ]
        for p in range(3)
    }
    expected = Counter(v["member_id"] for vs in views.values() for v in vs)
    # 300 views of a partition span 35 minutes of event time: four windows of 10.
    expected_panes = Counter(
        (v["member_id"], v["ts"] - v["ts"] % 600_000) for vs in views.values() for v in vs
    )

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
                "stores.views-per-window.factory": "inmemory",  # over the planner's rocksdb
                "app.profiles.url": service.url,
                "app.window.minutes": 10,
            }
            runner = (
                TestRunner.of(PageViewPipelineApp, config)
                .add_input_stream(PAGE_VIEWS, views)
                .add_output_stream(ENRICHED, 4)
                .add_output_stream(COUNTS, 4)
                .add_output_stream(WINDOW_COUNTS, 4)
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
    # The inputs end (no watermarks here): every window fires its DEFAULT pane at
    # end-of-stream, each (member, window) once, with its exact count.
    panes = [kv.value for records in result.keyed_outputs(WINDOW_COUNTS).values() for kv in records]
    assert Counter((p["member_id"], p["window_start"]) for p in panes) == Counter(
        set(expected_panes)
    )
    assert {(p["member_id"], p["window_start"]): p["views"] for p in panes} == dict(expected_panes)
    assert {p["firing"] for p in panes} == {"DEFAULT"}
