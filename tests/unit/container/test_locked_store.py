"""A task whose store directory another process still holds open (an old owner paused, not
dead, whose session ran out): under the group the container waits for it to let go, and
its other tasks are not taken down with it; on its own (``static``), it fails at once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from leases import SwitchedLease
from structlog.testing import capture_logs

from samzapy import InitableTask, StreamTask, TaskName
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.storage.ports import StorageEngine, StoreLockedError
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.system.inmemory import InMemoryBroker


class Count(InitableTask, StreamTask):
    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)


def config(tmp_path: Path, namespace: str) -> Any:
    text = f"""
job.name: locked
job.id: '{namespace}'
task.class: {__name__}:Count
task.inputs: [mem.in]
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


@pytest.fixture
def namespace() -> str:
    namespace = f"locked-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    for p in range(2):
        for i in range(10):
            broker.append("in", p, None, f"w{i % 3}")
    return namespace


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[StorageEngine]:
    """``Partition 1``'s store, held open as a paused old owner would."""
    directory = tmp_path / "state" / "locked" / "counts" / "Partition_1"
    engine = RocksDBStoreFactory().create("counts", TaskName("Partition 1"), directory, {})
    yield engine
    engine.close()


async def until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_group_member_waits_for_a_locked_store_then_starts(
    tmp_path: Path, namespace: str, holder: StorageEngine
) -> None:
    container = SamzaContainer(config(tmp_path, namespace), lease=SwitchedLease())
    with capture_logs() as logs:
        run = asyncio.ensure_future(container.run())
        try:
            await until(lambda: any(e["event"] == "store_locked" for e in logs), "the wait")
            await asyncio.sleep(1.5)  # a retry or two, still held
            assert not run.done(), "the container failed instead of waiting"
            assert not container.started.is_set()
            holder.close()  # the old owner lets go
            await asyncio.wait_for(container.started.wait(), 10)
            await until(lambda: container.processed == 20, "every message")
        finally:
            container.request_stop("test done")
            await run
    (locked,) = [e for e in logs if e["event"] == "store_locked"]
    assert locked["task"] == "Partition 1" and "Partition_1" in locked["error"]
    (unlocked,) = [e for e in logs if e["event"] == "store_unlocked"]
    assert unlocked["task"] == "Partition 1" and unlocked["waited_s"] >= 1


async def test_a_stop_cuts_the_wait_short(
    tmp_path: Path, namespace: str, holder: StorageEngine
) -> None:
    container = SamzaContainer(config(tmp_path, namespace), lease=SwitchedLease())
    with capture_logs() as logs:
        run = asyncio.ensure_future(container.run())
        await until(lambda: any(e["event"] == "store_locked" for e in logs), "the wait")
        container.request_stop("SIGTERM")
        await asyncio.wait_for(run, 5)
    assert any(e["event"] == "startup_stopped" for e in logs)


async def test_without_a_group_a_locked_store_fails_at_once(
    tmp_path: Path, namespace: str, holder: StorageEngine
) -> None:
    container = SamzaContainer(config(tmp_path, namespace))
    with pytest.raises(StoreLockedError, match="another store or process"):
        await asyncio.wait_for(container.run(), 10)
