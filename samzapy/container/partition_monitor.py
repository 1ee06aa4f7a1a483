"""Watching the inputs' partition counts while the job runs (Samza's
``StreamPartitionCountMonitor``).

Task k reads partition k of every input, and a task's state belongs to its partitions' keys:
a partition added to an input while the job runs is read by no task, and the keys it takes
over no longer reach the task whose state holds them. So the container looks the counts up
again every ``job.coordinator.monitor-partition-change.frequency.ms`` (one metadata call per
system, in a task of its own that sleeps in between: the run loop never waits for it), for
every input it started with: the intermediate streams the job creates and the broadcast
inputs included. On a change it:

1. logs ``input_partitions_changed`` once per changed input (the counts before and now, and
   what the operator does about it: for a job without stores, start a new job from its
   checkpoints, which reads the new partitions too);
2. asks the container to stop, as SIGTERM does: the calls in flight finish, the tasks are
   closed and commit what they processed (nothing else: the new partitions are never read),
   and the container then raises an error worded as the start-up check's for a count that
   changed (``checkpoint/codec.py``), so ``samzapy run`` exits 1. Samza's job coordinator
   likewise stops the job when its monitor finds a change.

A look-up that fails (a broker out of reach, a stream being recreated) changes nothing: it is
logged once (``partition_count_lookup_failed``), the next success once
(``partition_count_lookup_recovered``), and the monitor keeps going. An input that no
longer exists (a topic deleted) is no failed look-up: it is logged once as missing
(``input_stream_missing``; ``input_stream_found`` if it comes back) and the other inputs'
counts are still compared. For a Kafka input the consumer fails the job for it within its
check interval (``system/kafka/topic_watch.py``).

A job without periodic commits (``task.commit.ms`` <= 0) also has its output routers take up
the partitions added to their plain outputs at each check (``collector.py``; no I/O: what the
producers learned at their own metadata refresh), as a job with commits does at each commit:
else a keyed output hashed over the count it started with until the job stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import structlog

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.checkpoint.codec import STATELESS_REMEDY
from samzapy.config import ResolvedConfig
from samzapy.config.directories import OWN_DIRECTORIES
from samzapy.container.clock import Clock
from samzapy.container.collector import OutputRouter
from samzapy.container.streams import partition_counts
from samzapy.system.ports import SystemAdmin

log = structlog.get_logger("samzapy.container")

#: What the operator does about a changed input (docs/deploy.md, "Adding partitions to an
#: input").
ACTION = (
    "a task's state belongs to its partition, so the count must not change under a job: a "
    "restart that finds checkpoints refuses the new count; write the input to a new stream "
    "with the partition count you want and run the job on it under a new job.id "
    f"({OWN_DIRECTORIES}; without checkpoints a restart reads the new partitions from their "
    "offset default)"
)


def changed_counts(
    before: Mapping[SystemStream, int], now: Mapping[SystemStream, int]
) -> list[tuple[SystemStream, int, int]]:
    """The inputs of ``before`` whose count ``now`` differs: (input, before, now), in order of
    their names."""
    return [
        (stream, count, now[stream])
        for stream, count in sorted(before.items())
        if stream in now and now[stream] != count
    ]


def changed_error(
    changes: list[tuple[SystemStream, int, int]], *, stateless: bool = False
) -> StreamSystemError:
    """The error a run that found ``changes`` ends with (the start-up check's wording);
    ``stateless``: the job has no stores, and the error says how it goes on."""
    said = "; ".join(
        f"input {stream} had {before} partitions when the job started and has {now} now"
        for stream, before, now in changes
    )
    remedy = (
        STATELESS_REMEDY
        if stateless
        else "write the data to a new stream with the partition count you want and read that "
        f"instead, as a new job (a new job.id; {OWN_DIRECTORIES})"
    )
    return StreamSystemError(
        f"{said}; a stream's partition count must never change while a job reads it (each "
        "task's state belongs to its partition): the job stopped, committing only what it "
        f"processed; {remedy}"
    )


class PartitionCountMonitor:
    """Looks the inputs' partition counts up every ``interval_ms`` (<= 0: never) on ``clock``
    once started; ``changed`` is the error the container raises once it found a change."""

    def __init__(
        self, interval_ms: int, clock: Clock, *, stateless: bool = False, outputs: bool = False
    ) -> None:
        """``stateless``: the job has no stores (what the operator does differs);
        ``outputs``: it has no periodic commits, and its routers take added partitions up at
        each check (module docstring)."""
        self.interval_s = interval_ms / 1000 if interval_ms > 0 else None
        self._clock = clock
        self._stateless = stateless
        self._outputs = outputs
        self._task: asyncio.Task[None] | None = None
        #: Set once a change was found (and the container asked to stop).
        self.changed: StreamSystemError | None = None

    @classmethod
    def of(cls, config: ResolvedConfig, clock: Clock) -> PartitionCountMonitor:
        """The monitor of a job configured by ``config``."""
        interval_ms = config.job.monitor_partition_change_ms
        outputs = config.task.commit_ms <= 0
        return cls(interval_ms, clock, stateless=not config.stores, outputs=outputs)

    def start(
        self,
        admins: Mapping[str, SystemAdmin],
        counts: Mapping[SystemStream, int],
        stop: Callable[[str], None],
        routers: Sequence[OutputRouter] = (),
    ) -> None:
        """Watch ``counts`` (the inputs' partition counts the tasks were planned with) through
        ``admins``; on a change, call ``stop`` with the reason. ``routers``: the container's
        (the list it keeps: the tasks it releases leave it), which take the partitions added
        to their outputs up at each check when the monitor watches ``outputs``."""
        if self.interval_s is None or not counts or self._task is not None:
            return
        self._task = asyncio.get_running_loop().create_task(
            self._watch(admins, dict(counts), stop, routers if self._outputs else ()),
            name="partition-count-monitor",
        )

    def stop(self) -> None:
        """Stop watching (before the admins stop)."""
        if self._task is not None:
            self._task.cancel()

    def check(self) -> None:
        """Raise the error of the change found, if one was."""
        if self.changed is not None:
            raise self.changed

    async def _watch(
        self,
        admins: Mapping[str, SystemAdmin],
        before: dict[SystemStream, int],
        stop: Callable[[str], None],
        routers: Sequence[OutputRouter],
    ) -> None:
        assert self.interval_s is not None
        clock, failing = self._clock, False
        missing: set[SystemStream] = set()
        while True:
            await clock.sleep_until(clock.now() + self.interval_s)
            for router in routers:
                router.take_up_added_partitions()
            try:
                now = await partition_counts(admins, before, missing_ok=True)
            except Exception as exc:  # any admin's failure: the job goes on, checked later
                if not failing:
                    log.warning(
                        "partition_count_lookup_failed",
                        error=str(exc),
                        retry_in_s=self.interval_s,
                        reason="the job goes on; the inputs' partition counts are looked up "
                        "again at the next check",
                    )
                failing = True
                continue
            if failing:
                log.info("partition_count_lookup_recovered")
                failing = False
            _log_missing(missing, [stream for stream in before if stream not in now])
            if changes := changed_counts(before, now):
                for stream, count, found in changes:
                    log.error(
                        "input_partitions_changed",
                        stream=str(stream),
                        partitions_before=count,
                        partitions_now=found,
                        action=STATELESS_REMEDY if self._stateless else ACTION,
                    )
                self.changed = changed_error(changes, stateless=self._stateless)
                stop("input partition count changed")
                return


def _log_missing(logged: set[SystemStream], missing: list[SystemStream]) -> None:
    """Log the inputs ``missing`` now that were not (``logged``: those missing at the last
    check, updated), and those found again."""
    for stream in sorted(set(missing) - logged):
        log.warning(
            "input_stream_missing",
            stream=str(stream),
            reason="the input no longer exists on its system (deleted?): its partition count "
            "is not checked while it is missing, the other inputs' are (a Kafka consumer "
            "fails the job for a topic deleted under it, topic_watch)",
        )
    for stream in sorted(logged - set(missing)):
        log.info("input_stream_found", stream=str(stream))
    logged.clear()
    logged.update(missing)


__all__ = ["ACTION", "PartitionCountMonitor", "changed_counts", "changed_error"]
