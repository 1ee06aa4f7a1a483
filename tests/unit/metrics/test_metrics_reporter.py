"""LogReporter's events and reporter_for's choices and errors."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from structlog.testing import capture_logs

from samzapy.api.errors import ConfigError
from samzapy.metrics import (
    Health,
    LogReporter,
    MetricsRegistry,
    MetricsReporter,
    PrometheusReporter,
    reporter_for,
)


class FakeSleep:
    """An injectable sleep that returns only when the test calls ``tick``."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self._ticks: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        await self._ticks.get()

    def tick(self) -> None:
        self._ticks.put_nowait(None)


async def settle() -> None:
    """Let the reporter's task run until it waits again (no wall-clock sleeping)."""
    for _ in range(5):
        await asyncio.sleep(0)


class CustomReporter(MetricsReporter):
    async def start(self, registry: MetricsRegistry) -> None:
        pass

    async def stop(self) -> None:
        pass


class NotAReporter:
    pass


class BrokenReporter(MetricsReporter):
    def __init__(self) -> None:
        raise RuntimeError("no endpoint")

    async def start(self, registry: MetricsRegistry) -> None:
        pass

    async def stop(self) -> None:
        pass


def registry_with_counter(count: int) -> MetricsRegistry:
    registry = MetricsRegistry()
    registry.counter("container", "processed").inc(count)
    return registry


class TestLogReporter:
    async def test_reports_every_interval_and_once_more_at_stop(self) -> None:
        registry = registry_with_counter(1)
        sleep = FakeSleep()
        reporter = LogReporter(250, sleep=sleep)
        with capture_logs() as logs:
            await reporter.start(registry)
            await settle()
            assert sleep.calls == [0.25]
            assert logs == []

            sleep.tick()
            await settle()
            registry.counter("container", "processed").inc()
            await reporter.stop()

        assert [e["event"] for e in logs] == ["metrics_reported", "metrics_reported"]
        assert [e["metrics"] for e in logs] == [
            {"container": {"processed": 1}},
            {"container": {"processed": 2}},
        ]
        assert all(e["log_level"] == "info" for e in logs)
        assert sleep.calls == [0.25, 0.25]

    async def test_stop_reports_even_before_the_first_interval(self) -> None:
        reporter = LogReporter(60_000, sleep=FakeSleep())
        with capture_logs() as logs:
            await reporter.start(registry_with_counter(5))
            await reporter.stop()
            await reporter.stop()  # a second stop does nothing
        assert logs == [
            {
                "event": "metrics_reported",
                "log_level": "info",
                "metrics": {"container": {"processed": 5}},
            }
        ]

    def test_report_uses_the_given_logger(self) -> None:
        logger = structlog.get_logger().bind(reporter="mine")
        reporter = LogReporter(1000, logger)
        with capture_logs() as logs:
            reporter.report()  # not started: nothing to report
            reporter._registry = registry_with_counter(3)
            reporter.report()
        assert logs == [
            {
                "event": "metrics_reported",
                "log_level": "info",
                "reporter": "mine",
                "metrics": {"container": {"processed": 3}},
            }
        ]

    async def test_a_failing_gauge_is_left_out_logged_once_and_the_rest_reported(self) -> None:
        """docs/deploy.md, Metrics: the final counts of a job always reach the log; a gauge
        whose function raises is left out of each report, as of each Prometheus scrape."""
        registry = MetricsRegistry()

        def broken() -> float:
            raise ZeroDivisionError("gauge broke")

        registry.counter("container", "messages-processed").inc(7)
        registry.gauge("task.Partition 0", "broken", broken)
        registry.gauge("task.Partition 0", "in-flight").set(2)
        sleep = FakeSleep()
        reporter = LogReporter(10, sleep=sleep)
        with capture_logs() as logs:
            await reporter.start(registry)
            await settle()
            sleep.tick()
            await settle()
            assert len(sleep.calls) == 2  # the loop survived the failure
            await reporter.stop()
        assert [e["event"] for e in logs] == ["metric_read_failed", *["metrics_reported"] * 2]
        assert logs[0]["log_level"] == "error"
        assert (logs[0]["group"], logs[0]["metric"]) == ("task.Partition 0", "broken")
        assert logs[-1]["metrics"] == {
            "container": {"messages-processed": 7},
            "task.Partition 0": {"in-flight": 2},
        }

    async def test_start_twice_is_refused(self) -> None:
        reporter = LogReporter(10, sleep=FakeSleep())
        await reporter.start(MetricsRegistry())
        with pytest.raises(RuntimeError, match=r"start\(\) called twice"):
            await reporter.start(MetricsRegistry())
        await reporter.stop()

    @pytest.mark.parametrize("interval_ms", [0, -5])
    def test_interval_must_be_positive(self, interval_ms: int) -> None:
        with pytest.raises(ConfigError, match=rf"positive number of ms, got {interval_ms}"):
            LogReporter(interval_ms)


class TestReporterFor:
    def test_log(self) -> None:
        reporter = reporter_for("log", interval_ms=1500, host="0.0.0.0", port=9090)
        assert isinstance(reporter, LogReporter)
        assert reporter.interval_ms == 1500

    def test_prometheus_builds_the_prometheus_reporter_with_the_given_health(self) -> None:
        health = Health()
        reporter = reporter_for(
            "prometheus", interval_ms=1000, host="0.0.0.0", port=9090, health=health
        )
        assert isinstance(reporter, PrometheusReporter)
        assert reporter.health is health

    def test_module_and_class(self) -> None:
        reporter = reporter_for(f"{__name__}:CustomReporter", interval_ms=1, host="", port=0)
        assert isinstance(reporter, CustomReporter)

    @pytest.mark.parametrize(
        ("name", "message"),
        [
            (
                "statsd",
                r"unknown reporter 'statsd'; expected 'log', 'prometheus' or 'module:Class'",
            ),
            (":Cls", r"unknown reporter ':Cls'"),
            ("mod:", r"unknown reporter 'mod:'"),
            ("no_such_module_xyz:Cls", r"cannot import module 'no_such_module_xyz'"),
            (f"{__name__}:Missing", rf"module '{__name__}' has no attribute 'Missing'"),
            (f"{__name__}:NotAReporter", r"is not a samzapy\.metrics\.MetricsReporter subclass"),
            (f"{__name__}:BrokenReporter", r"with no arguments failed: RuntimeError: no endpoint"),
        ],
    )
    def test_errors_name_the_key(self, name: str, message: str) -> None:
        with pytest.raises(ConfigError, match=rf"^metrics\.reporters: .*{message}") as info:
            reporter_for(name, interval_ms=1000, host="localhost", port=9090)
        assert info.value.key == "metrics.reporters"
