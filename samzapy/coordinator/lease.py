"""The group lease: whether this container may still be sure it owns the tasks it was given.

A group evicts a member it has not heard from for ``job.coordinator.session.timeout.ms``. The
heartbeats are sent from this process's event loop, so a loop that stood still for longer
than that (a long synchronous call, a paused VM) means the member is gone and its tasks may
run elsewhere. The lease ticks on the loop; a tick that finds the last one older than the
session timeout breaks the lease until the group hands out tasks again (``renew``), and a
check made before the late tick notices the gap itself. A broken lease stops the container's
tasks at once, committing nothing; its producers hand nothing more over and no checkpoint is
written under it. A fenced static member's lease is revoked: broken for good.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("samzapy.job_runner")


class Lease:
    """Ticks on the event loop; ``valid`` until the loop stands still too long."""

    def __init__(
        self,
        session_timeout_ms: int,
        on_lost: Callable[[], None],
        *,
        margin_s: float = 0.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_lost`` is called when the lease breaks (the loop stood still for the session
        less ``margin_s``: the broker counts the session from the last heartbeat it received,
        which may precede the loop's last tick by a heartbeat interval and a round trip);
        ``now`` reads the monotonic clock (tests move it by hand)."""
        self._on_lost = on_lost
        self._now = now
        self._session_s = session_timeout_ms / 1000 - margin_s
        self._interval_s = max(self._session_s / 10, 0.05)
        self._last = now()
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
        self._last = self._now()
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
        if gap >= self._session_s and not self._broken:
            self._broken = True
            log.warning(
                "lease_lost",
                stood_still_s=round(gap, 1),
                reason="the event loop stood still for longer than "
                "job.coordinator.session.timeout.ms: the group has evicted this container, "
                "whose tasks may run elsewhere; no checkpoint is written until it rejoins",
            )
            self._on_lost()


__all__ = ["Lease"]
