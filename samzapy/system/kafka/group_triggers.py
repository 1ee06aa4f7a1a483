"""Why a kafka-group member rejoins its group: the trigger of each rebalance, as far as the
member can tell.

The group's coordinator tells a member that a rebalance began (a heartbeat answered
REBALANCE_IN_PROGRESS), not why: another member joined, left, was dropped after
``job.coordinator.session.timeout.ms``, or asked for one (a member that released a task
rejoins). A member knows its own causes: it asks with a reason (``rejoin``), a heartbeat the
group no longer takes (an unknown member or generation: this member's session expired) makes
it join again, and as the group's leader it notices an input's partition count change.

aiokafka keeps these to itself: its coordinator has one flag, a rejoin is due
(``_rejoin_needed_fut``), set by whichever comes first, and cleared as the member syncs with
the group. ``RebalanceTriggers`` wraps the calls that set it and keeps the cause that set it;
the listener takes it as the rebalance begins. A cause noticed while a rebalance is already
due starts none of its own: that rebalance carries it, under the first cause.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from samzapy.system.group import REJOIN_ASKED

#: A heartbeat answered that the group is rebalancing: the coordinator does not say why.
GROUP_REBALANCING = (
    "the group began a rebalance: a member joined, left or was dropped after its session "
    "timeout, or asked for one"
)
#: A heartbeat the group refused for an unknown member or generation.
MEMBER_UNKNOWN = "the group no longer knew this member: its session expired"
#: The leader's metadata shows another partition count for an input topic.
PARTITIONS_CHANGED = "the partition count of an input topic changed"


class RebalanceTriggers:
    """The cause of the rebalance this member is due to join, until it is taken."""

    def __init__(self) -> None:
        self._cause: str | None = None

    def rejoin(self, coordinator: Any, reason: str) -> None:
        """Ask aiokafka's ``coordinator`` (None: not started) to rejoin, for ``reason``."""
        if coordinator is not None:  # aiokafka has no public call
            self._caused(coordinator, reason, coordinator.request_rejoin)

    def watch(self, consumer: Any) -> None:
        """Note what makes ``consumer``'s coordinator rejoin: its heartbeats' answers and the
        leader's metadata changes (aiokafka's private calls, left alone where missing)."""
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None:
            return
        changed = getattr(coordinator, "_on_metadata_change", None)
        if changed is not None:
            coordinator._on_metadata_change = lambda: self._caused(
                coordinator, PARTITIONS_CHANGED, changed
            )
        beat: Callable[[], Awaitable[bool]] | None = getattr(coordinator, "_do_heartbeat", None)
        if beat is None:
            return

        async def heartbeat() -> bool:
            was_due = _due(coordinator)
            acknowledged = await beat()
            if not was_due and _due(coordinator):
                # REBALANCE_IN_PROGRESS is taken; an unknown member or generation is not.
                self._cause = GROUP_REBALANCING if acknowledged else MEMBER_UNKNOWN
            return acknowledged

        coordinator._do_heartbeat = heartbeat

    def take(self) -> str | None:
        """The cause of the rebalance beginning now (None: a rejoin whose cause the member did
        not see, as the group restarting a rebalance under way); the next one's is noted
        afresh."""
        cause, self._cause = self._cause, None
        return cause

    def _caused(self, coordinator: Any, reason: str, call: Callable[[], None]) -> None:
        was_due = _due(coordinator)
        call()
        if not was_due and _due(coordinator):
            self._cause = reason


def _due(coordinator: Any) -> bool:
    """Whether aiokafka's ``coordinator`` is due to rejoin the group."""
    due = getattr(coordinator, "_rejoin_needed_fut", None)
    return due is not None and due.done()


__all__ = [
    "GROUP_REBALANCING",
    "REJOIN_ASKED",
    "MEMBER_UNKNOWN",
    "PARTITIONS_CHANGED",
    "RebalanceTriggers",
]
