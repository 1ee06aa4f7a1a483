"""Where each task starts on a broadcast partition it shares with others (memory system).

The consumer reads a shared partition once, from the earliest offset any task resumes at;
a task that resumes later skips what it processed. A task without a checkpointed offset for
the partition starts at the stream's offset default as it stood at start-up, whatever the
other tasks' checkpoints say (as each Samza task instance starts at its own offset).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from samzapy import InitableTask, RequestScope, StreamTask
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.system.inmemory import InMemoryBroker

RULES = SystemStreamPartition("mem", "rules", 0)
COUNTS = {SystemStream("mem", "views"): 2, SystemStream("mem", "rules"): 1}


async def run(
    checkpoints: dict[int, str], *, rules: int, later: int = 0, **extra: Any
) -> dict[int, list[str]]:
    """Run a two-task job whose tasks share ``rules#0`` (``rules`` messages before the
    checkpoints, ``later`` after them) and read ``views`` (one ended message per
    partition; both ended); ``checkpoints``: task partition -> last processed offset of
    ``rules#0``. What each task processed."""
    namespace = f"bcast-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("views", 2)
    broker.create_stream("rules", 1)
    for i in range(rules + later):
        broker.append("rules", 0, None, f"rule-{i}")
    broker.end_stream("rules")
    for p in range(2):
        broker.append("views", p, None, f"view-{p}")
    broker.end_stream("views")
    manager = InMemoryCheckpointManager(f"bcast-{namespace}")
    for p, offset in checkpoints.items():
        await manager.write(TaskName.for_partition(p), Checkpoint({RULES: offset}, COUNTS))
    seen: dict[int, list[str]] = {0: [], 1: []}

    class Task(StreamTask, InitableTask):
        def init(self, context):
            self.partition = int(str(context.task_name).split()[-1])

        def process(self, envelope, collector, coordinator):
            seen[self.partition].append(envelope.message)

    config = {
        "job.name": "bcast",
        "job.id": namespace,
        "task.class": "x:Y",
        "task.inputs": ["mem.views"],
        "task.broadcast.inputs": ["mem.rules#0"],
        "task.checkpoint.factory": "memory",
        "systems.mem.samza.factory": "memory",
        "systems.mem.namespace": namespace,
        "streams.rules.samza.system": "mem",
        **extra,
    }
    container = SamzaContainer(resolve(load_config(text=json.dumps(config))), task_factory=Task)
    await asyncio.wait_for(container.run(), 10)
    return seen


def rules(start: int, stop: int) -> list[str]:
    return [f"rule-{i}" for i in range(start, stop)]


def rules_of(seen: list[str]) -> list[str]:
    return [m for m in seen if m.startswith("rule-")]


@pytest.mark.parametrize("bootstrap", [False, True])
async def test_a_task_without_a_checkpoint_reads_from_the_oldest(bootstrap: bool) -> None:
    seen = await run({1: "9"}, rules=10, **{"streams.rules.samza.bootstrap": bootstrap})
    assert rules_of(seen[0]) == rules(0, 10)
    assert seen[1] == ["view-1"]
    if bootstrap:  # read to its head before the view
        assert seen[0][-1] == "view-0"


async def test_a_task_without_a_checkpoint_starts_at_upcoming() -> None:
    # Task 1 resumes after rule 4, so the consumer starts there; task 0, without a
    # checkpoint, starts at the end of the partition as it was at start-up.
    seen = await run(
        {1: "4"}, rules=5, later=3, **{"streams.rules.samza.offset.default": "upcoming"}
    )
    assert seen[0] == ["view-0"]
    assert rules_of(seen[1]) == rules(5, 8)


async def test_tasks_at_different_checkpoints_each_resume_at_their_own() -> None:
    seen = await run({0: "2", 1: "6"}, rules=10)
    assert rules_of(seen[0]) == rules(3, 10)
    assert rules_of(seen[1]) == rules(7, 10)


async def test_a_task_that_resumes_past_the_last_message_before_the_head_is_caught_up(
    tmp_path: Any,
) -> None:
    """A followed file: its empty lines have offsets but are never delivered. Task 1
    resumes at line 8 of the shared bootstrap partition, whose lines 8 and 9 (the last
    before its head, 10) are empty; the consumer, started at task 0's line 3, marks the
    partition caught up once it has passed them, and that marker reaches task 1 too,
    although no message of task 1's came before it."""
    for stream in ("views", "rules"):
        (tmp_path / stream).mkdir()
    lines = [f'"rule-{i}"' for i in range(8)] + ["", ""]
    (tmp_path / "rules" / "0.jsonl").write_text("\n".join(lines) + "\n")
    for p in range(2):
        (tmp_path / "views" / f"{p}.jsonl").write_text(f'"view-{p}"\n')
    namespace = f"bcast-{uuid.uuid4().hex[:8]}"
    manager = InMemoryCheckpointManager(f"bcast-{namespace}")
    rules_ssp = SystemStreamPartition("fs", "rules", 0)
    counts = {SystemStream("fs", "views"): 2, SystemStream("fs", "rules"): 1}
    for p, offset in ((0, "2"), (1, "7")):
        await manager.write(TaskName.for_partition(p), Checkpoint({rules_ssp: offset}, counts))
    seen: dict[int, list[str]] = {0: [], 1: []}

    class Task(StreamTask, InitableTask):
        def init(self, context):
            self.partition = int(str(context.task_name).split()[-1])

        def process(self, envelope, collector, coordinator):
            seen[self.partition].append(envelope.message)
            if all(f"view-{p}" in seen[p] for p in (0, 1)):
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    config = {
        "job.name": "bcast",
        "job.id": namespace,
        "task.class": "x:Y",
        "task.inputs": ["fs.views"],
        "task.broadcast.inputs": ["fs.rules#0"],
        "task.checkpoint.factory": "memory",
        "systems.fs.samza.factory": "file",
        "systems.fs.path": str(tmp_path),
        "systems.fs.follow": True,
        "systems.fs.poll.interval.ms": 1,
        "streams.rules.samza.system": "fs",
        "streams.rules.samza.bootstrap": True,
    }
    container = SamzaContainer(resolve(load_config(text=json.dumps(config))), task_factory=Task)
    await asyncio.wait_for(container.run(), 10)
    assert seen == {0: [*rules(3, 8), "view-0"], 1: ["view-1"]}
