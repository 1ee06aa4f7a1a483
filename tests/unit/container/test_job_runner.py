"""Coordinators: which tasks a container runs (static split, the group assignor's plan)."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections import Counter
from typing import Any, ClassVar

import pytest

from samzapy import ConfigError, StreamTask
from samzapy.config import load_config, resolve
from samzapy.container.job_runner import JobRunner, container_index, coordinator_of
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.kafka.group import assign_tasks

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
