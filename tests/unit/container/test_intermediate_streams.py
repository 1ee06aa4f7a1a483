"""Intermediate streams at start-up: made when missing, kept as they are when present."""

from __future__ import annotations

import asyncio
import uuid

from structlog.testing import capture_logs

from samzapy.config import load_config, resolve
from samzapy.container.streams import prepare_streams
from samzapy.container.systems import started_admins
from samzapy.system.inmemory import InMemoryBroker


def _prepared(namespace: str, partitions: int) -> dict[str, int]:
    config = resolve(
        load_config(
            text=f"""
job.name: mid
task.class: samzapy.testing.runner:TestRunner
task.inputs: [mem.in, mem.mid]
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
streams.mid.samza.intermediate: true
streams.mid.samza.system: mem
streams.mid.partitions: {partitions}
"""
        )
    )

    async def prepare() -> dict[str, int]:
        async with started_admins(config) as admins:
            counts = await prepare_streams(config, admins)
        return {str(ss): n for ss, n in counts.items()}

    return asyncio.run(prepare())


def test_an_existing_intermediate_stream_keeps_its_count_and_says_so() -> None:
    namespace = f"mid-{uuid.uuid4().hex[:8]}"
    InMemoryBroker.for_namespace(namespace).create_stream("in", 2)
    try:
        assert _prepared(namespace, 2) == {"mem.in": 2, "mem.mid": 2}  # made
        with capture_logs() as logs:
            assert _prepared(namespace, 4) == {"mem.in": 2, "mem.mid": 2}  # kept
        (kept,) = [e for e in logs if e["event"] == "intermediate_partitions_kept"]
        assert (kept["stream"], kept["partitions"], kept["configured"]) == ("mem.mid", 2, 4)
    finally:
        InMemoryBroker.drop_namespace(namespace)
