"""The log events of a kafka-group container's rebalances, and why each one happened.

Each rebalance this member joins after its first assignment is ``rebalance_started``: the
tasks it runs, and the ``reason`` its membership gives (``rebalance_reason``: this member's
own rejoin, or what the group let it see). The assignment that ends the handover is
``rebalance_completed``: the tasks kept, added and removed, the added ones' pause, the
handover time counted from the first ``rebalance_started`` since the last assignment, and
that rebalance's ``reason`` (a rebalance restarted before the assignment came logs a
``rebalance_started`` of its own; the handover is still the first one's). A rebalance that
begins while an assignment is being taken (the rejoin of a release, which aiokafka starts at
once) belongs to the next assignment, not to the one being taken. A container's first
assignment is ``tasks_assigned``, with the same fields and the reason ``JOINED``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import structlog

from samzapy.config.views import JobConfig

log = structlog.get_logger("samzapy.job_runner")

#: The reasons of this member's own rejoins (``GroupMembership.rejoin``).
RELEASED = "this member released tasks"
FENCED = "a task here was fenced by its new owner"
WARMED = "a standby here caught up with a task that waits to move to it"
#: ``tasks_assigned``'s reason; a membership that gives no reason's.
JOINED = "this container joined the group"
UNKNOWN = "unknown"


class RebalanceLog:
    """Logs the rebalances of one member; time is ``time.monotonic``."""

    def __init__(self) -> None:
        #: The first ``rebalance_started`` since the last assignment: when, and why.
        self._started: tuple[float, str] | None = None
        #: The first one logged while an assignment is being taken: the next one's.
        self._next: tuple[float, str] | None = None
        self._taking = False

    def started(self, tasks: Iterable[int], reason: str | None) -> None:
        """A rebalance began, for ``reason`` (None: unknown), while this member ran ``tasks``."""
        reason = reason or UNKNOWN
        if self._taking:
            self._next = self._next or (time.monotonic(), reason)
        elif self._started is None:
            self._started = (time.monotonic(), reason)
        log.info("rebalance_started", tasks=names(tasks), reason=reason)

    def taking(self) -> None:
        """An assignment is being taken: a rebalance that begins from now on ends with the
        next one. (A take that ended without ``completed``, its share failed, leaves what
        began meanwhile to this one.)"""
        self._started = self._started or self._next
        self._next = None
        self._taking = True

    def completed(
        self,
        tasks: Iterable[int],
        *,
        kept: Iterable[int],
        added: Iterable[int],
        removed: Iterable[int],
        paused_ms: Mapping[str, float],
        began: float,
    ) -> None:
        """The assignment of ``tasks`` is in place (``began``: when this member took it)."""
        since, reason = self._started or (began, JOINED)
        log.info(
            "rebalance_completed" if self._started is not None else "tasks_assigned",
            reason=reason,
            tasks=names(tasks),
            tasks_kept=names(kept),
            tasks_added=names(added),
            tasks_removed=names(removed),
            paused_ms=dict(paused_ms),
            handover_ms=round((time.monotonic() - since) * 1000, 1),
        )
        self._started, self._next, self._taking = self._next, None, False

    def left(self, group: str, job: JobConfig) -> None:
        """``group_left``: this member's membership ended. A static member (KIP-345) sends
        no leave: the group keeps it, and its tasks, until its session expires or a container
        with its id rejoins (``samzapy checkpoint set`` refuses the job until then)."""
        if job.container_id is None:
            log.info("group_left", group=group, membership="dynamic")
            return
        log.info(
            "group_left",
            group=group,
            membership="static",
            member_until=(
                "the group keeps this static member and its tasks for job.coordinator.session."
                f"timeout.ms ({job.coordinator_session_timeout_ms} ms) unless a container "
                f"with job.container.id {job.container_id!r} rejoins"
            ),
        )


def names(tasks: Iterable[int]) -> list[str]:
    """The task names of ``tasks`` (partition numbers), in order."""
    return [f"Partition {k}" for k in sorted(tasks)]


__all__ = ["FENCED", "JOINED", "RELEASED", "UNKNOWN", "WARMED", "RebalanceLog", "names"]
