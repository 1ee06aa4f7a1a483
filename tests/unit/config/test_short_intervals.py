"""``metrics.reporter.interval.ms`` and ``task.progress.interval.ms`` below a second: a warning
from ``samzapy validate`` and ``run`` (one check, ``problems.check_job``) naming the key, the
value and its unit, since a Samza interval ported in seconds (``60``) logs many lines a
second; not an error (tests run with 100 ms)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.cli.problems import check_job
from samzapy.config import load_config, resolve
from samzapy.config.intervals import short_intervals


class Nothing(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


def job(**keys: object) -> str:
    lines = [
        "job.name: intervals",
        f"task.class: {__name__}:Nothing",
        "task.inputs: [mem.in]",
        "systems.mem.samza.factory: memory",
        *(f"{key}: {value}" for key, value in keys.items()),
    ]
    return "\n".join(lines) + "\n"


def found(**keys: object) -> list[tuple[str, int]]:
    config = resolve(load_config(text=job(**keys), env={}))
    return [(key, value) for key, value, _ in short_intervals(config)]


def test_intervals_below_a_second_are_found() -> None:
    both = {
        "metrics.reporters": "[log]",
        "metrics.reporter.interval.ms": 60,
        "task.progress.interval.ms": 1,
    }
    assert found(**both) == [("metrics.reporter.interval.ms", 60), ("task.progress.interval.ms", 1)]


@pytest.mark.parametrize(
    "keys",
    [
        {},  # the defaults: a minute, ten seconds
        {"metrics.reporters": "[log]", "metrics.reporter.interval.ms": 1000},
        {"task.progress.interval.ms": 1000},
        {"task.progress.interval.ms": 0},  # off
        {"task.progress.interval.ms": -1},  # off
        # No log reporter: the interval is used by none.
        {"metrics.reporters": "[prometheus]", "metrics.reporter.interval.ms": 60},
    ],
    ids=repr,
)
def test_a_second_or_more_an_interval_off_or_unused_is_not(keys: dict[str, object]) -> None:
    assert found(**keys) == []


def test_validate_and_run_warn_naming_the_key_the_value_and_milliseconds(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(job(**{"metrics.reporters": "[log]", "metrics.reporter.interval.ms": 60}))
    with capture_logs() as logs:
        check = check_job(str(path), [])
    assert check.errors == []
    (warning,) = [e for e in logs if e["event"] == "interval_under_a_second"]
    assert warning["log_level"] == "warning"
    assert (warning["key"], warning["interval_ms"]) == ("metrics.reporter.interval.ms", 60)
    assert warning["reason"] == (
        "metrics.reporter.interval.ms is in milliseconds: 60 logs the metrics every 60 ms, "
        "16.7 times a second (an interval of 60 s is 60000)"
    )
