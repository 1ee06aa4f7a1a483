"""Metrics: the registry the container updates (pure) and the reporters that publish it."""

from typing import TYPE_CHECKING, Any

from samzapy.metrics.health import Health
from samzapy.metrics.ports import MetricsReporter
from samzapy.metrics.registry import Counter, Gauge, Metric, MetricsRegistry, Timer
from samzapy.metrics.reporter import LogReporter, reporter_for, start_reporters, stop_reporters

if TYPE_CHECKING:
    from samzapy.metrics.prometheus import PrometheusReporter


def __getattr__(name: str) -> Any:
    """``PrometheusReporter`` on first use: prometheus_client is imported only by a job that
    serves it (or code that names it)."""
    if name == "PrometheusReporter":
        from samzapy.metrics.prometheus import PrometheusReporter

        return PrometheusReporter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Counter",
    "Gauge",
    "Health",
    "LogReporter",
    "Metric",
    "MetricsRegistry",
    "MetricsReporter",
    "PrometheusReporter",
    "Timer",
    "reporter_for",
    "start_reporters",
    "stop_reporters",
]
