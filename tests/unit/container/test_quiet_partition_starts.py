"""A partition that delivers nothing during a run is in its task's checkpoint (memory system).

At offset default ``upcoming`` a partition without a checkpointed offset starts at its end
as it stood at start-up. Left out of the checkpoint because it delivered nothing, it would
start at its end again on the next start, skipping what was written to it meanwhile. The
checkpoint records it as processed up to the offset before where the run started it, so a
restart reads exactly what arrived while the job was down: not what was there before the
first start, and nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from samzapy import InitableTask, StreamTask
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.system.inmemory import InMemoryBroker

P0, P1 = (SystemStreamPartition("mem", "in", p) for p in range(2))
RULES = SystemStreamPartition("mem", "rules", 0)


class Job:
    """A job on stream ``in`` (2 partitions) at offset default ``upcoming``; each run
    records what each task processed, by task partition."""

    def __init__(self, **extra: Any) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.broker = InMemoryBroker.for_namespace(self.id)
        self.broker.create_stream("in", 2)
        self.config = {
            "job.name": "quiet",
            "job.id": self.id,
            "task.class": "x:Y",
            "task.inputs": ["mem.in"],
            "task.checkpoint.factory": "memory",
            "task.commit.ms": 60_000,
            "systems.mem.samza.factory": "memory",
            "systems.mem.namespace": self.id,
            "systems.mem.default.stream.samza.offset.default": "upcoming",
            **extra,
        }

    def checkpoints(self) -> dict[TaskName, dict[SystemStreamPartition, str]]:
        found = InMemoryCheckpointManager.checkpoints_for(f"quiet-{self.id}")
        return {task: dict(checkpoint.offsets) for task, checkpoint in found.items()}

    async def run(self, append: list[tuple[str, int, str]], processed: int) -> dict[int, list]:
        """Start, append ``(stream, partition, message)`` items once the consumers have
        started, stop once ``processed`` messages were (a clean stop commits)."""
        seen: dict[int, list[str]] = {0: [], 1: []}

        class Task(StreamTask, InitableTask):
            def init(self, context: Any) -> None:
                self.partition = int(str(context.task_name).split()[-1])

            def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
                seen[self.partition].append(envelope.message)

        config = resolve(load_config(text=json.dumps(self.config)))
        container = SamzaContainer(config, task_factory=Task)
        run = asyncio.ensure_future(container.run())
        await asyncio.wait_for(container.started.wait(), 10)
        for stream, partition, message in append:
            self.broker.append(stream, partition, None, message)
        for _ in range(500):
            if container.processed >= processed or run.done():
                break
            await asyncio.sleep(0.01)
        container.request_stop("test done")
        await asyncio.wait_for(run, 10)
        assert container.processed == processed
        return seen


async def test_a_partition_quiet_during_a_run_is_read_from_where_that_run_started_it() -> None:
    job = Job()
    job.broker.append("in", 1, None, "before")  # before the first start: upcoming skips it
    assert await job.run([("in", 0, "a")], processed=1) == {0: ["a"], 1: []}
    # Partition 1 delivered nothing; its run started it at offset 1.
    assert job.checkpoints() == {
        TaskName("Partition 0"): {P0: "0"},
        TaskName("Partition 1"): {P1: "0"},
    }
    job.broker.append("in", 1, None, "while down")
    assert await job.run([], processed=1) == {0: [], 1: ["while down"]}
    assert job.checkpoints()[TaskName("Partition 1")] == {P1: "1"}


async def test_an_empty_partition_resumes_at_its_first_offset() -> None:
    job = Job()
    await job.run([("in", 0, "a")], processed=1)
    assert job.checkpoints()[TaskName("Partition 1")] == {P1: "-1"}  # nothing at offset 0 yet
    job.broker.append("in", 1, None, "while down")
    assert await job.run([], processed=1) == {0: [], 1: ["while down"]}


async def test_a_quiet_partition_stays_where_it_was_over_runs_that_read_nothing() -> None:
    job = Job()
    job.broker.append("in", 1, None, "before")
    await job.run([("in", 0, "a")], processed=1)
    await job.run([("in", 0, "b")], processed=1)  # the restart keeps partition 1 at offset 1
    assert job.checkpoints()[TaskName("Partition 1")] == {P1: "0"}
    job.broker.append("in", 1, None, "while down")
    assert await job.run([], processed=1) == {0: [], 1: ["while down"]}


async def test_a_reset_partition_starts_at_its_default_again() -> None:
    job = Job(**{"streams.in.samza.reset.offset": True, "streams.in.samza.system": "mem"})
    await job.run([("in", 0, "a")], processed=1)
    job.broker.append("in", 1, None, "while down")  # reset at upcoming: skipped, as asked
    assert await job.run([("in", 1, "after")], processed=1) == {0: [], 1: ["after"]}
    assert job.checkpoints()[TaskName("Partition 1")] == {P1: "1"}


@pytest.mark.parametrize("bootstrap", [False, True])
async def test_a_quiet_broadcast_partition_is_in_every_tasks_checkpoint(bootstrap: bool) -> None:
    job = Job(
        **{
            "task.broadcast.inputs": ["mem.rules#0"],
            "streams.rules.samza.system": "mem",
            "streams.rules.samza.bootstrap": bootstrap,
        }
    )
    job.broker.create_stream("rules", 1)
    job.broker.append("rules", 0, None, "rule before")
    await job.run([("in", 0, "a")], processed=1)
    assert {task: offsets[RULES] for task, offsets in job.checkpoints().items()} == {
        TaskName("Partition 0"): "0",
        TaskName("Partition 1"): "0",
    }
    job.broker.append("rules", 0, None, "rule while down")
    seen = await job.run([], processed=2)
    assert seen == {0: ["rule while down"], 1: ["rule while down"]}
