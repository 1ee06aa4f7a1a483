"""A kafka-group container's rebalance_completed says why the rebalance happened: the reason
of the rebalance_started it completes, next to the tasks it kept, gained and lost."""

from __future__ import annotations

import asyncio
from typing import Any

from coordinator_fakes import Members, Share
from structlog.testing import capture_logs

from samzapy.config import load_config, resolve
from samzapy.coordinator.job_runner import JobRunner
from samzapy.coordinator.shares import Shares

CONFIG = "job.name: j\ntask.class: x:Y\ntask.inputs: [m.a]\nsystems.m.samza.factory: memory\n"
JOINED = "a member joined"


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_rebalance_completed_carries_the_reason_of_the_rebalance_it_completes() -> None:
    runner = JobRunner(resolve(load_config(text=CONFIG, env={})))
    runner._shares = Shares(lambda tasks: Share(runner.health))  # type: ignore[arg-type]
    members = runner._membership = Members()
    with capture_logs() as logs:
        await runner._on_rebalance()  # the first join
        await runner._take(members, [0, 1], {})
        # Another member joined: task 1 leaves; a restart of the rebalance before the
        # assignment came is logged, but the handover is the first one's.
        members.rebalance_reason = JOINED
        await runner._on_rebalance()
        members.rebalance_reason = None
        await runner._on_rebalance()
        await runner._take(members, [0], {})
        # This member released task 1 and rejoined for it: the next rebalance says so.
        members.rebalance_reason = members.rejoins[-1]
        await runner._on_rebalance()
        await runner._take(members, [0, 2], {})
    await runner._shares.stop("test")
    (first,) = _events(logs, "tasks_assigned")
    assert first["reason"] == "this container joined the group"
    assert first["tasks_added"] == ["Partition 0", "Partition 1"]
    assert [e["reason"] for e in _events(logs, "rebalance_started")] == [
        JOINED,
        "unknown",
        "this member released tasks",
    ]
    joined, released = _events(logs, "rebalance_completed")
    assert (joined["reason"], joined["tasks_removed"], joined["tasks_added"]) == (
        JOINED,
        ["Partition 1"],
        [],
    )
    assert joined["tasks_kept"] == ["Partition 0"]
    assert released["reason"] == "this member released tasks"
    assert (released["tasks_added"], released["tasks_removed"]) == (["Partition 2"], [])


class RejoiningMembers(Members):
    """A membership whose rejoin begins the next rebalance at once, as aiokafka's coordinator
    does: its callback can run while the job runner still takes the assignment before."""

    def __init__(self, runner: JobRunner) -> None:
        super().__init__()
        self._runner = runner
        self.rejoining: list[asyncio.Task[None]] = []

    def rejoin(self, reason: str = "") -> None:
        super().rejoin(reason)
        self.rebalance_reason = reason
        self.rejoining.append(asyncio.ensure_future(self._runner._on_rebalance()))


async def test_a_rebalance_begun_while_an_assignment_is_taken_is_completed_as_one() -> None:
    runner = JobRunner(resolve(load_config(text=CONFIG, env={})))
    runner._shares = Shares(lambda tasks: Share(runner.health))  # type: ignore[arg-type]
    members = runner._membership = RejoiningMembers(runner)
    with capture_logs() as logs:
        await runner._on_rebalance()  # the first join
        await runner._take(members, [0, 1], {})
        members.rebalance_reason = JOINED
        await runner._on_rebalance()
        # Task 1 leaves and task 2 comes: the release's rejoin starts the next rebalance
        # while task 2's share starts, before this assignment's rebalance_completed.
        await runner._take(members, [0, 2], {})
        await asyncio.gather(*members.rejoining)
        await runner._take(members, [0, 2], {})  # the assignment the rejoin brought
    await runner._shares.stop("test")
    assert [e["reason"] for e in _events(logs, "rebalance_started")] == [
        JOINED,
        "this member released tasks",
    ]
    assert len(_events(logs, "tasks_assigned")) == 1  # the first join's only
    joined, released = _events(logs, "rebalance_completed")
    assert (joined["reason"], joined["tasks_removed"]) == (JOINED, ["Partition 1"])
    assert (released["reason"], released["tasks_kept"]) == (
        "this member released tasks",
        ["Partition 0", "Partition 2"],
    )
