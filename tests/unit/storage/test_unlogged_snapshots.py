"""A RocksDB store without changelog is brought back to its checkpoint after a crash
(``storage/unlogged.py``): each commit snapshots it, the checkpoint names the snapshot, and a
restart without a clean marker opens that snapshot, whatever the write buffer wrote back to
RocksDB after it (docs/configuration.md, "Store snapshots").

The commit and the crash are the container's, by hand: ``commit`` runs step 2 and 4 of
``container/commit.py`` (a checkpoint is the snapshot ids it returns), and ``crash`` closes
each engine below its write buffer and cache, with no write-back and no clean marker, as a
kill -9 leaves a RocksDB store (its write-ahead log holds every write that reached it).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy.api.system import SystemStream, TaskName
from samzapy.checkpoint.codec import decode_checkpoint, encode_checkpoint
from samzapy.checkpoint.ports import Checkpoint
from samzapy.cli.checkpoint_plan import plan_task
from samzapy.config import StoreConfig
from samzapy.storage.restore import CLEAN_MARKER
from samzapy.storage.snapshots import EMPTY, is_empty, is_local, snapshot_offset
from samzapy.storage.task_stores import TaskStores
from samzapy.system.serde import LongSerde, StringSerde

TASK = TaskName("Partition 0")
SERDES: dict[str, Any] = {"string": StringSerde(), "long": LongSerde()}


def config(factory: str = "rocksdb", **options: Any) -> StoreConfig:
    return StoreConfig(
        name="counts",
        factory=factory,
        key_serde="string",
        msg_serde="long",
        changelog=None,
        options={"factory": factory, **options},
    )


def task_stores(tmp_path: Path, *, snapshots: bool = True, **options: Any) -> TaskStores:
    async def flush() -> None:
        return None

    return TaskStores(
        task_name=TASK,
        partition=0,
        configs={"counts": config(**options)},
        base_dir=tmp_path / "state",
        serde=lambda name: SERDES[name or "bytes"],
        send=lambda envelope: None,
        flush=flush,
        factories={},
        admins={},
        snapshots=snapshots,
    )


def started(
    tmp_path: Path,
    checkpoint: Mapping[str, str] | None,
    *,
    snapshots: bool = True,
    **options: Any,
) -> TaskStores:
    """Stores opened and restored from ``checkpoint`` (its snapshots; None: no checkpoint)."""
    stores = task_stores(tmp_path, snapshots=snapshots, **options)
    stores.open()
    asyncio.run(stores.restore(None if checkpoint is None else {}, checkpoint))
    return stores


def count(stores: TaskStores, keys: range, times: int = 1) -> None:
    kv = stores.stores["counts"]
    for _ in range(times):
        for i in keys:
            kv.put(f"k{i:05d}", (kv.get(f"k{i:05d}") or 0) + 1)


def commit(stores: TaskStores) -> dict[str, str]:
    """Steps 2 and 4 of a commit; the checkpoint's snapshots."""

    async def run() -> dict[str, str]:
        await stores.flush()
        taken = await stores.snapshot(await stores.changelog_offsets())
        await stores.snapshots_committed(taken)
        return taken

    return asyncio.run(run())


def crash(stores: TaskStores) -> None:
    """What kill -9 leaves: what reached RocksDB stays, the buffer is lost, no marker."""
    for store in stores._stores.values():
        assert store.engine is not None
        store.engine.close()
        store.engine = None


def contents(stores: TaskStores) -> dict[str, int]:
    return dict(stores.stores["counts"].all())


def snapshot_dirs(tmp_path: Path) -> list[str]:
    root = tmp_path / "state" / "counts" / "Partition_0.snapshots"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


#: A buffer that overflows every few writes: RocksDB gets writes before the commit.
SMALL_BUFFER = {"write.buffer.max.bytes": 256}


@pytest.mark.parametrize("buffer", [SMALL_BUFFER, {"write.buffer.max.bytes": 0}, {}])
def test_a_crash_after_the_buffer_overflowed_restores_exactly_the_checkpoint(
    tmp_path: Path, buffer: dict[str, int]
) -> None:
    stores = started(tmp_path, None, **buffer)
    count(stores, range(100))
    checkpoint = commit(stores)
    assert set(checkpoint) == {"counts"} and is_local(checkpoint["counts"])
    assert snapshot_offset(checkpoint["counts"]) is None  # no changelog offset
    at_checkpoint = contents(stores)
    count(stores, range(50, 200), times=3)  # past the checkpoint: 150 keys, written back
    buffered = stores._stores["counts"].buffer
    if buffered is not None and buffer:  # the small buffer wrote back before any commit
        assert buffered.max_bytes == 256
    crash(stores)

    with capture_logs() as logs:
        again = started(tmp_path, checkpoint, **buffer)
    assert contents(again) == at_checkpoint == {f"k{i:05d}": 1 for i in range(100)}
    [restored] = [e for e in logs if e["event"] == "store_restored"]
    assert restored["snapshot"] == checkpoint["counts"] and restored["kept_local"] is False
    assert not [e for e in logs if e["log_level"] == "warning"]
    # Processing the messages after the checkpoint again counts each once.
    count(again, range(50, 200), times=3)
    assert contents(again) == {
        f"k{i:05d}": 1 if i < 50 else (4 if i < 100 else 3) for i in range(200)
    }
    again.close({})


def test_the_crash_without_the_fix_would_keep_the_overflowed_writes(tmp_path: Path) -> None:
    """What the restore undoes: RocksDB itself holds the writes the buffer wrote back."""
    stores = started(tmp_path, None, **SMALL_BUFFER)
    count(stores, range(100))
    commit(stores)
    count(stores, range(100), times=2)
    crash(stores)
    raw = started(tmp_path, {}, **SMALL_BUFFER)  # a checkpoint naming no snapshot: kept as is
    assert sum(contents(raw).values()) > 100
    raw.close({})


def test_a_clean_close_keeps_the_local_store_and_each_commit_keeps_one_snapshot(
    tmp_path: Path,
) -> None:
    stores = started(tmp_path, None, **SMALL_BUFFER)
    count(stores, range(100))
    first = commit(stores)
    count(stores, range(10))
    second = commit(stores)
    assert second != first
    assert commit(stores) == second  # nothing written since: the same snapshot
    assert snapshot_dirs(tmp_path) == [second["counts"]]  # the older one removed
    stores.close({})  # after the final commit: marked clean, with the snapshot it names
    marker = tmp_path / "state" / "counts" / "Partition_0" / CLEAN_MARKER
    assert marker.read_text() == second["counts"]

    with capture_logs() as logs:
        again = started(tmp_path, second, **SMALL_BUFFER)
    [restored] = [e for e in logs if e["event"] == "store_restored"]
    assert restored["kept_local"] is True and restored["snapshot"] is None
    assert sum(contents(again).values()) == 110
    again.close({})


def test_without_a_checkpoint_the_store_starts_empty(tmp_path: Path) -> None:
    stores = started(tmp_path, None)
    count(stores, range(100))
    commit(stores)
    stores.close({})  # even closed cleanly: no checkpoint covers what it holds
    again = started(tmp_path, None)
    assert contents(again) == {}
    assert snapshot_dirs(tmp_path) == []
    again.close({})


@pytest.mark.parametrize("how", ["no snapshot named", "snapshot not on this host"])
def test_a_checkpoint_without_a_usable_snapshot_keeps_the_store_and_warns(
    tmp_path: Path, how: str
) -> None:
    stores = started(tmp_path, None, **SMALL_BUFFER)
    count(stores, range(100))
    checkpoint = commit(stores)
    count(stores, range(100))
    crash(stores)
    if how == "no snapshot named":
        checkpoint = {}
    else:
        shutil.rmtree(tmp_path / "state" / "counts" / "Partition_0.snapshots")
    with capture_logs() as logs:
        again = started(tmp_path, checkpoint, **SMALL_BUFFER)
    # Kept as it is: with the writes after the checkpoint that reached RocksDB (not those
    # the buffer still held).
    assert 100 < sum(contents(again).values()) < 200
    [warning] = [e for e in logs if e["event"] == "store_kept_past_checkpoint"]
    assert warning["log_level"] == "warning" and warning["store"] == "counts"
    assert "processed again" in warning["consequence"]
    assert ("names no snapshot" in warning["reason"]) == (how == "no snapshot named")
    again.close({})


def test_a_task_whose_snapshot_is_on_another_host_starts_empty_and_says_so(
    tmp_path: Path,
) -> None:
    with capture_logs() as logs:
        stores = started(tmp_path, {"counts": "local.42-0badf00d"})
    assert contents(stores) == {}
    [warning] = [e for e in logs if e["event"] == "store_kept_past_checkpoint"]
    assert "not on this host" in warning["reason"]
    assert warning["consequence"].startswith("the store is empty")
    stores.close({})


def test_with_snapshots_off_nothing_is_snapshotted_and_a_crash_keeps_the_store(
    tmp_path: Path,
) -> None:
    stores = started(tmp_path, None, snapshots=False, **SMALL_BUFFER)
    count(stores, range(100))
    assert commit(stores) == {}
    count(stores, range(100))
    crash(stores)
    with capture_logs() as logs:
        again = started(tmp_path, {}, snapshots=False, **SMALL_BUFFER)
    total = sum(contents(again).values())
    assert 100 < total < 200
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "store_kept_past_checkpoint"
    ]
    assert snapshot_dirs(tmp_path) == []
    again.close({})
    # A clean close with snapshots off: kept, no warning.
    with capture_logs() as logs:
        kept = started(tmp_path, {}, snapshots=False)
    assert sum(contents(kept).values()) == total
    assert not [e for e in logs if e["log_level"] == "warning"]
    kept.close({})


def test_an_inmemory_store_without_changelog_takes_no_snapshot(tmp_path: Path) -> None:
    stores = started(tmp_path, None, factory="inmemory")
    count(stores, range(10))
    assert commit(stores) == {}
    stores.close({})


def test_local_snapshot_ids_go_through_the_codec_and_the_checkpoint_tool() -> None:
    ssp_counts = {SystemStream("files", "in"): 1}
    old = Checkpoint(
        {},
        ssp_counts,
        changelog_offsets={"logged": "120"},
        snapshots={"logged": "120-ab12cd34", "counts": "local.42-ab12cd34"},
        epoch=3,
    )
    _, decoded = decode_checkpoint(encode_checkpoint(TASK, old), "test")
    assert decoded.snapshots == old.snapshots
    assert snapshot_offset("120-ab12cd34") == "120"
    assert snapshot_offset("local.42-ab12cd34") is None
    with pytest.raises(ValueError):
        snapshot_offset("nodash")
    # --reset-stores drops the logged store's offsets and snapshot; a store without
    # changelog (named by the checkpoint, or by the job's configuration only: snapshots off)
    # gets the empty snapshot, from which the restart empties it.
    move = plan_task(TASK, old, {}, ssp_counts, reset_stores=True, unlogged=["unsnapped"])
    assert move.reset_stores == ("counts", "logged", "unsnapped")
    assert move.new.changelog_offsets == {}
    assert move.new.snapshots == {"counts": EMPTY, "unsnapped": EMPTY}
    assert is_empty(EMPTY) and is_local(EMPTY) and snapshot_offset(EMPTY) is None
    kept = plan_task(TASK, old, {}, ssp_counts, unlogged=["unsnapped"])
    assert kept.new.snapshots == old.snapshots and kept.reset_stores == ()


@pytest.mark.parametrize("closed", ["cleanly", "by a crash"])
def test_a_checkpoint_naming_the_empty_snapshot_empties_the_store(
    tmp_path: Path, closed: str
) -> None:
    """What ``samzapy checkpoint set --reset-stores`` writes for a store without changelog:
    the restart starts it empty, whatever its directory holds."""
    stores = started(tmp_path, None, **SMALL_BUFFER)
    count(stores, range(100))
    commit(stores)
    if closed == "cleanly":
        stores.close({})
    else:
        crash(stores)
    with capture_logs() as logs:
        again = started(tmp_path, {"counts": EMPTY}, **SMALL_BUFFER)
    assert contents(again) == {}
    assert snapshot_dirs(tmp_path) == []
    assert not [e for e in logs if e["log_level"] == "warning"]
    count(again, range(10))
    assert commit(again) != {"counts": EMPTY}  # the next commit names a snapshot of its own
    again.close({})


def test_a_snapshot_that_does_not_open_keeps_the_store_as_it_was_and_warns(
    tmp_path: Path,
) -> None:
    """A checkpoint's snapshot that this host has but that RocksDB cannot open (a damaged
    disk): the store is kept as the crash left it, as when the snapshot is missing, rather
    than replaced by the damaged copy (which failed every later start)."""
    stores = started(tmp_path, None, **SMALL_BUFFER)
    count(stores, range(10))
    checkpoint = commit(stores)
    count(stores, range(10))
    at_crash = contents(stores)
    crash(stores)
    root = tmp_path / "state" / "counts" / "Partition_0.snapshots" / checkpoint["counts"]
    [manifest] = root.glob("MANIFEST-*")
    manifest.write_bytes(b"garbage")

    with capture_logs() as logs:
        again = started(tmp_path, checkpoint, **SMALL_BUFFER)
    assert contents(again) == at_crash
    [kept] = [e for e in logs if e["event"] == "store_kept_past_checkpoint"]
    assert kept["reason"].startswith(f"the snapshot {checkpoint['counts']} could not be restored")
    crash(again)
    with capture_logs():
        third = started(tmp_path, checkpoint, **SMALL_BUFFER)  # and the next start too
    assert contents(third) == at_crash
    third.close({})
