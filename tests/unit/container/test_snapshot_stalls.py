"""A task's store snapshot does not hold the event loop: the other tasks go on meanwhile, and
the snapshot still holds exactly what the checkpoint covers."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from samzapy import InitableTask, RequestScope, StreamTask
from samzapy.api.system import TaskName
from samzapy.storage.rocksdb import RocksDBStorageEngine, RocksDBStoreFactory
from samzapy.storage.snapshots import StoreSnapshots, in_thread
from samzapy.testing import TestRunner

SLOW_FLUSH_S = 1.0
SLOW_TASK = TaskName.for_partition(0)
#: When each slow flush began and ended, and when task 1 processed each of its messages.
FLUSHES: list[tuple[float, float]] = []
PROCESSED_BY_1: list[float] = []


class SlowFlushEngine(RocksDBStorageEngine):
    """RocksDB whose memtable takes ``SLOW_FLUSH_S`` to write out when it holds writes, as a
    large one does: RocksDB's flush waits for its own thread, as ``time.sleep`` does. A
    snapshot writes the memtable out first, as RocksDB's checkpoint does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dirty = False

    def put(self, key: bytes, value: bytes) -> None:
        super().put(key, value)
        self._dirty = True

    def write_batch(self, entries: Any) -> None:
        super().write_batch(entries)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            began = time.perf_counter()
            time.sleep(SLOW_FLUSH_S)
            FLUSHES.append((began, time.perf_counter()))
            self._dirty = False
        super().flush()

    def snapshot(self, directory: Path) -> None:
        self.flush()
        super().snapshot(directory)


class SlowForPartition0(RocksDBStoreFactory):
    def create(self, store_name: str, task_name: TaskName, directory: Path, options: Any, *,
               logged: bool = False) -> RocksDBStorageEngine:  # fmt: skip
        if task_name != SLOW_TASK:
            return super().create(store_name, task_name, directory, options, logged=logged)
        return SlowFlushEngine(store_name, task_name, directory, wal=not logged)


class Count(InitableTask, StreamTask):
    """Counts its messages in the store; task 0 commits after its first message. Notes when
    each of task 1's messages was processed."""

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")
        self.partition = context.task_name

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)
        if self.partition == SLOW_TASK:
            if envelope.offset == "0":
                coordinator.commit(RequestScope.CURRENT_TASK)
        else:
            PROCESSED_BY_1.append(time.perf_counter())


async def stalls(stop: asyncio.Event) -> list[tuple[float, float]]:
    """When each 1 ms sleep began and how much later than asked it woke, until ``stop``."""
    seen = []
    while not stop.is_set():
        began = time.perf_counter()
        await asyncio.sleep(0.001)
        seen.append((began, time.perf_counter() - began - 0.001))
    return seen


@pytest.mark.timeout(60)
async def test_other_tasks_process_while_a_task_writes_its_snapshot(tmp_path: Path) -> None:
    FLUSHES.clear()
    PROCESSED_BY_1.clear()
    factory = f"{SlowForPartition0.__module__}:{SlowForPartition0.__name__}"
    config = {
        "task.commit.ms": -1,
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "stores.counts.factory": factory,
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        "stores.counts.changelog": "memory.counts-changelog",
    }
    # Task 0: two messages, two commits with a slow snapshot each (after the first message,
    # at the end); task 1: enough messages to still be processing meanwhile.
    words = {0: ["a", "b"], 1: [f"w{i % 50}" for i in range(200_000)]}
    runner = TestRunner(Count, config).add_input("words", words)
    stop = asyncio.Event()
    probe = asyncio.create_task(stalls(stop))
    await runner.run_async(timeout=50)
    stop.set()
    seen = await probe

    assert len(FLUSHES) >= 1
    began, ended = FLUSHES[0]
    during = [t for t in PROCESSED_BY_1 if began < t < ended]
    # Task 1 went on while task 0's snapshot wrote its memtable out (it processes thousands
    # of messages in that time; a loop held by the snapshot processes none).
    assert len(during) > 100, f"task 1 processed {len(during)} messages during the snapshot"
    # Generous: the slow flush alone would hold the loop SLOW_FLUSH_S.
    worst = max(stall for at, stall in seen if at <= ended and at + stall >= began)
    assert worst < SLOW_FLUSH_S / 2, f"the loop stood still for {worst:.3f} s"
    # The snapshot the last commit kept holds exactly task 0's state at that commit.
    (kept,) = (tmp_path / "state" / "test-job" / "counts" / "Partition_0.snapshots").iterdir()
    copy = RocksDBStoreFactory().create("counts", SLOW_TASK, tmp_path / "copy", {})
    copy.restore_snapshot(kept)
    assert dict(copy.iterate(None, None)) == {b"a": (1).to_bytes(8, "big"), b"b": b"\0" * 7 + b"\1"}
    copy.close()


async def test_a_cancelled_snapshot_waits_for_its_thread(tmp_path: Path) -> None:
    """A commit cancelled while the memtable is being written out returns only once the
    thread is done, so the store can be closed at once (RocksDB refuses to close under it)."""
    engine = SlowFlushEngine("counts", SLOW_TASK, tmp_path / "db", wal=False)
    engine.put(b"k", b"v")
    snapshots = StoreSnapshots(tmp_path / "db")
    take = asyncio.create_task(snapshots.take(engine, "5"))
    await asyncio.sleep(SLOW_FLUSH_S / 3)
    take.cancel()
    with pytest.raises(asyncio.CancelledError):
        await take
    engine.close()  # raises 'Already borrowed' if the flush were still running


async def test_in_thread_raises_the_cancellation_not_the_threads_error() -> None:
    def fails() -> None:
        time.sleep(0.2)
        raise RuntimeError("from the thread")

    call = asyncio.create_task(in_thread(fails))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
