"""Coordinators: which tasks a container runs (static split, the group assignor's plan)."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections import Counter
from typing import Any, ClassVar

import pytest
from coordinator_fakes import Members, Share

from samzapy import ConfigError, StreamTask
from samzapy.config import load_config, resolve
from samzapy.coordinator.identity import container_index, coordinator_of
from samzapy.coordinator.job_runner import JobRunner
from samzapy.coordinator.shares import Shares, plan_handover
from samzapy.system.assignment import assign_tasks, withhold_moving
from samzapy.system.inmemory import InMemoryBroker

BASE = "job.name: j\ntask.class: m:C\n"


def config(text: str) -> Any:
    return resolve(load_config(text=BASE + text, env={}))


def test_the_default_coordinator_follows_the_inputs() -> None:
    kafka = "task.inputs: [k.a]\nsystems.k.samza.factory: kafka\nsystems.k.bootstrap.servers: x:1\n"
    memory = "task.inputs: [m.a]\nsystems.m.samza.factory: memory\n"
    assert coordinator_of(config(kafka)) == "kafka-group"
    assert coordinator_of(config(memory)) == "static"
    assert coordinator_of(config(kafka + "job.coordinator.factory: static\n")) == "static"


@pytest.mark.parametrize(("raw", "index"), [("0", 0), ("2", 2), ("samzapy-pageviews-2", 2)])
def test_the_container_id_may_be_a_pod_name(raw: str, index: int) -> None:
    cfg = config(
        f"task.inputs: [m.a]\nsystems.m.samza.factory: memory\njob.container.count: 3\n"
        f"job.container.id: {raw}\n"
    )
    assert container_index(cfg) == index


@pytest.mark.parametrize("raw", ["3", "pod", "pod-7x"])
def test_a_container_id_outside_the_count_is_a_config_error(raw: str) -> None:
    cfg = config(
        f"task.inputs: [m.a]\nsystems.m.samza.factory: memory\njob.container.count: 3\n"
        f"job.container.id: '{raw}'\n"
    )
    with pytest.raises(
        ConfigError, match=r"job.container.id must be an integer from 0 to .* \(2\)"
    ):
        container_index(cfg)


# -- the group assignor's plan ---------------------------------------------------------------


def test_tasks_are_balanced_by_count() -> None:
    plan = assign_tasks(range(12), {"a": [], "b": [], "c": []})
    assert sorted(len(ts) for ts in plan.values()) == [4, 4, 4]
    assert sorted(t for ts in plan.values() for t in ts) == list(range(12))


def test_members_keep_their_tasks_when_one_joins() -> None:
    before = {"a": [0, 1, 2, 3, 4, 5], "b": [6, 7, 8, 9, 10, 11]}
    after = assign_tasks(range(12), {**before, "c": []})
    assert sorted(len(ts) for ts in after.values()) == [4, 4, 4]
    assert set(after["a"]) <= set(before["a"]) and set(after["b"]) <= set(before["b"])
    assert len(after["c"]) == 4  # only the four tasks the newcomer needs moved


def test_the_tasks_of_a_member_that_left_go_to_the_others_and_nothing_else_moves() -> None:
    before = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7], "c": [8, 9, 10, 11]}
    after = assign_tasks(range(12), {"a": before["a"], "c": before["c"]})
    assert set(before["a"]) <= set(after["a"]) and set(before["c"]) <= set(after["c"])
    assert sorted(after["a"] + after["c"]) == list(range(12))


def test_every_plan_covers_each_task_once_is_balanced_and_sticky() -> None:
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(0, 40)
        previous = {
            f"m{i}": rng.sample(range(50), rng.randint(0, 12)) for i in range(rng.randint(1, 7))
        }
        plan = assign_tasks(range(n), previous)
        assert sorted(t for ts in plan.values() for t in ts) == list(range(n))
        sizes = [len(ts) for ts in plan.values()]
        assert max(sizes) - min(sizes) <= 1
        assert plan == assign_tasks(range(n), previous)  # deterministic
        # Sticky: a member that held a valid task nobody else held keeps it unless its share
        # is already full of tasks it held.
        for member, held in previous.items():
            exclusive = {
                t
                for t in held
                if t < n and all(t not in other for m, other in previous.items() if m != member)
            }
            kept = exclusive & set(plan[member])
            assert kept == exclusive or len(plan[member]) == len(set(plan[member]) & set(held))


# -- incremental handover: KIP-429's two phases ------------------------------------------------


def test_a_task_another_member_still_owns_is_given_to_no_one() -> None:
    owned = {"a": [0, 1, 2, 3, 4, 5], "b": [6, 7, 8, 9, 10, 11], "c": []}
    plan = assign_tasks(range(12), owned)
    first = withhold_moving(plan, owned)
    # a and b keep four each; the four that go to c are withheld while a and b own them.
    assert first["c"] == [] and first["a"] == plan["a"] and first["b"] == plan["b"]


def test_a_task_two_members_report_goes_to_neither() -> None:
    assert withhold_moving({"a": [1, 2], "b": [3]}, {"a": [1], "b": [1, 3]}) == {
        "a": [2],
        "b": [3],
    }


def generations(owned: dict[str, list[int]], n: int) -> list[dict[str, list[int]]]:
    """Rebalances until nothing moves: each member runs what it was assigned (an owner
    releases what its assignment lost before the next one); every generation's plan."""
    plans = []
    for _ in range(10):
        plan = withhold_moving(assign_tasks(range(n), owned), owned)
        plans.append(plan)
        if plan == owned:
            return plans
        owned = plan
    raise AssertionError(f"no stable assignment after 10 rebalances: {plans}")


def test_a_join_settles_in_two_rebalances_and_kept_tasks_never_stop() -> None:
    before = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7], "c": [8, 9, 10, 11], "d": []}
    plans = generations(before, 12)
    assert len(plans) == 3  # withheld, given out, stable
    final = plans[-1]
    assert sorted(len(ts) for ts in final.values()) == [3, 3, 3, 3]
    for member in "abc":
        kept = set(before[member]) & set(final[member])
        assert all(kept <= set(plan[member]) for plan in plans)  # never stopped


def test_no_task_ever_has_two_owners() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 30)
        members = [f"m{i}" for i in range(rng.randint(1, 6))]
        owned: dict[str, list[int]] = {m: [] for m in members}
        for task in rng.sample(range(n), rng.randint(0, n)):
            owned[rng.choice(members)].append(task)
        owned[f"new{rng.randint(0, 9)}"] = []
        for plan in generations(owned, n):
            # A task runs where it ran until it is released, and starts elsewhere only once
            # no one reports it: at no generation do two members run it.
            holders = Counter(t for ts in plan.values() for t in ts)
            assert max(holders.values(), default=1) == 1
            for member, tasks in plan.items():
                for task in tasks:
                    others = [m for m, ts in owned.items() if m != member and task in ts]
                    assert not others, (task, member, others)
            owned = plan
        assert sorted(t for ts in owned.values() for t in ts) == list(range(n))


def test_the_handover_releases_from_each_share_and_stops_those_emptied() -> None:
    handover = plan_handover([{0, 1}, {2}, {3, 4}], [1, 3, 4, 5])
    assert handover.kept == {1, 3, 4}
    assert handover.added == {5}
    assert handover.removed == {0, 2}
    assert handover.release == {0: frozenset({0})}
    assert handover.stop == (1,)


# -- static: two containers split one job's tasks --------------------------------------------


class Seen(StreamTask):
    lock = threading.Lock()
    by_container: ClassVar[Counter[str]] = Counter()
    tasks: ClassVar[set[str]] = set()

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        with Seen.lock:
            Seen.by_container[envelope.message] += 1
            Seen.tasks.add(str(envelope.system_stream_partition.partition))


async def test_two_static_containers_split_the_tasks_and_together_process_everything() -> None:
    namespace = f"static-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 4)
    for p in range(4):
        for i in range(10):
            broker.append("in", p, None, f"{p}-{i}")
    broker.end_stream("in")
    Seen.by_container, Seen.tasks = Counter(), set()
    runners = []
    for index in range(2):
        cfg = resolve(
            load_config(
                text=(
                    f"job.name: split\njob.id: '{namespace}'\ntask.class: "
                    f"{__name__}:Seen\ntask.inputs: [mem.in]\nsystems.mem.samza.factory: memory\n"
                    f"systems.mem.namespace: {namespace}\njob.container.count: 2\n"
                    f"job.container.id: '{index}'\n"
                ),
                env={},
            )
        )
        runners.append(JobRunner(cfg))
    await asyncio.wait_for(asyncio.gather(*(r.run() for r in runners)), 20)
    assert Seen.by_container == Counter(f"{p}-{i}" for p in range(4) for i in range(10))
    assert Seen.tasks == {"0", "1", "2", "3"}
    ran = [sorted(str(t.name) for t in r._container.tasks) for r in runners]  # type: ignore[union-attr]
    assert ran == [["Partition 0", "Partition 2"], ["Partition 1", "Partition 3"]]


# -- kafka-group: readiness across a rebalance -------------------------------------------------


async def test_a_stop_asked_during_a_rebalance_leaves_the_container_not_ready() -> None:
    """/readyz answers 503 from a stop on (docs/deploy.md), also when it comes while the
    tasks an assignment took away are released: the end of the handover does not make the
    draining container ready again."""
    runner = JobRunner(config("task.inputs: [m.a]\nsystems.m.samza.factory: memory\n"))
    gate = asyncio.Event()
    runner._shares = Shares(lambda tasks: Share(runner.health, gate))  # type: ignore[arg-type]
    members = Members()
    await runner._take(members, [0, 1], {})
    assert runner.health.ready
    handover = asyncio.ensure_future(runner._take(members, [0], {}))  # task 1 leaves
    await asyncio.sleep(0.01)
    assert not handover.done()  # releasing task 1
    runner.request_stop("SIGTERM")
    assert not runner.health.ready
    gate.set()
    await asyncio.wait_for(handover, 5)
    assert not runner.health.ready
    await runner._shares.stop("test")


class Promotions:
    """Standbys whose promotion waits for ``gate`` (a paused old owner holding a store)."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate

    async def promote(self, tasks: set[int]) -> None:
        await self.gate.wait()

    async def assign(self, tasks: set[int], warmups: set[int]) -> None:
        pass


async def test_a_task_a_newer_assignment_takes_while_its_promotion_waits_is_not_started() -> None:
    """The member lists a task only while an assignment gives it: one that a newer
    assignment took away while its promotion waited may go to another member at the next
    rebalance, so it must not start here too (it is reported released instead)."""
    runner = JobRunner(config("task.inputs: [m.a]\nsystems.m.samza.factory: memory\n"))
    gate = asyncio.Event()
    started: list[set[int]] = []

    def share(tasks: frozenset[int]) -> Share:
        started.append(set(tasks))
        return Share(runner.health, gate)

    runner._shares = Shares(share)  # type: ignore[arg-type]
    runner._standbys = Promotions(gate)  # type: ignore[assignment]
    members = Members()
    await runner._on_assigned([0, 1], {})
    taking = asyncio.ensure_future(runner._take(members, [0, 1], {}))
    await asyncio.sleep(0.01)
    assert not taking.done()  # the promotion waits
    await runner._on_assigned([1], {})  # a newer assignment takes task 0 away
    assert runner.tasks == [1]  # what the member lists from now on
    gate.set()
    await asyncio.wait_for(taking, 5)
    assert started == [{1}]
    assert runner.tasks == [1] and runner._dropped == {0}
    await runner._shares.stop("test")
