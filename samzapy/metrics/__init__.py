"""Metrics: the registry the container updates (pure) and the reporters that publish it."""

from samzapy.metrics.registry import Counter, Gauge, Metric, MetricsRegistry, Timer
from samzapy.metrics.reporter import LogReporter, MetricsReporter, reporter_for

__all__ = [
    "Counter",
    "Gauge",
    "LogReporter",
    "Metric",
    "MetricsRegistry",
    "MetricsReporter",
    "Timer",
    "reporter_for",
]
