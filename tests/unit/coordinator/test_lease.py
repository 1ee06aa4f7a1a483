"""The group lease: a container whose loop stood still past the session timeout stops."""

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
    lease = Lease(6000, lambda: lost.append(now.value), now=now)
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
    lease = Lease(6000, lambda: None, now=now)
    now.value += 5.9
    assert lease.valid()


def test_a_revoked_lease_stays_broken_whatever_the_group_hands_out_later() -> None:
    now = Now()
    lease = Lease(6000, lambda: None, now=now)
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
    lease = Lease(6000, lambda: None, margin_s=0.5, now=now)
    now.value += 5.4
    assert lease.valid()
    now.value += 5.6
    assert not lease.valid()
