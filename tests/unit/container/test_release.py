"""Releasing some tasks of a running container (an incremental rebalance moved them): they
are drained, closed, committed and their stores closed clean, while the others go on."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from samzapy import InitableTask, StreamTask, TaskName
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.storage.task_stores import CLEAN_MARKER
from samzapy.system.inmemory import InMemoryBroker


class Tally(InitableTask, StreamTask):
    """Counts each partition's messages, and each word in the store ``counts``."""

    seen: ClassVar[Counter[int]] = Counter()

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Tally.seen[envelope.system_stream_partition.partition] += 1
        self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)


def config(tmp_path: Path, namespace: str) -> Any:
    text = f"""
job.name: release
job.id: '{namespace}'
task.class: {__name__}:Tally
task.inputs: [mem.in]
task.commit.ms: -1
task.checkpoint.factory: file
task.checkpoint.dir: {tmp_path / "checkpoints"}
job.logged.store.base.dir: {tmp_path / "state"}
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
stores.counts.factory: rocksdb
stores.counts.key.serde: string
stores.counts.msg.serde: long
stores.counts.changelog: mem.counts-changelog
"""
    return resolve(load_config(text=text, env={}))


def checkpointed(tmp_path: Path, task: int) -> str | None:
    path = tmp_path / "checkpoints" / f"Partition_{task}.json"
    if not path.exists():
        return None
    offsets = json.loads(path.read_text())["offsets"]
    return str(offsets[0]["offset"]) if offsets else None


async def until(condition: Any, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_released_tasks_commit_and_stop_while_the_others_go_on(tmp_path: Path) -> None:
    namespace = f"release-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 4)
    for p in range(4):
        for i in range(10):
            broker.append("in", p, None, f"w{i % 3}")
    Tally.seen = Counter()
    container = SamzaContainer(config(tmp_path, namespace))
    run = asyncio.ensure_future(container.run())
    try:
        await until(lambda: container.processed == 40, "the first 40 messages")
        groups = set(container.metrics.snapshot())
        assert "task.Partition 1" in groups and "partition.mem.in#1" in groups

        released = await container.release([TaskName("Partition 1"), TaskName("Partition 3")])
        assert released
        assert [str(t.name) for t in container.tasks] == ["Partition 0", "Partition 2"]
        # Their final checkpoints cover everything they processed, and their stores were
        # closed clean at it (a restart here keeps them).
        assert [checkpointed(tmp_path, k) for k in range(4)] == [None, "9", None, "9"]
        stores = tmp_path / "state" / "release" / "counts"
        assert sorted(p.parent.name for p in stores.glob(f"*/{CLEAN_MARKER}")) == [
            "Partition_1",
            "Partition_3",
        ]
        groups = set(container.metrics.snapshot())
        assert "task.Partition 1" not in groups and "partition.mem.in#1" not in groups
        assert "task.Partition 0" in groups

        # The others go on; the released tasks' partitions are read no more.
        for p in range(4):
            for _ in range(5):
                broker.append("in", p, None, "later")
        await until(lambda: Tally.seen[0] == Tally.seen[2] == 15, "the kept tasks' new input")
        await asyncio.sleep(0.05)
        assert [Tally.seen[k] for k in range(4)] == [15, 10, 15, 10]
        assert container.processed == 50  # released tasks' counts are kept: it only grows
        assert not run.done()
    finally:
        container.request_stop("test done")
        await run
    assert [checkpointed(tmp_path, k) for k in range(4)] == ["14", "9", "14", "9"]


async def test_a_stopping_container_releases_nothing(tmp_path: Path) -> None:
    namespace = f"release-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    broker.append("in", 0, None, "w")
    container = SamzaContainer(config(tmp_path, namespace))
    run = asyncio.ensure_future(container.run())
    await container.started.wait()
    container.request_stop("stopping")
    assert not await container.release([TaskName("Partition 0")])
    await run
    # The stop committed it, as every other task.
    assert (tmp_path / "checkpoints" / "Partition_0.json").exists()
