"""The group lease: whether this container may still be sure it owns the tasks it was given.

A group evicts a member it has not heard from for ``job.coordinator.session.timeout.ms``.
The lease breaks before the broker may have done so, on either of two signs:

- the event loop stood still for the session (a long synchronous call, a paused VM): the
  heartbeats are sent from it. The lease ticks on the loop; a tick that finds the last one
  older than the session breaks it, and a check made before the late tick notices the gap
  itself;
- no heartbeat was acknowledged for the session while the loop ran (the member is cut off
  from the group's coordinator: a network partition, a coordinator that moved and cannot be
  found). The membership says when the last acknowledged heartbeat was *sent* (``heard``):
  the broker received it no earlier, so its count of the session started no earlier. These
  count from the group's last assignment (``renew``), and a join under way sends none: a
  rebalance longer than the session breaks the lease too (the broker keeps a joining member,
  but the member cannot tell whether its join request arrived).

Both count the session less ``margin_s``. A broken lease stops the container's tasks at once,
committing nothing; its producers hand nothing more over and no checkpoint is written under
it, until the group hands out tasks again (``renew``). A fenced static member's lease is
revoked: broken for good.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("samzapy.job_runner")


class Lease:
    """Ticks on the event loop; ``valid`` until the loop stands still too long or the group
    stops acknowledging the member's heartbeats."""

    def __init__(
        self,
        session_timeout_ms: int,
        on_lost: Callable[[str], None],
        *,
        margin_s: float = 0.0,
        heard: Callable[[], float | None] | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_lost(reason)`` is called when the lease breaks (for the session less
        ``margin_s``: the broker counts the session from the last heartbeat it received,
        which may precede the loop's last tick by a heartbeat interval and a round trip);
        ``heard`` reads when the last heartbeat the group acknowledged was sent (or when the
        membership began to watch them; None: it cannot tell, and the loop alone judges);
        ``now`` reads the monotonic clock (tests move it by hand)."""
        self._on_lost = on_lost
        self._heard = heard
        self._now = now
        self._session_s = session_timeout_ms / 1000 - margin_s
        #: Writes check the lease themselves; the ticks stop the tasks soon after it breaks.
        self._interval_s = min(max(self._session_s / 10, 0.05), 0.1)
        self._last = now()
        #: When the group last handed tasks out (None: not yet: nothing to lose).
        self._renewed: float | None = None
        self._broken = False
        #: Broken for good: the group fenced this member, which never rejoins.
        self._revoked = False

    def valid(self) -> bool:
        if self._broken:
            return False
        self._check(self._now())
        return not self._broken

    def renew(self) -> None:
        """The group has just handed tasks out: the member is a member (unless revoked)."""
        self._last = self._renewed = self._now()
        self._broken = self._revoked

    def revoke(self) -> None:
        """The group fenced this member: nothing may be written under the lease any more,
        whatever comes after (a start-up or a release under way)."""
        self._revoked = self._broken = True

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            self._check(self._now())
            await asyncio.sleep(self._interval_s)

    def _check(self, now: float) -> None:
        gap = now - self._last
        self._last = now
        if self._broken:
            return
        if gap >= self._session_s:
            self._lose(
                "the event loop stood still for longer than job.coordinator.session.timeout.ms",
                stood_still_s=round(gap, 1),
            )
            return
        renewed, heard = self._renewed, None if self._heard is None else self._heard()
        if renewed is None or heard is None:  # no assignment yet, or the membership cannot say
            return
        since = now - max(heard, renewed)
        if since >= self._session_s:
            self._lose(
                "the group acknowledged no heartbeat of this member for longer than "
                "job.coordinator.session.timeout.ms (cut off from the group's coordinator, "
                "or a rebalance that outlasted the session)",
                unheard_s=round(since, 1),
            )

    def _lose(self, why: str, **figures: float) -> None:
        self._broken = True
        log.warning(
            "lease_lost",
            **figures,
            reason=f"{why}: the group may have evicted this container, whose tasks may run "
            "elsewhere; its tasks stop without committing, and nothing is written until it "
            "rejoins",
        )
        self._on_lost(why)


__all__ = ["Lease"]
