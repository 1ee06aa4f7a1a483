"""The group assignor's wire side: what a member reports, what the leader hands out (KIP-429's
two phases), and when a released task's stop time reaches its next owner."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from aiokafka.structs import TopicPartition
from structlog.testing import capture_logs

from samzapy.coordinator.placement import GroupStandbys
from samzapy.system.kafka.group import (
    HEARTBEAT_MAX_MS,
    KafkaGroupMembership,
    MemberFencedError,
    _assignor,
    _Listener,
    heartbeat_interval_ms,
)
from samzapy.system.kafka.group_members import GroupMembers
from samzapy.system.kafka.group_triggers import (
    GROUP_REBALANCING,
    MEMBER_UNKNOWN,
    PARTITIONS_CHANGED,
    REJOIN_ASKED,
)
from samzapy.system.kafka.settings import KafkaSettings

SETTINGS = KafkaSettings("kafka", ("x:1",), ("x:1",), ("x:1",))


class Cluster:
    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(4))


class Member:
    """A membership whose runner owns ``owned`` and records what it is assigned."""

    def __init__(
        self,
        owned: list[int],
        instance_id: str | None = None,
        job: tuple[str, str] | None = None,
        standbys: Any = None,
    ) -> None:
        self.owned = owned
        self.fenced = 0
        self.assigned: list[tuple[list[int], Mapping[int, float]]] = []
        self.rebalances = 0

        async def on_rebalance() -> None:
            self.rebalances += 1

        async def on_assigned(tasks: list[int], released: Mapping[int, float]) -> None:
            self.assigned.append((tasks, dict(released)))

        self.membership = KafkaGroupMembership(
            SETTINGS,
            group_id="g",
            topics=["in"],
            session_timeout_ms=10000,
            owned=lambda: self.owned,
            on_rebalance=on_rebalance,
            on_assigned=on_assigned,
            instance_id=instance_id,
            on_fenced=self._on_fenced,
            job=job,
            standbys=standbys,
        )
        self.assignor: Any = _assignor(self.membership)

    def _on_fenced(self) -> None:
        self.fenced += 1

    def metadata(self) -> Any:
        return self.assignor.metadata(["in"])

    async def receive(self, assignment: Any) -> None:
        """What aiokafka does once the join completes: the assignor, then the listener."""
        self.assignor.on_assignment(assignment)
        partitions = {TopicPartition(t, p) for t, ps in assignment.assignment for p in ps}
        await _Listener(self.membership).on_partitions_assigned(partitions)


async def test_a_moving_task_is_released_first_and_its_stop_time_reaches_its_next_owner() -> None:
    a, b = Member([0, 1, 2, 3]), Member([])
    # Phase 1: b joined. The plan gives it two of a's tasks; a still runs them: no one gets them.
    plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
    await a.receive(plan["a"])
    await b.receive(plan["b"])
    assert a.assigned[-1] == ([0, 1], {}) and b.assigned[-1] == ([], {})
    # a releases 2 and 3, notes when, and rejoins: phase 2 gives them to b, with that time.
    a.owned = [0, 1]
    a.membership.released([2, 3], 1234.5)
    plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
    await a.receive(plan["a"])
    await b.receive(plan["b"])
    assert a.assigned[-1] == ([0, 1], {})
    assert b.assigned[-1] == ([2, 3], {2: 1234.5, 3: 1234.5})
    # Once a rebalance has carried them, a reports them no more.
    b.owned = [2, 3]
    plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
    await b.receive(plan["b"])
    assert b.assigned[-1] == ([2, 3], {})


async def test_a_rebalance_is_announced_to_the_runner_before_the_member_rejoins() -> None:
    member = Member([1])
    await _Listener(member.membership).on_partitions_revoked({TopicPartition("in", 1)})
    assert member.rebalances == 1
    assert member.assigned == []  # nothing is given up: the runner decides at the assignment


async def test_metadata_a_member_cannot_read_counts_as_owning_nothing() -> None:
    a = Member([0, 1])
    broken = a.metadata()
    broken.user_data = b"not json"
    plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "z": broken})
    tasks = {m: [p for _, ps in x.assignment for p in ps] for m, x in plan.items()}
    assert tasks == {"a": [0, 1], "z": [2, 3]}


async def test_a_leader_of_the_job_that_came_second_gives_the_group_to_the_first() -> None:
    # Jobs a.b/1 and a/b.1 share the group samzapy.a.b.1; the first ran alone, then the
    # second's member joined and happened to lead the rebalance.
    first, second = Member([0, 1, 2, 3], job=("a.b", "1")), Member([], job=("a", "b.1"))
    second.membership._created_at = first.membership._created_at + 60
    plan = second.assignor.assign(Cluster(), {"f": first.metadata(), "s": second.metadata()})
    await first.receive(plan["f"])
    await second.receive(plan["s"])
    assert first.assigned[-1] == ([0, 1, 2, 3], {})  # the running job keeps every task
    assert second.assigned[-1] == ([], {})
    assert second.membership.failure() is not None
    assert "(job.name 'a.b' job.id '1')" in str(second.membership.failure())
    assert first.membership.failure() is None


class Coordinator:
    """The two attributes of aiokafka's group coordinator the membership reads."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id


class Consumer:
    def __init__(self, member_id: str) -> None:
        self._coordinator = Coordinator(member_id)

    def pause(self, *partitions: Any) -> None:
        pass


async def test_a_restarted_static_member_ignores_the_release_times_of_its_previous_run() -> None:
    member = Member([], instance_id="pod-1")
    member.membership._consumer = Consumer("pod-1-abc")
    old, new = time.time() - 60, time.time() + 1
    member.assignor.on_assignment(_assignment([0, 1], {0: old, 1: new}))
    await _Listener(member.membership).on_partitions_assigned(_partitions([0, 1]))
    assert member.assigned[-1] == ([0, 1], {1: new})
    assert member.membership.member_id == "pod-1-abc"


async def test_a_static_member_the_group_forgot_is_fenced_and_never_rejoins() -> None:
    member = Member([0], instance_id="pod-1")
    member.membership._consumer = Consumer("pod-1-abc")
    listener = _Listener(member.membership)
    await listener.on_partitions_assigned(_partitions([0]))
    # An ordinary rebalance: the member id stands, the runner hears of it.
    await listener.on_partitions_revoked(set())
    assert (member.rebalances, member.fenced) == (1, 0)
    assert member.membership.failure() is None
    # The broker answered UNKNOWN_MEMBER_ID (another process joined with "pod-1"): aiokafka
    # reset the id and is about to rejoin. The listener stops it there.
    member.membership._consumer._coordinator.member_id = ""
    waiting = asyncio.ensure_future(listener.on_partitions_revoked(set()))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    assert member.fenced == 1 and member.rebalances == 1
    assert isinstance(member.membership.failure(), MemberFencedError)
    assert "job.container.id='pod-1'" in str(member.membership.failure())
    waiting.cancel()


async def test_a_dynamic_member_whose_id_was_reset_rejoins_as_before() -> None:
    member = Member([0])
    member.membership._consumer = Consumer("m-1")
    listener = _Listener(member.membership)
    await listener.on_partitions_assigned(_partitions([0]))
    member.membership._consumer._coordinator.member_id = ""
    await listener.on_partitions_revoked(set())
    assert (member.rebalances, member.fenced) == (1, 0)


@pytest.mark.parametrize(
    ("session_ms", "heartbeat_ms"), [(1000, 200), (6000, HEARTBEAT_MAX_MS), (45000, 250)]
)
def test_heartbeats_reach_a_rebalance_within_a_quarter_second(
    session_ms: int, heartbeat_ms: int
) -> None:
    assert heartbeat_interval_ms(session_ms) == heartbeat_ms


def _partitions(tasks: list[int]) -> set[TopicPartition]:
    return {TopicPartition("in", t) for t in tasks}


def _assignment(tasks: list[int], released: Mapping[int, float]) -> Any:
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    data = json.dumps({"released": {str(t): at for t, at in released.items()}}).encode()
    return ConsumerProtocolMemberAssignment(0, [("in", tasks)], data)


class Beating:
    """aiokafka's coordinator as the heartbeat watch sees it: its heartbeat call, which says
    whether the broker took the heartbeat, and whether a rejoin is due (a rebalance)."""

    def __init__(self) -> None:
        self.answers: list[bool] = []
        self._rejoin_needed_fut = asyncio.get_running_loop().create_future()

    async def _do_heartbeat(self) -> bool:
        return self.answers.pop(0)


async def test_heard_is_the_send_time_of_the_last_acknowledged_heartbeat() -> None:
    member = Member([0])
    coordinator = Beating()
    consumer = type("C", (), {"_coordinator": coordinator})()
    member.membership._watch_heartbeats(consumer)
    watched = member.membership.heard_at
    assert watched is not None, "watched from the start: none acknowledged yet"
    coordinator.answers = [True, False]
    before = time.monotonic()
    assert await coordinator._do_heartbeat() is True
    heard = member.membership.heard_at
    assert heard is not None and before <= heard <= time.monotonic()
    assert await coordinator._do_heartbeat() is False  # refused: heard stays
    assert member.membership.heard_at == heard


async def test_heartbeats_taken_during_a_rebalance_count_until_the_rebalance_timeout() -> None:
    """The broker removes a member that has not rejoined by the rebalance timeout (60 s at
    least), counted from the rebalance's start, after the last plain heartbeat: for the
    lease, such heartbeats are heard no later than a session before that."""
    member = Member([0])
    coordinator = Beating()
    member.membership._watch_heartbeats(type("C", (), {"_coordinator": coordinator})())
    coordinator.answers = [True, True, True, True]
    await coordinator._do_heartbeat()
    plain = member.membership.heard_at
    assert plain is not None
    coordinator._rejoin_needed_fut.set_result(None)  # RebalanceInProgress: a rejoin is due
    await coordinator._do_heartbeat()
    member.membership._heard_at = plain + 55.0  # still heartbeating, 55 s later
    assert member.membership.heard_at == plain + 60.0 - 10.0
    coordinator._rejoin_needed_fut = asyncio.get_running_loop().create_future()  # rejoined
    await coordinator._do_heartbeat()
    assert member.membership._rebalance_since is None
    assert member.membership.heard_at == member.membership._heard_at


class Rejoining:
    """aiokafka's coordinator as the rebalance triggers see it: a rejoin comes due (until the
    member syncs) from a heartbeat's answer, a metadata change or the member's request."""

    def __init__(self) -> None:
        self.answers: list[tuple[bool, bool]] = []  # (acknowledged, a rejoin due)
        self.synced()

    def synced(self) -> None:
        self._rejoin_needed_fut = asyncio.get_running_loop().create_future()

    def request_rejoin(self) -> None:
        if not self._rejoin_needed_fut.done():
            self._rejoin_needed_fut.set_result(None)

    def _on_metadata_change(self) -> None:
        self.request_rejoin()

    async def _do_heartbeat(self) -> bool:
        acknowledged, rejoin = self.answers.pop(0)
        if rejoin:  # REBALANCE_IN_PROGRESS (taken), or an unknown member (not taken)
            self.request_rejoin()
        return acknowledged


async def _rebalancing(membership: KafkaGroupMembership, coordinator: Rejoining) -> None:
    coordinator.answers = [(True, False), (True, True)]
    assert await coordinator._do_heartbeat() and await coordinator._do_heartbeat()


async def _forgotten(membership: KafkaGroupMembership, coordinator: Rejoining) -> None:
    coordinator.answers = [(False, True)]
    assert not await coordinator._do_heartbeat()


async def _repartitioned(membership: KafkaGroupMembership, coordinator: Rejoining) -> None:
    coordinator._on_metadata_change()


async def _released(membership: KafkaGroupMembership, coordinator: Rejoining) -> None:
    membership.rejoin("this member released tasks")


async def _asked(membership: KafkaGroupMembership, coordinator: Rejoining) -> None:
    membership.rejoin()


@pytest.mark.parametrize(
    ("cause", "reason"),
    [
        (_rebalancing, GROUP_REBALANCING),
        (_forgotten, MEMBER_UNKNOWN),
        (_repartitioned, PARTITIONS_CHANGED),
        (_released, "this member released tasks"),
        (_asked, REJOIN_ASKED),
    ],
    ids=["rebalancing", "forgotten", "repartitioned", "released", "asked"],
)
async def test_the_rebalance_reason_is_what_made_the_member_rejoin(
    cause: Callable[[KafkaGroupMembership, Rejoining], Awaitable[None]], reason: str
) -> None:
    member = Member([0])
    coordinator = Rejoining()
    membership = member.membership
    membership._consumer = type("C", (), {"_coordinator": coordinator})()
    membership._watch_heartbeats(membership._consumer)
    membership._triggers.watch(membership._consumer)  # as start() does
    listener = _Listener(membership)
    await cause(membership, coordinator)
    membership.rejoin("this member released tasks")  # already due: no rebalance of its own
    await listener.on_partitions_revoked(set())
    assert (membership.rebalance_reason, member.rebalances) == (reason, 1)
    # Synced: a rejoin the member did not see the cause of (a restarted rebalance).
    coordinator.synced()
    coordinator.request_rejoin()
    await listener.on_partitions_revoked(set())
    assert membership.rebalance_reason is None  # logged as unknown (rebalance_log)


async def test_the_leader_logs_the_members_that_joined_and_left_since_its_last_assignment() -> None:
    a, b = Member([0, 1, 2, 3], instance_id="c-0"), Member([], instance_id="c-1")
    c = Member([])  # a dynamic member: its metadata names its host only
    a.membership._consumer = Consumer("a")
    a.membership._consumer._coordinator.generation = 7
    with capture_logs() as logs:
        a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
        a.membership._consumer._coordinator.generation = 8
        a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})  # no change
        a.membership._consumer._coordinator.generation = 9
        a.assignor.assign(Cluster(), {"a": a.metadata(), "c": c.metadata()})
    events = [e for e in logs if e["event"] == "group_members_changed"]
    host = socket.gethostname()
    first, second = events  # the unchanged generation 8 logs nothing
    # Its first assignment as leader: no previous one, every member joined.
    assert first["generation"] == 7 and first["previous_generation"] is None
    both = [
        {"member": "a", "host": host, "container": "c-0"},
        {"member": "b", "host": host, "container": "c-1"},
    ]
    assert first["joined"] == first["members"] == both and first["left"] == []
    assert second["generation"] == 9 and second["previous_generation"] == 8
    assert second["joined"] == [{"member": "c", "host": host}]
    assert second["left"] == [{"member": "b", "host": host, "container": "c-1"}]
    assert [m["member"] for m in second["members"]] == ["a", "c"]


def test_a_member_of_an_older_samzapy_is_named_by_its_id_only() -> None:
    members = GroupMembers(None)
    assert members.assigned("g", {"m": {"tasks": [1], "host": 5}}) == ([{"member": "m"}], [])
    assert members.assigned("g", {"m": {}}) is None


def test_the_leader_warns_when_members_with_standbys_share_a_store_directory() -> None:
    def member(container: str, directory: str) -> Member:
        return Member([], instance_id=container, standbys=GroupStandbys(1, dict, directory))

    a, b, c = member("c-0", "volume-1"), member("c-1", "volume-1"), member("c-2", "volume-2")
    with capture_logs() as logs:
        a.assignor.assign(Cluster(), {"a": a.metadata(), "c": c.metadata()})  # apart: no warning
        a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata(), "c": c.metadata()})
        a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata(), "c": c.metadata()})
    warnings = [e for e in logs if e["event"] == "standbys_on_shared_state_directory"]
    assert len(warnings) == 1  # once, as b joined a's directory; not again while it stays
    host = socket.gethostname()
    assert warnings[0]["shared"] == [
        [
            {"member": "a", "host": host, "container": "c-0", "directory": "volume-1"},
            {"member": "b", "host": host, "container": "c-1", "directory": "volume-1"},
        ]
    ]
    assert "replication.factor to 1" in warnings[0]["remedy"]


async def test_each_member_logs_where_its_moving_tasks_come_from_and_go_to() -> None:
    a, b = Member([0, 1, 2, 3], instance_id="c-0"), Member([], instance_id="c-1")
    host = socket.gethostname()
    c0 = {"member": "a", "host": host, "container": "c-0"}
    c1 = {"member": "b", "host": host, "container": "c-1"}

    def moved(logs: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
        return [
            (e["tasks_added_from"], e["tasks_removed_to"])
            for e in logs
            if e["event"] == "task_owners_changed"
        ]

    with capture_logs() as logs:
        plan = a.assignor.assign(Cluster(), {"a": a.metadata()})
        await a.receive(plan["a"])  # a takes every task: from no one the leader knew
    assert moved(logs) == []
    # Phase 1: b joined; a loses 2 and 3 to it.
    with capture_logs() as logs:
        plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
        await a.receive(plan["a"])
        await b.receive(plan["b"])
    assert moved(logs) == [([], [{**c1, "tasks": ["Partition 2", "Partition 3"]}])]
    # Phase 2: a released them; b gains them from a.
    a.owned = [0, 1]
    a.membership.released([2, 3], 1234.5)
    with capture_logs() as logs:
        plan = a.assignor.assign(Cluster(), {"a": a.metadata(), "b": b.metadata()})
        await a.receive(plan["a"])
        await b.receive(plan["b"])
    assert moved(logs) == [([{**c0, "tasks": ["Partition 2", "Partition 3"]}], [])]
    # b dies: its tasks come back to a from b, which the leader last gave them to.
    b.owned = [2, 3]
    with capture_logs() as logs:
        plan = a.assignor.assign(Cluster(), {"a": a.metadata()})
        await a.receive(plan["a"])
    assert moved(logs) == [([{**c1, "tasks": ["Partition 2", "Partition 3"]}], [])]
