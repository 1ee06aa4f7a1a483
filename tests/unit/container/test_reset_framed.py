"""``samza.reset.offset`` on a framed stream (memory system): the reset reads the partition
afresh, so what the checkpoint says of it beyond its offset goes too. Its end-of-stream,
reconciled and checkpointed, would otherwise end it at once on every restart; the origins
its reader applied would drop every record read again as a duplicate."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from samzapy import StreamTask
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.control.wire import (
    EndOfStreamMessage,
    encode_control,
    frame,
    frame_with_origin,
    origin_prefix,
    source_id,
)
from samzapy.system.inmemory import InMemoryBroker


def fill(origins: bool) -> str:
    """A namespace whose framed stream ``s`` holds three messages (with their writer's
    origins, or plain) and its one writer's end-of-stream."""
    namespace = f"reset-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("s", 1)
    prefix = origin_prefix(source_id("upstream/Partition 0", "in#0"), 0)
    for i in range(3):
        body = json.dumps(f"m{i}").encode()
        broker.append(
            "s", 0, None, frame_with_origin(prefix, i, 0, body) if origins else frame(body)
        )
    broker.append("s", 0, None, encode_control(EndOfStreamMessage("Partition 0", 1)))
    return namespace


async def run(namespace: str, *, reset: bool) -> list[str]:
    seen: list[str] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)

    config = {
        "job.name": "reset",
        "job.id": namespace,
        "task.class": "x:Y",
        "task.inputs": ["mem.s"],
        "task.checkpoint.factory": "memory",
        "systems.mem.samza.factory": "memory",
        "systems.mem.namespace": namespace,
        "streams.s.samza.system": "mem",
        "streams.s.samza.framed": True,
        "streams.s.samza.msg.serde": "json",
        "streams.s.samza.reset.offset": reset,
    }
    container = SamzaContainer(resolve(load_config(text=json.dumps(config))), task_factory=Task)
    await asyncio.wait_for(container.run(), 10)
    return seen


@pytest.mark.parametrize("origins", [False, True])
async def test_a_reset_reads_an_ended_framed_partition_again(origins: bool) -> None:
    namespace = fill(origins)
    assert await run(namespace, reset=False) == ["m0", "m1", "m2"]
    assert await run(namespace, reset=False) == []  # resumed: ended before
    assert await run(namespace, reset=True) == ["m0", "m1", "m2"]
    assert await run(namespace, reset=True) == ["m0", "m1", "m2"]  # on every start
    assert await run(namespace, reset=False) == []
