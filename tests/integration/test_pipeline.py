"""The PySpark pipeline end to end (make demo's steps): real local Spark, a broker of the
module's own, the real `samzapy run`, and exact results."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from examples.pipeline.dataset import generate
from examples.pipeline.demo import run_pipeline
from examples.pipeline.profiles import profile

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
