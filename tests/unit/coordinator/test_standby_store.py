"""A standby's copy of a store (coordinator/standby_store.py) over the memory system and a real
RocksDB directory, and a checkpoint manager following another container's writes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.stream import StreamCheckpointManager
from samzapy.config import StoreConfig
from samzapy.coordinator.standby import behind
from samzapy.coordinator.standby_store import StandbyStore
from samzapy.storage.ports import StoreLockedError
from samzapy.storage.restore import CLEAN_MARKER, read_marker
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import SystemAdmin

TASK = TaskName.for_partition(0)


def _setup(tmp_path: Path) -> tuple[InMemorySystemFactory, StandbyStore]:
    factory = InMemorySystemFactory("mem", {"namespace": uuid.uuid4().hex})
    changelog = SystemStreamPartition("mem", "counts-changelog", 0)
    config = StoreConfig("counts", "rocksdb", "string", "long", None, {"factory": "rocksdb"})
    store = StandbyStore(TASK, "counts", config, tmp_path / "counts" / "Partition_0", changelog)
    return factory, store


async def _write(factory: InMemorySystemFactory, records: list[tuple[bytes, bytes | None]]) -> None:
    producer = factory.get_producer()
    await producer.start()
    for key, value in records:
        producer.send(SystemStream("mem", "counts-changelog"), 0, key, value)
    await producer.flush()
    await producer.stop()


def test_a_standby_applies_the_changelog_up_to_the_checkpoint_and_never_past_it(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        factory, store = _setup(tmp_path)
        admin = factory.get_admin()
        await admin.create_stream("counts-changelog", 1)
        # Offsets 0-2 are covered by the checkpoint (upcoming offset 3); 3-4 are not.
        await _write(
            factory, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"9"), (b"a", None)]
        )
        assert store.open()
        assert store.applied is None
        assert await store.catch_up(factory, admin, "0", "3") == 3
        assert store.applied == "3"
        assert store.engine is not None
        assert (store.engine.get(b"a"), store.engine.get(b"b"), store.engine.get(b"c")) == (
            b"2",
            b"1",
            None,
        )
        # The next checkpoint covers the rest: only its tail is read.
        assert await store.catch_up(factory, admin, "0", "5") == 2
        assert store.engine.get(b"a") is None and store.engine.get(b"c") == b"9"
        store.close()
        assert read_marker(store.directory) == "5"
        # Reopened, it keeps its copy and its offset.
        assert store.open() and store.applied == "5"
        assert store.engine is not None and store.engine.get(b"c") == b"9"
        store.close()

    asyncio.run(run())


def test_a_copy_not_closed_cleanly_starts_over(tmp_path: Path) -> None:
    async def run() -> None:
        factory, store = _setup(tmp_path)
        admin = factory.get_admin()
        await admin.create_stream("counts-changelog", 1)
        await _write(factory, [(b"a", b"1")])
        assert store.open()
        await store.catch_up(factory, admin, "0", "1")
        assert store.engine is not None
        store.engine.close()  # a crash: no marker
        store.engine = None
        assert store.open() and store.applied is None
        assert store.engine is not None and store.engine.get(b"a") is None
        store.close()

    asyncio.run(run())


async def _closed_copy_at_2(tmp_path: Path) -> tuple[StandbyStore, SystemAdmin]:
    """A standby's copy caught up to changelog offset 2 (two records of ``a``), closed."""
    factory, store = _setup(tmp_path)
    admin = factory.get_admin()
    await admin.create_stream("counts-changelog", 1)
    await _write(factory, [(b"a", b"1"), (b"a", b"2")])
    assert store.open()
    await store.catch_up(factory, admin, "0", "2")
    store.close()
    return store, admin


def test_promotion_moves_the_copy_where_the_active_task_opens_it_unless_that_is_further(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        store, admin = await _closed_copy_at_2(tmp_path)
        active = store.active_directory
        active.mkdir(parents=True)
        (active / "CLEAN_OFFSET").write_text("7")  # an older active copy, further along
        assert not store.move_into_place(admin.compare_offsets)
        (active / "CLEAN_OFFSET").write_text("1")  # behind the standby
        assert store.move_into_place(admin.compare_offsets)
        assert read_marker(active) == "2" and not store.directory.exists()

    asyncio.run(run())


def test_promotion_replaces_an_active_copy_marked_while_the_store_had_no_changelog(
    tmp_path: Path,
) -> None:
    """A clean marker of a store without changelog names its snapshot (``local.<n>-<tag>``),
    no changelog offset: it is compared with nothing, and the standby moves in."""

    async def run() -> None:
        store, admin = await _closed_copy_at_2(tmp_path)
        active = store.active_directory
        active.mkdir(parents=True)
        (active / "CLEAN_OFFSET").write_text("local.9-0badf00d")
        assert store.move_into_place(admin.compare_offsets)
        assert read_marker(active) == "2"

    asyncio.run(run())


def test_promotion_leaves_a_directory_another_holds_open_alone(tmp_path: Path) -> None:
    """docs/deploy.md, "Standby replicas": a task's old owner that still holds its store open
    (paused, not dead, on a state directory containers share) writes into it by name when it
    wakes; the copy is not moved over it, and both stay as they are. A directory that does
    not open for another reason (corrupt) is replaced."""

    async def run() -> None:
        store, admin = await _closed_copy_at_2(tmp_path)
        active = store.active_directory
        holder = RocksDBStoreFactory().create("counts", TASK, active, {})
        holder.put(b"a", b"old")
        with pytest.raises(StoreLockedError, match="another store or process"):
            store.move_into_place(admin.compare_offsets)
        assert read_marker(store.directory) == "2"
        assert holder.get(b"a") == b"old"
        holder.close()
        (active / "CURRENT").write_text("garbage\n")  # let go of, and then corrupt
        assert store.move_into_place(admin.compare_offsets)
        assert read_marker(active) == "2" and not store.directory.exists()
        moved = RocksDBStoreFactory().create("counts", TASK, active, {})
        assert moved.get(b"a") == b"2"
        moved.close()

    asyncio.run(run())


def test_a_promotion_waits_for_the_holder_to_let_go_then_moves_the_copy_in(
    tmp_path: Path,
) -> None:
    """The task starts with the warm copy once the old owner let go (woken and fenced, or
    killed), not with a restore of the whole changelog over what that one left."""

    async def run() -> None:
        store, admin = await _closed_copy_at_2(tmp_path)
        holder = RocksDBStoreFactory().create("counts", TASK, store.active_directory, {})
        with capture_logs() as logs:
            moving = asyncio.ensure_future(
                store.move_when_unlocked(admin.compare_offsets, retry_s=0.05)
            )
            await asyncio.sleep(0.3)  # several tries, still held
            assert not moving.done()
            holder.close()
            assert await asyncio.wait_for(moving, 5)
        assert read_marker(store.active_directory) == "2" and not store.directory.exists()
        (waited,) = [e for e in logs if e["event"] == "standby_not_moved"]
        assert "another store or process" in waited["error"] and waited["task"] == TASK

    asyncio.run(run())


def test_a_checkpoint_manager_follows_what_another_container_writes() -> None:
    async def run() -> None:
        factory = InMemorySystemFactory("mem", {"namespace": uuid.uuid4().hex})
        writer = StreamCheckpointManager(factory, "checkpoints")
        follower = StreamCheckpointManager(factory, "checkpoints")
        await writer.start()
        await follower.start()
        try:
            assert await follower.read_last(TASK) is None
            ssp = SystemStreamPartition("mem", "in", 0)
            await writer.write(TASK, Checkpoint({ssp: "5"}, changelog_offsets={"counts": "12"}))
            await follower.refresh()
            found = await follower.read_last(TASK)
            assert found is not None and found.changelog_offsets == {"counts": "12"}
            await writer.write(TASK, Checkpoint({ssp: "9"}, changelog_offsets={"counts": "20"}))
            await follower.refresh()
            found = await follower.read_last(TASK)
            assert found is not None and found.changelog_offsets == {"counts": "20"}
        finally:
            await writer.stop()
            await follower.stop()

    asyncio.run(run())


def test_a_standby_that_applied_nothing_is_never_reported_caught_up() -> None:
    """The lag gauges (samzapy_standby_checkpoint_lag, _changelog_lag): 0 only with nothing to
    reach; before the first record applied, the offsets up to the end."""
    assert behind(7, "93", "100") == 7
    assert behind(None, None, "99") == 100  # applied nothing: all of it to read, at most
    assert behind(None, None, "0") == 1
    assert behind(None, None, None) == 0  # no checkpoint yet: nothing to reach
    assert behind(None, "5", None) == 0


def test_a_copy_whose_marker_is_no_offset_starts_over(tmp_path: Path) -> None:
    """A damaged clean marker (text that is no changelog offset) is not trusted: the copy is
    rebuilt from the changelog, rather than every catch-up failing on a ValueError."""

    async def run() -> None:
        factory, store = _setup(tmp_path)
        admin = factory.get_admin()
        await admin.create_stream("counts-changelog", 1)
        await _write(factory, [(b"a", b"1"), (b"a", b"2")])
        assert store.open()
        await store.catch_up(factory, admin, "0", "1")
        store.close()
        (store.directory / CLEAN_MARKER).write_text("garbage")
        assert store.open() and store.applied == "garbage"
        assert await store.catch_up(factory, admin, "0", "2") == 2
        assert store.applied == "2"
        assert store.engine is not None and store.engine.get(b"a") == b"2"
        store.close()
        # Promotion over an active store whose marker is damaged moves the copy in.
        store.active_directory.mkdir(parents=True, exist_ok=True)
        (store.active_directory / CLEAN_MARKER).write_text("garbage")
        assert store.move_into_place(admin.compare_offsets)
        assert read_marker(store.active_directory) == "2"

    asyncio.run(run())


def test_a_standby_waiting_for_its_directory_warns_once_a_minute_not_at_every_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two containers sharing a state directory (docker compose --scale, one volume) with
    two standbys of one task: one waits for the other's copy for as long as both run, and
    tries again at every catch-up, each second; its warning is not repeated each time."""
    _, store = _setup(tmp_path)
    holder = RocksDBStoreFactory().create("counts", TASK, store.directory, {})
    now = [1000.0]
    monkeypatch.setattr("samzapy.coordinator.standby_store.time.monotonic", lambda: now[0])
    with capture_logs() as logs:
        for _ in range(30):  # half a minute of catch-ups
            assert not store.open()
            now[0] += 1.0
        now[0] += 31.0
        assert not store.open()
        holder.close()
        assert store.open()
    waits = [e for e in logs if e["event"] == "standby_waiting"]
    assert [e.get("waiting_s") for e in waits] == [0.0, 61.0], waits
    assert waits[1]["tries"] == 31
    store.close()
