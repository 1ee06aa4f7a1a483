"""The group lease: a container whose loop stood still past the session timeout, or whose
heartbeats the group stopped acknowledging, stops."""

from __future__ import annotations

from structlog.testing import capture_logs

from samzapy.coordinator.lease import Lease


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


def test_a_member_whose_heartbeats_go_unacknowledged_loses_the_lease_while_its_loop_runs() -> None:
    now, heard, lost = Now(), Heartbeats(), []
    lease = Lease(6000, lost.append, margin_s=0.5, heard=heard, now=now)
    lease.renew()  # the group handed tasks out
    for _ in range(40):  # a healthy member: acknowledged heartbeats every 0.25 s
        heard.at = now.value
        now.value += 0.25
        assert lease.valid()
    cut_off_at = heard.at
    assert cut_off_at is not None
    with capture_logs() as logs:
        while lease.valid():  # the loop ticks, the coordinator hears nothing
            now.value += 0.25
    assert now.value - cut_off_at == 5.5, "the session less the margin after the last send"
    assert [e["event"] for e in logs] == ["lease_lost"] and logs[0]["unheard_s"] == 5.5
    assert len(lost) == 1 and "acknowledged no heartbeat" in lost[0]
    heard.at = now.value  # reconnected, but the group may have moved on: broken until
    now.value += 0.25  # it hands tasks out again
    assert not lease.valid()
    lease.renew()
    assert lease.valid()


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
    assert not lease.valid() and len(lost) == 1


def test_a_heartbeat_sent_before_the_last_assignment_does_not_shorten_it() -> None:
    now, heard = Now(), Heartbeats()
    heard.at = now.value
    lease = Lease(6000, lambda reason: None, heard=heard, now=now)
    now.value += 5.0  # a rebalance: no heartbeat during the join
    lease.renew()
    now.value += 0.25
    assert lease.valid()


def test_a_membership_that_cannot_tell_its_heartbeats_leaves_the_loop_to_judge() -> None:
    now, lost = Now(), []
    lease = Lease(6000, lost.append, heard=lambda: None, now=now)
    lease.renew()
    for _ in range(400):  # 100 s of a ticking loop
        now.value += 0.25
        assert lease.valid()
    assert lost == []
