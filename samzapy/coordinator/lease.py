"""The group lease: whether this container may still be sure it owns the tasks it was given.

A group evicts a member it has not heard from for ``job.coordinator.session.timeout.ms``.
Before the broker may have done so, the lease is *held*: nothing is written under it (the
producers keep what they were handed, a checkpoint waits, the tasks take no new message)
until it is known whether the member is still one. Either of two signs holds it:

- the event loop stood still for the session (a long synchronous call, a paused VM): the
  heartbeats are sent from it. The lease ticks on the loop; a tick that finds the last one
  older than the session holds it, and a check made before the late tick notices the gap
  itself;
- no heartbeat was acknowledged for the session while the loop ran (the member is cut off
  from the group's coordinator, the coordinator is down or moving, or a join outlasted the
  session). The membership says when the last acknowledged heartbeat was *sent* (``heard``):
  the broker received it no earlier, so its count of the session started no earlier. These
  count from the group's last assignment (``renew``).

Both count the session less ``margin_s``. The group's next answer settles a hold:

- a heartbeat acknowledged under the same member id (sent recently enough that the count is
  under the session again), or an assignment under it: the member stayed one throughout (a
  group never gives an evicted member its id back), so no one else ran its tasks: the lease
  is *resumed* and everything held goes on;
- the member id of the last assignment gone (aiokafka drops it when the group refuses a
  heartbeat: unknown member, illegal generation) or an assignment under a new one (the group
  evicted the member, which joined anew): the lease *breaks*, at once (a release waiting on
  the hold would otherwise keep the rejoin, so the assignment, from coming). The container's
  tasks stop, committing nothing; what the producers held is dropped; the tasks the group
  gives it next start from their checkpoints.

Leaving the group (a stop, a failure) gives a hold up, now or whenever one begins (nothing
may be committed under it, and no answer may settle it); a stand-still when the membership
cannot tell its heartbeats breaks the lease too (nothing would settle the hold).
A fenced static member's lease is revoked: broken for good.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

log = structlog.get_logger("samzapy.job_runner")

HELD_REASON = (
    "this container may have been evicted from the group: nothing is written and no message "
    "processed until the group answers (an acknowledged heartbeat resumes, a new member id "
    "gives the tasks up)"
)


class Lease:
    """Ticks on the event loop; ``valid`` until the loop stands still too long or the group
    stops acknowledging the member's heartbeats, then held until the group answers."""

    def __init__(
        self,
        session_timeout_ms: int,
        on_lost: Callable[[str], None],
        *,
        margin_s: float = 0.0,
        heard: Callable[[], float | None] | None = None,
        member: Callable[[], str | None] = lambda: None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """``on_lost(reason)`` is called when the lease breaks (for the session less
        ``margin_s``: the broker counts the session from the last heartbeat it received,
        which may precede the loop's last tick by a heartbeat interval and a round trip);
        ``heard`` reads when the last heartbeat the group acknowledged was sent (or when the
        membership began to watch them; None: it cannot tell, and the loop alone judges);
        ``member`` reads the member id the group knows this container by; ``now`` reads
        the monotonic clock (tests move it by hand)."""
        self._on_lost = on_lost
        self._heard = heard
        self._member = member
        self._now = now
        self._session_s = session_timeout_ms / 1000 - margin_s
        #: Writes check the lease themselves; the ticks settle a hold soon after the answer.
        self._interval_s = min(max(self._session_s / 10, 0.05), 0.1)
        self._last = now()
        #: When the group last handed tasks out (None: not yet: nothing to lose), and the
        #: member id it handed them to.
        self._renewed: float | None = None
        self._renewed_member: str | None = None
        #: While held: since when, the last acknowledged heartbeat then, and the future
        #: the held writers wait on (made on first demand, on the event loop).
        self._held_since: float | None = None
        self._heard_then: float | None = None
        self._settled: asyncio.Future[None] | None = None
        self._broken = False
        #: Why a hold breaks at once from now on (``give_up``), if it does.
        self._giving_up: str | None = None
        #: Broken for good: the group fenced this member, which never rejoins.
        self._revoked = False

    def valid(self) -> bool:
        """Whether writes may go now (neither held nor broken)."""
        if self._broken:
            return False
        self._check(self._now())
        return not self._broken and self._held_since is None

    def held(self) -> asyncio.Future[None] | None:
        """While the lease is held, a future done once it is settled (resumed or broken)."""
        if self._held_since is None:
            return None
        if self._settled is None:
            self._settled = asyncio.get_running_loop().create_future()
        return self._settled

    def renew(self) -> None:
        """The group has just handed tasks out: the member is a member (unless revoked).
        Under a new member id the group evicted it first: the lease breaks before it is
        renewed for the new assignment."""
        member = self._member()
        if self._renewed is not None and member != self._renewed_member and not self._broken:
            self._lose(
                "the group knows this container by a new member id: it had evicted it",
                held_s=self._held_s(),
            )
        elif self._held_since is not None:
            self._resume()
        self._last = self._renewed = self._now()
        self._renewed_member = member
        self._broken = self._revoked

    def revoke(self) -> None:
        """The group fenced this member: nothing may be written under the lease any more,
        whatever comes after (a start-up or a release under way)."""
        self._revoked = self._broken = True
        self._resolve()

    def give_up(self, why: str) -> None:
        """Break a hold, now or whenever one begins from now on (the container is leaving
        the group: nothing may be committed under a hold, and no answer may settle it)."""
        self._giving_up = why
        if self._held_since is not None and not self._broken:
            self._lose(why, held_s=self._held_s())

    async def run_beside(self, other: Awaitable[Any]) -> None:
        """``run`` beside ``other`` (the progress reports) until cancelled, as one task: a
        gather of the two, cancelled, would hold its CancelledError unretrieved."""
        await asyncio.gather(self.run(), other)

    async def run(self) -> None:
        """Tick until cancelled (the runner leaves the group: a hold is given up, as no
        tick would settle it)."""
        try:
            while True:
                self._check(self._now())
                await asyncio.sleep(self._interval_s)
        finally:
            self.give_up("the container is leaving the group")

    def _check(self, now: float) -> None:
        gap = now - self._last
        self._last = now
        if self._broken:
            return
        if self._renewed_member is not None and self._member() != self._renewed_member:
            # aiokafka dropped the member id (the group answered that it does not know the
            # member, or that a generation passed without it): it rejoins under a new one.
            self._lose(
                "the group no longer knows this container by its member id",
                held_s=self._held_s(),
            )
            return
        heard = None if self._heard is None else self._heard()
        if self._held_since is not None:
            self._settle(now, heard)
        elif gap >= self._session_s:
            why = (
                "the event loop stood still for longer than job.coordinator.session.timeout.ms "
                "(the group may have evicted this container)"
            )
            if heard is None:  # nothing would settle a hold
                self._lose(why, stood_still_s=round(gap, 1))
            else:
                self._hold(now, heard, why, stood_still_s=round(gap, 1))
        elif (since := self._unheard(now, heard)) is not None and since >= self._session_s:
            self._hold(
                now,
                heard,
                "the group acknowledged no heartbeat of this member for longer than "
                "job.coordinator.session.timeout.ms (cut off from the group's coordinator, "
                "a coordinator down or moving, or a join that outlasted the session)",
                unheard_s=round(since, 1),
            )

    def _unheard(self, now: float, heard: float | None) -> float | None:
        """How long since the group last heard the member (None: no assignment yet, or the
        membership cannot say)."""
        renewed = self._renewed
        if renewed is None or heard is None:
            return None
        return now - max(heard, renewed)

    def _settle(self, now: float, heard: float | None) -> None:
        """Resume a hold once a heartbeat newer than the hold's last is acknowledged (under
        the member id of the last assignment: ``_check``), recently enough."""
        if heard is None or (self._heard_then is not None and heard <= self._heard_then):
            return
        since = self._unheard(now, heard)
        if since is not None and since < self._session_s:
            self._resume()

    def _hold(self, now: float, heard: float | None, why: str, **figures: float) -> None:
        if self._giving_up is not None:
            self._lose(f"{why}, while {self._giving_up}", **figures)
            return
        self._held_since, self._heard_then = now, heard
        log.warning("lease_held", **figures, cause=why, reason=HELD_REASON)

    def _resume(self) -> None:
        log.info(
            "lease_resumed",
            held_s=self._held_s(),
            reason="the group still counts this container a member under the same id: "
            "no one else ran its tasks, which go on",
        )
        self._resolve()

    def _held_s(self) -> float | None:
        since = self._held_since
        return None if since is None else round(self._now() - since, 1)

    def _resolve(self) -> None:
        self._held_since = self._heard_then = None
        settled, self._settled = self._settled, None
        if settled is not None and not settled.done():
            settled.set_result(None)

    def _lose(self, why: str, **figures: float | None) -> None:
        self._broken = True
        self._resolve()
        log.warning(
            "lease_lost",
            **figures,
            reason=f"{why}: its tasks may run elsewhere; they stop here without committing, and "
            "the tasks of the group's next assignment start from their checkpoints",
        )
        self._on_lost(why)


__all__ = ["Lease"]
