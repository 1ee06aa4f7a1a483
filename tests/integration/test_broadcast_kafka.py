"""A broadcast bootstrap input on a real broker, its tasks at different checkpoints.

``rules`` (one partition, written in one committed transaction: its last offset is a
transaction marker no consumer returns) is broadcast to both tasks of a job over ``views``.
Task 1 had checkpointed a rule: the fifth, or the last, so that it resumes at the marker,
before the head with no message of its own before it; task 0 has no checkpoint and starts
at ``oldest``. The consumer reads the shared partition once; each task processes the rules
from where it starts to the head before its view.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from test_bootstrap_kafka import name, produce

from samzapy import InitableTask, StreamTask
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer

RULES = 10


@pytest.mark.parametrize("checkpointed", [4, RULES - 1])
async def test_each_task_reads_a_broadcast_bootstrap_partition_from_its_own_start(
    kafka_bootstrap: str, checkpointed: int
) -> None:
    rules, views = name("rules"), name("views")
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(rules, 1, 1), NewTopic(views, 2, 1)])
    finally:
        await admin.close()
    for p in (0, 1):
        await produce(kafka_bootstrap, views, p, [f"view-{p}"])
    await produce(kafka_bootstrap, rules, 0, [f"rule-{i}" for i in range(RULES)], transaction=True)
    job_id = uuid.uuid4().hex[:8]
    counts = {SystemStream("kafka", views): 2, SystemStream("kafka", rules): 1}
    await InMemoryCheckpointManager(f"bcast-it-{job_id}").write(
        TaskName.for_partition(1),
        Checkpoint({SystemStreamPartition("kafka", rules, 0): str(checkpointed)}, counts),
    )
    seen: dict[int, list[str]] = {0: [], 1: []}

    class Record(StreamTask, InitableTask):
        def init(self, context: Any) -> None:
            self.partition = int(str(context.task_name).split()[-1])

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            seen[self.partition].append(envelope.message.decode())

    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "bcast-it",
                    "job.id": job_id,
                    "job.coordinator.factory": "static",
                    "task.class": "x:Y",
                    "task.inputs": [f"kafka.{views}"],
                    "task.broadcast.inputs": [f"kafka.{rules}#0"],
                    "task.checkpoint.factory": "memory",
                    "systems.kafka.samza.factory": "kafka",
                    "systems.kafka.bootstrap.servers": kafka_bootstrap,
                    "systems.kafka.default.stream.samza.offset.default": "oldest",
                    f"streams.{rules}.samza.bootstrap": True,
                }
            )
        )
    )
    container = SamzaContainer(config, task_factory=Record)
    job = asyncio.ensure_future(container.run())
    deadline = time.monotonic() + 20
    while not all(f"view-{p}" in seen[p] for p in (0, 1)):
        if job.done():
            job.result()
            raise AssertionError("the job ended early")
        assert time.monotonic() < deadline, f"timed out: {seen}"
        await asyncio.sleep(0.02)
    container.request_stop("test done")
    await job
    assert seen == {
        0: [*(f"rule-{i}" for i in range(RULES)), "view-0"],
        1: [*(f"rule-{i}" for i in range(checkpointed + 1, RULES)), "view-1"],
    }
