"""Metrics: the registry the container updates (pure) and the reporters that publish it."""

from samzapy.metrics.health import Health
from samzapy.metrics.ports import MetricsReporter
from samzapy.metrics.prometheus import PrometheusReporter
from samzapy.metrics.registry import Counter, Gauge, Metric, MetricsRegistry, Timer
from samzapy.metrics.reporter import LogReporter, reporter_for, start_reporters

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
]
