"""What the container's metrics mean: the HELP text, unit and kind of each metric name.

Pure data. A metric is named the same in every group it appears in (``messages-processed`` of
the container and of each task), so one entry describes the name. The Prometheus reporter takes
its HELP text from here (or from what a component passed to the registry), and the kind says
how the name must be registered: a count that only goes up is a ``counter`` (exported with
``_total``), a level that goes up and down a ``gauge``, a duration a ``timer`` (a histogram in
seconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Kind = Literal["counter", "gauge", "timer"]


@dataclass(frozen=True, slots=True)
class Description:
    """What a metric means (one sentence), its unit (``seconds``, ``messages``...) and kind."""

    help: str
    unit: str
    kind: Kind | None = None


DESCRIPTIONS: Final[dict[str, Description]] = {
    "messages-processed": Description(
        "Messages whose processing completed: the container's since the process started, a "
        "task's since it last started in this process",
        "messages",
        "counter",
    ),
    "commits": Description(
        "Commits completed (producers flushed, stores flushed, checkpoint written if it moved);"
        " the container's is the sum of its tasks'",
        "commits",
        "counter",
    ),
    "checkpoints-written": Description(
        "Checkpoint records written: one per commit that moved a checkpoint, and one per task"
        " taken over (its checkpoint claimed with the container's epoch)",
        "records",
        "counter",
    ),
    "windows": Description("Calls of the task's window method completed", "calls", "counter"),
    "checkpoint-lag": Description(
        "Changelog records a standby replica's store is behind its task's latest checkpoint",
        "records",
        "gauge",
    ),
    "changelog-lag": Description(
        "Changelog records a standby replica's store is behind its changelog's head (what the"
        " active task wrote after its latest checkpoint included)",
        "records",
        "gauge",
    ),
    "records-applied": Description(
        "Changelog records a standby replica has applied to its store, since it started",
        "records",
        "counter",
    ),
    "rebalances": Description(
        "Rebalances of the group since this container's first assignment (each one "
        "it took part in, whether it lost, kept or gained tasks)",
        "rebalances",
        "counter",
    ),
    "producer-errors": Description(
        "Messages whose send failed and was dropped (task.drop.producer.errors)",
        "messages",
        "counter",
    ),
    "sends-dropped": Description(
        "Messages a task's call on the thread pool sent after its task was closed (the call "
        "outlasted task.shutdown.ms at a stop or a release), dropped",
        "messages",
        "counter",
    ),
    "deserialization-errors": Description(
        "Input messages that could not be deserialized and were dropped "
        "(task.drop.deserialization.errors)",
        "messages",
        "counter",
    ),
    "process-errors": Description(
        "Input messages the task failed on and that were dropped (task.drop.process.errors)",
        "messages",
        "counter",
    ),
    "duplicates-dropped": Description(
        "Records of intermediate streams dropped as copies a restarted upstream task wrote again",
        "messages",
        "counter",
    ),
    "in-flight": Description(
        "Calls of the task's process (or process_async) started and not yet completed",
        "calls",
        "gauge",
    ),
    "tasks": Description(
        "Tasks assigned to this container now: running, being started, or ended (every "
        "input ended)",
        "tasks",
        "gauge",
    ),
    "lag": Description(
        "Messages of the input partition after the last one processed", "messages", "gauge"
    ),
    "checkpoint-age-seconds": Description(
        "Time since the task's checkpoint last covered all it had processed: a commit "
        "(one with nothing new to write too); since its start before the first; 0 once "
        "the task finished",
        "seconds",
        "gauge",
    ),
    "restored-records": Description(
        "Changelog records restored into the task's stores when it last started",
        "records",
        "gauge",
    ),
    "process-latency": Description(
        "Time from handing a message to the task until its processing completed",
        "seconds",
        "timer",
    ),
    "commit-latency": Description(
        "Time one commit took, flushes and checkpoint write included", "seconds", "timer"
    ),
}

__all__ = ["DESCRIPTIONS", "Description", "Kind"]
