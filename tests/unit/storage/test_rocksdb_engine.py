"""The RocksDB engine: opening bad directories, options applied and checked, failures translated."""

from __future__ import annotations

import errno
import gc
import os
import re
from pathlib import Path

import pytest

from samzapy.api.errors import ConfigError, StoreError
from samzapy.api.system import TaskName
from samzapy.storage.ports import StoreLockedError
from samzapy.storage.rocksdb import RocksDBSettings, RocksDBStorageEngine, RocksDBStoreFactory

TASK = TaskName.for_partition(2)
WHO = r"store 'counts' \(task 'Partition 2'\)"
DELETE_IT = r"delete the directory to restore it from its changelog"


def open_engine(directory: Path, **options: object) -> RocksDBStorageEngine:
    return RocksDBStoreFactory().create("counts", TASK, directory, options)


def written_store(directory: Path) -> None:
    engine = open_engine(directory)
    for i in range(100):
        engine.put(b"k%03d" % i, b"v" * 100)
    engine.flush()
    engine.close()


def cannot_open(directory: Path) -> str:
    return rf"^{WHO} cannot open its RocksDB directory {re.escape(repr(str(directory)))}: "


def test_missing_directory_is_created_empty(tmp_path: Path) -> None:
    directory = tmp_path / "state" / "counts" / "Partition_2"
    engine = open_engine(directory)
    assert list(engine.iterate(None, None)) == []
    assert (directory / "CURRENT").is_file()
    engine.close()


def test_garbage_in_current_names_store_task_and_directory(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    written_store(directory)
    (directory / "CURRENT").write_text("garbage")
    with pytest.raises(StoreError, match=cannot_open(directory) + r"Corruption: .*" + DELETE_IT):
        open_engine(directory)


def test_garbage_manifest_names_store_task_and_directory(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    written_store(directory)
    manifests = list(directory.glob("MANIFEST-*"))
    assert manifests
    for manifest in manifests:
        manifest.write_bytes(bytes(range(256)) * 3)
    with pytest.raises(StoreError, match=cannot_open(directory) + r".*" + DELETE_IT) as caught:
        open_engine(directory)
    assert caught.value.__cause__ is not None


def test_a_file_where_the_directory_should_be(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    directory.write_text("not a directory")
    with pytest.raises(StoreError, match=cannot_open(directory) + r".*File exists.*" + DELETE_IT):
        open_engine(directory)


def test_a_directory_open_twice_names_the_lock(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    first = open_engine(directory)
    with pytest.raises(
        StoreLockedError, match=cannot_open(directory) + r".*lock.*another store or process"
    ):
        open_engine(directory)
    first.close()
    open_engine(directory).close()  # free again once the first is closed


def read_options_file(directory: Path) -> str:
    newest = max(directory.glob("OPTIONS-*"), key=lambda path: path.name)
    return newest.read_text()


@pytest.mark.parametrize(
    ("compression", "written"),
    [
        ("none", "kNoCompression"),
        ("snappy", "kSnappyCompression"),
        ("lz4", "kLZ4Compression"),
        ("zstd", "kZSTD"),
    ],
)
def test_options_are_applied(tmp_path: Path, compression: str, written: str) -> None:
    directory = tmp_path / compression
    engine = open_engine(
        directory,
        **{
            "rocksdb.block.cache.size.bytes": 3_000_000,
            "rocksdb.write.buffer.size.bytes": "5000000",
            "rocksdb.compression": compression.upper(),
        },
    )
    assert engine.settings == RocksDBSettings(3_000_000, 5_000_000, compression)
    assert engine.property_int("rocksdb.block-cache-capacity") == 3_000_000
    options_file = read_options_file(directory)
    assert re.search(r"^\s*write_buffer_size=5000000$", options_file, re.MULTILINE)
    assert re.search(rf"^\s*compression={written}$", options_file, re.MULTILINE)
    engine.close()


def test_default_options(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "db", factory="rocksdb", **{"key.serde": "string"})
    assert engine.settings == RocksDBSettings(16 * 1024 * 1024, 16 * 1024 * 1024, "snappy")
    assert engine.property_int("rocksdb.block-cache-capacity") == 16 * 1024 * 1024
    options_file = read_options_file(tmp_path / "db")
    assert re.search(r"^\s*compression=kSnappyCompression$", options_file, re.MULTILINE)
    engine.close()


SIZE = "must be an integer number of bytes"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("rocksdb.compression", "gzip", "must be one of none, snappy, lz4, zstd, got 'gzip'"),
        ("rocksdb.compression", 3, "must be one of none, snappy, lz4, zstd, got 3"),
        ("rocksdb.block.cache.size.bytes", -1, f"{SIZE} >= 0, got -1"),
        ("rocksdb.block.cache.size.bytes", "64MB", f"{SIZE} >= 0, got '64MB'"),
        ("rocksdb.write.buffer.size.bytes", 0, f"{SIZE} >= 1, got 0"),
        ("rocksdb.write.buffer.size.bytes", True, f"{SIZE} >= 1, got True"),
        (
            "rocksdb.block.size.bytes",
            4096,
            "is not a RocksDB option samzapy knows; known: "
            "stores.counts.rocksdb.block.cache.size.bytes, "
            "stores.counts.rocksdb.write.buffer.size.bytes, stores.counts.rocksdb.compression",
        ),
    ],
)
def test_bad_options_name_the_full_key(
    tmp_path: Path, key: str, value: object, message: str
) -> None:
    full_key = f"stores.counts.{key}"
    with pytest.raises(ConfigError, match=f"^{re.escape(f'{full_key} {message}')}$") as caught:
        open_engine(tmp_path / "db", **{key: value})
    assert caught.value.key == full_key
    assert not (tmp_path / "db").exists()  # nothing opened or created


def test_every_bad_option_is_named_at_once(tmp_path: Path) -> None:
    options = {
        "rocksdb.bogus": 1,
        "rocksdb.compression": "zzz",
        "rocksdb.write.buffer.size.bytes": 0,
    }
    with pytest.raises(ConfigError) as caught:
        open_engine(tmp_path / "db", **options)
    assert [p.split(" ")[0] for p in caught.value.problems] == [
        "stores.counts.rocksdb.bogus",
        "stores.counts.rocksdb.write.buffer.size.bytes",
        "stores.counts.rocksdb.compression",
    ]
    assert caught.value.key == "stores.counts.rocksdb.bogus"


def test_calls_after_close_name_the_store(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "db")
    engine.put(b"a", b"1")
    engine.close()
    engine.close()
    with pytest.raises(StoreError, match=rf"^{WHO} is closed; cannot get"):
        engine.get(b"a")
    with pytest.raises(StoreError, match=rf"^{WHO} is closed; cannot put"):
        engine.put(b"a", b"2")
    with pytest.raises(StoreError, match=rf"^{WHO} is closed; cannot write batch"):
        engine.write_batch([(b"a", None)])


def test_write_batch_and_get_many(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "db")
    engine.write_batch([(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3"), (b"b", b"22")])
    assert engine.get_many([b"a", b"b", b"c", b"d"]) == [None, b"22", b"3", None]
    assert engine.get_many([]) == []
    engine.write_batch([])
    engine.close()


def test_range_bounds_survive_garbage_collection(tmp_path: Path) -> None:
    # RocksDB reads an iterator's upper bound from its ReadOptions while iterating; the engine
    # must keep them alive, or ranges end early once the memory is reused.
    engine = open_engine(tmp_path / "db")
    engine.write_batch((b"key-%06d" % i, b"v") for i in range(20_000))
    for start in range(0, 20_000, 401):  # 50 ranges: each gc.collect walks the whole heap
        iterator = engine.iterate(b"key-%06d" % start, b"key-%06d" % (start + 5))
        gc.collect()
        _churn = [bytes([i % 256]) * 16 for i in range(2_000)]
        assert [key for key, _ in iterator] == [
            b"key-%06d" % i for i in range(start, min(start + 5, 20_000))
        ]
    engine.close()


def test_a_snapshot_that_does_not_open_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """Restoring a corrupt snapshot fails naming it, and the store keeps its entries and stays
    open (the local copy may be all a store without changelog has)."""
    engine = open_engine(tmp_path / "counts" / "Partition_2")
    engine.put(b"a", b"1")
    snapshot = tmp_path / "snapshot"
    engine.snapshot(snapshot)
    engine.put(b"b", b"2")
    [manifest] = snapshot.glob("MANIFEST-*")
    manifest.write_bytes(b"garbage")
    with pytest.raises(StoreError, match=rf"^{WHO}: restoring the snapshot .*snapshot"):
        engine.restore_snapshot(snapshot)
    assert list(engine.iterate(None, None)) == [(b"a", b"1"), (b"b", b"2")]
    engine.put(b"c", b"3")
    engine.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts", "snapshot"]
    assert [p.name for p in (tmp_path / "counts").iterdir()] == ["Partition_2"]
    again = open_engine(tmp_path / "counts" / "Partition_2")
    assert [k for k, _ in again.iterate(None, None)] == [b"a", b"b", b"c"]
    again.close()


def test_restoring_a_snapshot_replaces_every_entry(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "counts" / "Partition_2")
    engine.put(b"a", b"1")
    engine.snapshot(tmp_path / "snapshot")
    engine.put(b"b", b"2")
    engine.restore_snapshot(tmp_path / "snapshot")
    assert list(engine.iterate(None, None)) == [(b"a", b"1")]
    engine.close()
    assert [p.name for p in (tmp_path / "counts").iterdir()] == ["Partition_2"]


@pytest.mark.parametrize(
    ("code", "reason"),
    [(errno.EACCES, "Permission denied"), (errno.EROFS, "Read-only file system")],
)
def test_a_directory_it_may_not_write_says_so_rather_than_to_delete_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, reason: str
) -> None:
    """A state directory the process cannot write (a volume not owned by its uid, the
    default ./state under a read-only root file system) is not fixed by deleting it."""
    directory = tmp_path / "state" / "counts" / "Partition_2"

    def refused(self: Path, *args: object, **kwargs: object) -> None:
        raise OSError(code, reason, str(self))

    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(StoreError, match=cannot_open(directory) + rf".*{reason}") as caught:
        open_engine(directory)
    message = str(caught.value)
    assert "delete the directory" not in message
    assert f"uid {os.getuid()}" in message
    assert "job.logged.store.base.dir" in message
