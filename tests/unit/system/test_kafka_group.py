"""The group assignor's wire side: what a member reports, what the leader hands out (KIP-429's
two phases), and when a released task's stop time reaches its next owner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiokafka.structs import TopicPartition

from samzapy.system.kafka.group import KafkaGroupMembership, _assignor, _Listener
from samzapy.system.kafka.settings import KafkaSettings

SETTINGS = KafkaSettings("kafka", ("x:1",), ("x:1",), ("x:1",))


class Cluster:
    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(4))


class Member:
    """A membership whose runner owns ``owned`` and records what it is assigned."""

    def __init__(self, owned: list[int]) -> None:
        self.owned = owned
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
        )
        self.assignor: Any = _assignor(self.membership)

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
