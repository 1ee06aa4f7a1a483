"""The container's metrics: gauges read from the tasks' progress when a reporter asks, so
nothing is counted on the hot path; the timers (process and commit latency) are updated by the
tasks themselves."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from samzapy.api.system import SystemStreamPartition
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.checkpoint.writer import TaskCheckpointWriter
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics.registry import MetricsRegistry
from samzapy.storage.task_stores import TaskStores
from samzapy.system.ports import SystemConsumer

CONTAINER = "container"


def task_group(name: str) -> str:
    return f"task.{name}"


def partition_group(ssp: SystemStreamPartition) -> str:
    return f"partition.{ssp}"


def register_task_metrics(
    registry: MetricsRegistry,
    task: TaskInstance,
    checkpoints: TaskCheckpointWriter,
    lag: Sequence[tuple[SystemStreamPartition, SystemConsumer, OffsetTracker]],
) -> None:
    """Per task: messages processed, calls in flight, windows, commits, checkpoint age and
    restored records; per input partition: the consumer lag."""
    group = task_group(task.name)
    registry.gauge(group, "messages-processed", lambda: task.progress().processed)
    registry.gauge(group, "in-flight", lambda: task.progress().in_flight)
    registry.gauge(group, "windows", lambda: task.progress().windows)
    registry.gauge(group, "commits", lambda: task.progress().commits)
    registry.gauge(group, "checkpoint-age-seconds", _age(checkpoints, time.monotonic()))
    if task.stores:
        registry.gauge(group, "restored-records", _restored(task.stores))
    for ssp, consumer, tracker in lag:
        registry.gauge(partition_group(ssp), "lag", _lag(consumer, ssp, tracker))


def register_container_metrics(
    registry: MetricsRegistry,
    tasks: Sequence[TaskInstance],
    checkpoints: Sequence[TaskCheckpointWriter],
) -> None:
    """Messages processed and checkpoints written by the container's tasks."""
    registry.gauge(
        CONTAINER, "messages-processed", lambda: sum(t.progress().processed for t in tasks)
    )
    registry.gauge(CONTAINER, "commits", lambda: sum(w.written for w in checkpoints))


def _lag(
    consumer: SystemConsumer, ssp: SystemStreamPartition, tracker: OffsetTracker
) -> Callable[[], float]:
    """Messages of the partition not processed yet (0 when the system cannot tell)."""

    def lag() -> float:
        high = consumer.high_watermark(ssp)
        if high is None:
            return 0
        try:
            done = -1 if tracker.last_processed is None else int(tracker.last_processed)
        except ValueError:
            return 0
        return max(high - done - 1, 0)

    return lag


def _age(checkpoints: TaskCheckpointWriter, since: float) -> Callable[[], float]:
    """Seconds since the task's last checkpoint (since start-up before the first)."""
    return lambda: time.monotonic() - (checkpoints.written_at or since)


def _restored(stores: TaskStores) -> Callable[[], float]:
    return lambda: stores.restored_records


__all__ = [
    "CONTAINER",
    "partition_group",
    "register_container_metrics",
    "register_task_metrics",
    "task_group",
]
