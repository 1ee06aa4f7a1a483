"""Every integration test: no `samzapy run` process a test started (``test_kafka_jobs.Job``)
outlives it, whether the test passed or failed half way."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_kafka_jobs import RUNNING


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test() -> Iterator[None]:
    yield
    while RUNNING:
        proc = RUNNING.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
