"""The container's metrics, read from the tasks' progress when a reporter asks, so nothing is
counted on the hot path: monotonic counts are counters, levels are gauges; the timers (process
and commit latency) are updated by the tasks themselves.

The ``container`` group's counts belong to the process, not to one SamzaContainer: a JobRunner
runs a new container after each rebalance, and ``ProcessTotals`` adds the counts of the
containers that ended to the running one's, so the counters only grow (what Prometheus'
``rate()`` assumes). A task's own group lives as long as the task stays in this process."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from samzapy.api.system import SystemStreamPartition
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.checkpoint.writer import TaskCheckpointWriter
from samzapy.container.inputs import InputQueue
from samzapy.container.progress import finished_fields
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics.registry import MetricsRegistry
from samzapy.storage.task_stores import TaskStores
from samzapy.system.ports import SystemConsumer

CONTAINER = "container"


class ProcessTotals:
    """The container counts of every SamzaContainer this process ran, for its whole life."""

    def __init__(self) -> None:
        self._ended = {"processed": 0, "commits": 0, "checkpoints": 0}
        self._running: list[Callable[[], dict[str, int]]] = []
        #: Whether a container of this process logged ``container_started`` (startup.py).
        self.announced = False

    def running(self, counts: Callable[[], dict[str, int]]) -> None:
        """A container started: its counts are read from ``counts`` until it ends."""
        self._running.append(counts)

    def ended(self, counts: Callable[[], dict[str, int]]) -> None:
        """The container of ``counts`` ended: its final counts are kept."""
        if counts in self._running:
            self._running.remove(counts)
            for name, value in counts().items():
                self._ended[name] += value

    def value(self, name: str) -> int:
        return self._ended[name] + sum(counts()[name] for counts in self._running)

    def finished(self, reason: str, started: float) -> dict[str, Any]:
        """The process's ``job_finished`` fields, its run begun at ``started`` (monotonic)."""
        return finished_fields(reason, started, {n: self.value(n) for n in self._ended})

    def processed(self) -> int:
        return self.value("processed")

    def register(self, registry: MetricsRegistry) -> None:
        """Export the totals as the ``container`` group's counters (once per registry)."""
        registry.counter(CONTAINER, "messages-processed", self.processed)
        registry.counter(CONTAINER, "commits", lambda: self.value("commits"))
        registry.counter(CONTAINER, "checkpoints-written", lambda: self.value("checkpoints"))


def task_group(name: str) -> str:
    return f"task.{name}"


def partition_group(ssp: SystemStreamPartition) -> str:
    return f"partition.{ssp}"


def register_task_metrics(
    registry: MetricsRegistry,
    task: TaskInstance,
    checkpoints: TaskCheckpointWriter,
    lag: Sequence[tuple[SystemStreamPartition, SystemConsumer, OffsetTracker, InputQueue]],
) -> dict[SystemStreamPartition, Callable[[], float]]:
    """Per task: messages processed, calls in flight, windows, commits, checkpoint age and
    restored records; per input partition: the consumer lag (returned too, for the
    ``progress`` line)."""
    group = task_group(task.name)
    registry.counter(group, "messages-processed", lambda: task.progress().processed)
    registry.gauge(group, "in-flight", lambda: task.progress().in_flight)
    registry.counter(group, "windows", lambda: task.progress().windows)
    registry.counter(group, "commits", lambda: task.progress().commits)
    registry.gauge(group, "checkpoint-age-seconds", _age(task, checkpoints, time.monotonic()))
    if task.stores:
        registry.gauge(group, "restored-records", _restored(task.stores))
    if task.duplicates_dropped is not None:
        registry.counter(group, "duplicates-dropped", lambda: task.duplicates_dropped or 0)
    lags = {ssp: _lag(consumer, ssp, tracker, queue) for ssp, consumer, tracker, queue in lag}
    for ssp, read in lags.items():
        registry.gauge(partition_group(ssp), "lag", read)
    return lags


def _lag(
    consumer: SystemConsumer,
    ssp: SystemStreamPartition,
    tracker: OffsetTracker,
    queue: InputQueue,
) -> Callable[[], float]:
    """Messages of the partition not processed yet: from the next one to process (or where
    the consumer started, before the first) to the high watermark; 0 when the system cannot
    tell. Once the task has processed all the consumer handed over of the partition, the
    next one is no earlier than where the consumer fetches next: the offsets between hold
    no message (a transaction's commit marker, a file's blank line: each would count for
    ever)."""

    def lag() -> float:
        high = consumer.high_watermark(ssp)
        if high is None:
            return 0
        last = tracker.last_processed
        try:
            # Nothing processed yet: from where the consumer started (a job that starts at
            # `upcoming` has nothing to catch up on).
            upcoming = consumer.start_offset(ssp) if last is None else int(last) + 1
        except ValueError:
            return 0
        if not queue.queue and tracker.oldest_offset() is None:
            fetch = consumer.fetch_offset(ssp)
            if fetch is not None and (upcoming is None or fetch > upcoming):
                upcoming = fetch
        return max(high - (upcoming or 0), 0)

    return lag


def _age(
    task: TaskInstance, checkpoints: TaskCheckpointWriter, since: float
) -> Callable[[], float]:
    """Seconds since the task's checkpoint last covered all it had processed (since start-up
    before its first commit): at most about ``task.commit.ms`` while commits succeed, busy
    or idle; 0 once the task finished (every input ended, its final commit made)."""

    def age() -> float:
        if task.finished:
            return 0.0
        return time.monotonic() - (checkpoints.current_at or since)

    return age


def _restored(stores: TaskStores) -> Callable[[], float]:
    return lambda: stores.restored_records


__all__ = [
    "CONTAINER",
    "ProcessTotals",
    "partition_group",
    "register_task_metrics",
    "task_group",
]
