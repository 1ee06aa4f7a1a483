"""The group lease: a container whose loop stood still past the session timeout, or whose
heartbeats the group stopped acknowledging, holds its writes until the group answers."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from samzapy.coordinator.lease import Lease
from samzapy.system.fencing import ContainerLease


class Now:
    def __init__(self) -> None:
        self.value = 100.0

    def __call__(self) -> float:
        return self.value


def test_the_lease_holds_while_the_loop_ticks_and_breaks_after_a_long_stand_still() -> None:
    now, lost = Now(), []
    lease = Lease(6000, lambda reason: lost.append(now.value), now=now)
    for _ in range(20):  # ticks every 0.6 s: two minutes of a healthy loop
        now.value += 0.6
        assert lease.valid()
    now.value += 7.0  # frozen for longer than the session
    with capture_logs() as logs:
        assert not lease.valid()
    assert lost == [now.value]
    assert [e["event"] for e in logs] == ["lease_lost"] and logs[0]["stood_still_s"] == 7.0
    now.value += 0.1
    assert not lease.valid(), "broken until the group hands tasks out again"
    assert len(lost) == 1, "lost once"
    lease.renew()
    assert lease.valid()


def test_a_stand_still_shorter_than_the_session_is_fine() -> None:
    now = Now()
    lease = Lease(6000, lambda reason: None, now=now)
    now.value += 5.9
    assert lease.valid()


def test_a_revoked_lease_stays_broken_whatever_the_group_hands_out_later() -> None:
    now = Now()
    lease = Lease(6000, lambda reason: None, now=now)
    lease.revoke()  # the group fenced this member
    assert not lease.valid()
    lease.renew()
    now.value += 0.1
    assert not lease.valid()


def test_the_margin_breaks_the_lease_before_the_broker_may_have_evicted_the_member() -> None:
    """The broker counts the session from the last heartbeat it received, up to a heartbeat
    interval before the loop's last tick: a stand-still within the margin of the session
    breaks the lease."""
    now = Now()
    lease = Lease(6000, lambda reason: None, margin_s=0.5, now=now)
    now.value += 5.4
    assert lease.valid()
    now.value += 5.6
    assert not lease.valid()


class Heartbeats:
    """When the last acknowledged heartbeat was sent, as the membership reports it."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self) -> float | None:
        return self.at


class Member:
    """The member id the group knows the container by."""

    def __init__(self) -> None:
        self.id: str | None = "member-1"

    def __call__(self) -> str | None:
        return self.id


def cut_off(now: Now, heard: Heartbeats, lease: Lease) -> float:
    """A healthy member (acknowledged heartbeats every 0.25 s), then cut off from its
    coordinator until the lease is held; the last acknowledged send."""
    for _ in range(40):
        heard.at = now.value
        now.value += 0.25
        assert lease.valid()
    cut_off_at = now.value - 0.25
    while lease.valid():  # the loop ticks, the coordinator hears nothing
        now.value += 0.25
    return cut_off_at


def test_a_member_whose_heartbeats_go_unacknowledged_holds_its_lease_until_one_is() -> None:
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, margin_s=0.5, heard=heard, member=Member(), now=now)
    lease.renew()  # the group handed tasks out
    with capture_logs() as logs:
        cut_off_at = cut_off(now, heard, lease)
    assert now.value - cut_off_at == 5.5, "the session less the margin after the last send"
    assert [e["event"] for e in logs] == ["lease_held"] and logs[0]["unheard_s"] == 5.5
    assert "acknowledged no heartbeat" in logs[0]["cause"]
    for _ in range(100):  # held as long as the group does not answer: nothing is lost yet
        now.value += 0.25
        assert not lease.valid()
        lease._check(now.value)
    assert lost == []
    heard.at = now.value  # the coordinator is back and acknowledges a heartbeat
    now.value += 0.25
    with capture_logs() as logs:
        assert lease.valid()
    assert [e["event"] for e in logs] == ["lease_resumed"] and logs[0]["held_s"] == 25.2
    assert lost == []


def test_a_member_id_the_group_dropped_breaks_a_hold_at_once() -> None:
    """The group answered that it does not know the member (or that a generation passed
    without it): aiokafka drops the id and rejoins under a new one. The hold breaks then (the
    tasks stop without committing), not at the next assignment, which a release waiting on
    the hold would keep from coming; the new assignment counts for the new tasks."""
    now, heard, member, lost = Now(), Heartbeats(), Member(), []
    lease = Lease(6000, lost.append, margin_s=0.5, heard=heard, member=member, now=now)
    lease.renew()
    cut_off(now, heard, lease)
    member.id = None  # reset after UnknownMemberId
    now.value += 0.25
    with capture_logs() as logs:
        assert not lease.valid()
    assert [e["event"] for e in logs] == ["lease_lost"] and logs[0]["held_s"] == 0.2
    assert len(lost) == 1 and "no longer knows this container" in lost[0]
    member.id = "member-2"
    heard.at = now.value
    lease.renew()
    now.value += 0.25
    assert lease.valid() and len(lost) == 1, "valid for the new assignment"


def test_a_new_member_id_at_an_assignment_breaks_the_lease_before_renewing_it() -> None:
    now, heard, member, lost = Now(), Heartbeats(), Member(), []
    lease = Lease(6000, lost.append, margin_s=0.5, heard=heard, member=member, now=now)
    lease.renew()
    cut_off(now, heard, lease)
    member.id = "member-2"  # no tick saw the reset: the assignment tells
    with capture_logs() as logs:
        lease.renew()
    assert [e["event"] for e in logs] == ["lease_lost"]
    assert len(lost) == 1 and "new member id" in lost[0]
    now.value += 0.25
    assert lease.valid(), "valid for the new assignment"


def test_an_assignment_under_the_same_member_id_resumes_a_hold() -> None:
    """A join that outlasted the session: the member stayed one, its tasks go on."""
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    now.value += 6.0  # joining: no heartbeat
    assert not lease.valid()
    with capture_logs() as logs:
        lease.renew()
    assert [e["event"] for e in logs] == ["lease_resumed"] and lost == []
    assert lease.valid()


def test_a_new_member_id_breaks_even_a_lease_that_was_not_held() -> None:
    now, member, lost = Now(), Member(), []
    lease = Lease(6000, lost.append, heard=lambda: now.value, member=member, now=now)
    lease.renew()
    member.id = "member-2"
    lease.renew()
    assert len(lost) == 1 and lease.valid()


def test_a_stand_still_holds_the_lease_until_a_heartbeat_sent_after_it_is_acknowledged() -> None:
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, margin_s=0.5, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    now.value += 0.25
    assert lease.valid()
    sent = now.value
    now.value += 8.0  # the loop stood still; the heartbeat sent just before it is answered
    with capture_logs() as logs:
        assert not lease.valid()
    assert [e["event"] for e in logs] == ["lease_held"] and logs[0]["stood_still_s"] == 8.0
    heard.at = sent
    now.value += 0.1
    assert not lease.valid(), "sent before the stand-still: the group may have evicted it since"
    heard.at = now.value
    now.value += 0.1
    assert lease.valid() and lost == []


def writers(lease: Lease) -> ContainerLease:
    """The lease as a container's writers see it (one that did not give its tasks up)."""
    return ContainerLease(lease, lambda: False)


async def test_held_writers_wait_and_learn_how_the_hold_ended() -> None:
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, heard=heard, member=Member(), now=now)
    lease.renew()
    assert lease.held() is None
    heard.at = now.value
    now.value += 6.0
    assert not lease.valid()
    held = lease.held()
    assert held is not None and lease.held() is held
    waiting = asyncio.ensure_future(writers(lease).settle())
    await asyncio.sleep(0)
    assert not waiting.done()
    heard.at = now.value
    now.value += 0.1
    assert lease.valid() and held.done() and await waiting is True
    # Held again; then the group fences the member: the writers learn it broke.
    now.value += 6.0
    assert not lease.valid()
    waiting = asyncio.ensure_future(writers(lease).settle())
    await asyncio.sleep(0)
    lease.revoke()
    assert await waiting is False


def test_a_stop_breaks_a_hold_then_or_later() -> None:
    """Once the container is leaving the group, nothing may be committed under a hold and
    no answer may be waited for: a hold breaks at once, then or whenever one begins."""
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    now.value += 6.0
    assert not lease.valid()
    lease.give_up("stopping")
    assert lost == ["stopping"] and not lease.valid()

    lease = Lease(6000, lost.append, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    lease.give_up("stopping")
    assert len(lost) == 1 and lease.valid(), "nothing held: nothing to give up yet"
    now.value += 6.0
    assert not lease.valid() and len(lost) == 2 and lost[1].endswith("while stopping")


def test_heartbeats_count_from_the_last_assignment_and_not_before_the_first() -> None:
    """Before the first assignment there is nothing to lose (a long first join breaks
    nothing); after one, a rebalance that sends no heartbeat for the session does."""
    now, heard, lost = Now(), Heartbeats(), []
    heard.at = now.value  # the membership watches from its start: none acknowledged yet
    lease = Lease(6000, lost.append, heard=heard, now=now)
    for _ in range(100):  # joining for 25 s, no heartbeat yet
        now.value += 0.25
        assert lease.valid()
    lease.renew()
    for _ in range(23):  # the first heartbeat is yet to come: the assignment counts
        now.value += 0.25
        assert lease.valid()
    heard.at = now.value
    for _ in range(23):
        now.value += 0.25
        assert lease.valid()
    now.value += 0.5
    assert not lease.valid() and lost == [], "held, not lost"


def test_a_heartbeat_sent_before_the_last_assignment_does_not_shorten_it() -> None:
    now, heard = Now(), Heartbeats()
    heard.at = now.value
    lease = Lease(6000, lambda reason: None, heard=heard, now=now)
    now.value += 5.0  # a rebalance: no heartbeat during the join
    lease.renew()
    now.value += 0.25
    assert lease.valid()


def test_a_stand_still_breaks_at_once_when_the_membership_cannot_tell_its_heartbeats() -> None:
    """No heartbeat would settle a hold: the lease breaks."""
    now, lost = Now(), []
    lease = Lease(6000, lost.append, heard=lambda: None, member=Member(), now=now)
    lease.renew()
    now.value += 7.0
    assert not lease.valid() and len(lost) == 1 and lease.held() is None


def test_a_membership_that_cannot_tell_its_heartbeats_leaves_the_loop_to_judge() -> None:
    now, lost = Now(), []
    lease = Lease(6000, lost.append, heard=lambda: None, now=now)
    lease.renew()
    for _ in range(400):  # 100 s of a ticking loop
        now.value += 0.25
        assert lease.valid()
    assert lost == []


async def test_leaving_the_group_gives_a_hold_up() -> None:
    """The ticker ends when the runner leaves the group (a failure included): no tick would
    settle a hold any more, so the writers waiting on it learn it broke."""
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    now.value += 6.0
    ticking = asyncio.ensure_future(lease.run())
    await asyncio.sleep(0)
    assert lease.held() is not None
    waiting = asyncio.ensure_future(writers(lease).settle())
    ticking.cancel()
    assert await waiting is False and len(lost) == 1 and "leaving the group" in lost[0]


async def test_a_container_lease_settles_without_ticks_and_ends_when_given_up() -> None:
    """A container's writers check the lease themselves while they wait, so a hold settles
    even once no ticker runs; a container that gave its tasks up stops waiting at once."""
    now, heard = Now(), Heartbeats()
    lease = Lease(6000, lambda reason: None, heard=heard, member=Member(), now=now)
    lease.renew()
    heard.at = now.value
    now.value += 6.0
    given_up = [False]
    seen = ContainerLease(lease, lambda: given_up[0])
    assert not seen.valid() and seen.held() is not None
    waiting = asyncio.ensure_future(seen.settle())
    await asyncio.sleep(0.15)
    heard.at = now.value  # acknowledged: the next check resumes it
    assert await asyncio.wait_for(waiting, 1) is True
    now.value += 6.0
    assert not seen.valid()
    waiting = asyncio.ensure_future(seen.settle())
    await asyncio.sleep(0.05)
    given_up[0] = True
    assert await asyncio.wait_for(waiting, 1) is False
    assert seen.held() is None, "a container that gave up is not held: it is stopping"
