"""The Prometheus exporter follows Prometheus' naming conventions (tests/prometheus_conventions.py).

A registry holding every metric the catalogue describes, registered with its kind as the
container registers it, is scraped through the reporter; a broken convention shows as a
problem naming the metric.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from samzapy.metrics import MetricsRegistry
from samzapy.metrics.catalogue import DESCRIPTIONS
from samzapy.metrics.prometheus import RegistryCollector

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prometheus_conventions import families, problems

GROUPS = {
    "messages-processed": "container",
    "commits": "container",
    "checkpoints-written": "container",
    "commit-latency": "container",
    "producer-errors": "container",
    "sends-dropped": "container",
    "deserialization-errors": "container",
    "process-errors": "container",
    "rebalances": "coordinator",
    "tasks": "coordinator",
    "lag": "partition.kafka.in#0",
}


def scrape(registry: MetricsRegistry) -> str:
    """The registry in Prometheus' text format, as /metrics serves it."""
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry, structlog.get_logger()))
    return generate_latest(collectors).decode()


def catalogued_registry() -> MetricsRegistry:
    registry = MetricsRegistry()
    for name, described in DESCRIPTIONS.items():
        group = GROUPS.get(name, "task.Partition 0")
        if described.kind == "counter":
            registry.counter(group, name, lambda: 7)
        elif described.kind == "gauge":
            registry.gauge(group, name, lambda: 3.5)
        else:
            timer = registry.timer(group, name)
            for ns in (50_000, 2_000_000, 3_000_000_000):
                timer.update_ns(ns)
    return registry


def test_every_catalogued_metric_follows_the_conventions() -> None:
    text = scrape(catalogued_registry())
    assert problems(text) == []
    exported = families(text)
    assert exported["samzapy_container_messages_processed"].type == "counter"
    assert "samzapy_container_messages_processed_total 7.0" in text
    assert exported["samzapy_coordinator_tasks"].type == "gauge"
    assert exported["samzapy_task_process_latency_seconds"].type == "histogram"
    assert exported["samzapy_container_commit_latency_seconds"].documentation == (
        "Time one commit took, flushes and checkpoint write included (seconds)."
    )
    # One HELP text for the container's count and each task's, which starts again when the
    # task comes back to this process after a rebalance (a new task instance).
    assert exported["samzapy_container_messages_processed"].documentation == (
        "Messages whose processing completed: the container's since the process started, a "
        "task's since it last started in this process (messages)."
    )


def test_a_help_text_given_at_registration_is_used() -> None:
    registry = MetricsRegistry()
    registry.counter("app", "emails-sent", lambda: 1, help="Emails the job sent", unit="emails")
    text = scrape(registry)
    assert "# HELP samzapy_app_emails_sent_total Emails the job sent (emails)." in text
    assert problems(text) == []


@pytest.mark.parametrize(
    ("register", "problem"),
    [
        (lambda r: r.gauge("container", "commits", lambda: 1), "a gauge, but it is a counter"),
        (lambda r: r.counter("task.T", "in-flight"), "a counter, but it is a gauge"),
        (lambda r: r.gauge("x", "undescribed", lambda: 1), "does not end with its (unit)"),
    ],
)
def test_the_check_catches_a_broken_convention(register: object, problem: str) -> None:
    registry = MetricsRegistry()
    register(registry)  # type: ignore[operator]
    found = problems(scrape(registry))
    assert len(found) == 1 and problem in found[0], found
