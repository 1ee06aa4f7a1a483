"""A job without periodic commits (``task.commit.ms`` <= 0) takes up the partitions added to
a plain output at the partition-count monitor's next check (``partition_monitor.py``), not
only at the stop: before, a keyed output hashed over the count it started with for as long
as the job ran (its routes took added partitions up at a flush, which only a commit does)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.api.envelope import OutgoingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.partitioner import partition_for

KEYS = [b"key-%d" % i for i in range(40)]


class Forward(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        out = SystemStream("mem", "out")
        collector.send(OutgoingMessageEnvelope(out, envelope.message, key=envelope.key))


def config(tmp_path: Path, namespace: str, commit_ms: int) -> Any:
    text = f"""
job.name: grown-output
task.class: {__name__}:Forward
task.inputs: [mem.in]
task.commit.ms: {commit_ms}
task.checkpoint.factory: file
task.checkpoint.dir: {tmp_path / "checkpoints"}
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
job.coordinator.monitor-partition-change.frequency.ms: 30
"""
    return resolve(load_config(text=text, env={}, overrides=()))


async def until(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("commit_ms", [-1, 0, 50])
async def test_a_job_without_periodic_commits_takes_up_added_output_partitions(
    tmp_path: Path, commit_ms: int
) -> None:
    """As one with them does at its next commit (50: at a commit, as before)."""
    namespace = f"grown-{uuid.uuid4().hex}"
    broker = InMemoryBroker.for_namespace(namespace)
    try:
        broker.create_stream("in", 1)
        broker.create_stream("out", 2)
        for key in KEYS:
            broker.append("in", 0, key, b"before")
        container = SamzaContainer(config(tmp_path, namespace, commit_ms))
        with capture_logs() as logs:
            run = asyncio.ensure_future(container.run())
            await until(lambda: container.processed == 40, "the first 40 messages")
            broker.add_partitions("out", 4)
            await until(
                lambda: any(e["event"] == "output_partitions_added" for e in logs),
                "the route to take the new partitions up",
            )
            for key in KEYS:
                broker.append("in", 0, key, b"after")
            await until(lambda: container.processed == 80, "the next 40 messages")
            container.request_stop("test")
            await asyncio.wait_for(run, 10)
        placed = {
            (key, value): partition
            for partition in range(4)
            for key, value in broker.records("out", partition)
        }
        assert all(placed[k, b"before"] == partition_for(k, 2) for k in KEYS)
        assert all(placed[k, b"after"] == partition_for(k, 4) for k in KEYS)
        (added,) = [e for e in logs if e["event"] == "output_partitions_added"]
        assert (added["stream"], added["partitions_before"], added["partitions_now"]) == (
            "mem.out",
            2,
            4,
        )
    finally:
        InMemoryBroker.drop_namespace(namespace)


def test_the_memory_broker_grows_a_stream_as_kafka_does_and_never_shrinks_it() -> None:
    broker = InMemoryBroker(f"grown-{uuid.uuid4().hex}")
    broker.create_stream("s", 2)
    broker.add_partitions("s", 3)
    assert broker.partition_count("s") == 3
    for count in (3, 1):
        with pytest.raises(StreamSystemError, match="has 3 partitions, cannot grow it to"):
            broker.add_partitions("s", count)
    with pytest.raises(StreamSystemError, match="does not exist"):
        broker.add_partitions("other", 2)
