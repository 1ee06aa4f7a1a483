"""The RocksDB storage engine (``stores.<name>.factory: rocksdb``): one Rdict per task store.

The store opens in rocksdict's raw mode, so keys and values are the serdes' bytes untouched and
iteration follows RocksDB's bytewise comparator, the order the port promises. Writes go through
RocksDB's write-ahead log; ``flush`` also writes the memtable out as a file and waits for it,
as Samza's RocksDB store does before a checkpoint.

Opening is where the operator's data can be wrong: a directory left corrupt by a crashed disk,
a path that is a file, a directory another process holds open or that the process may not
write. Each becomes a StoreError naming the store, the task and the directory, and saying what
to do: a store's changelog (when it has one) rebuilds a deleted directory, so deleting the
directory is the remedy for corruption.

Snapshots are RocksDB checkpoints: the memtable is written out, and the snapshot's directory
holds hard links to the store's table files (immutable, so shared at no cost) and copies of
the small files that describe them. Restoring one links the table files back the same way,
into a directory beside the store's that replaces it only once it opens: a damaged snapshot
leaves the store as it was.

Every rocksdict exception is translated here; nothing outside ``samzapy.storage.rocksdb`` sees
one (import-linter keeps ``rocksdict`` imports in this package).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from rocksdict import Checkpoint, Rdict, ReadOptions, WriteBatch, WriteOptions

from samzapy.api.errors import StoreError
from samzapy.api.system import TaskName
from samzapy.storage.ports import StorageEngine, StoreFactory, StoreLockedError
from samzapy.storage.rocksdb.options import RocksDBSettings

_DELETE_REMEDY = (
    "delete the directory to restore it from its changelog "
    "(a store without a changelog starts empty)"
)
#: What RocksDB's status says (and OSError's strerror) when the process may not write there.
_NOT_WRITABLE = ("Permission denied", "Read-only file system", "Operation not permitted")


def _remedy(reason: str) -> str:
    """What to do about a directory that would not open: deleting it does not help one the
    process may not write (a volume owned by another uid, a read-only root file system)."""
    if any(text in reason for text in _NOT_WRITABLE):
        return (
            f"this process (uid {os.getuid()}) cannot write there: make the directory "
            "writable for it, or set job.logged.store.base.dir to one it can write (a volume)"
        )
    return _DELETE_REMEDY


class RocksDBStorageEngine(StorageEngine):
    """One task's instance of a store in a RocksDB directory of its own."""

    persistent = True
    snapshots = True

    def __init__(
        self,
        store_name: str,
        task_name: TaskName,
        directory: Path,
        settings: RocksDBSettings | None = None,
        *,
        wal: bool = True,
    ) -> None:
        super().__init__(store_name, task_name)
        self.directory = Path(directory)
        self.settings = settings or RocksDBSettings()
        self._wal = wal
        self._closed = False
        self._db = self._open()

    def _open(self) -> Rdict:
        db = self._open_directory()
        if not self._wal:
            # A logged store: the changelog is its durability, and after a crash the container
            # rebuilds it from there (or from a snapshot), so RocksDB's own write-ahead log
            # would only cost time. (A clean close and a snapshot flush the memtables first.)
            write_options = WriteOptions()
            # rocksdict's stubs call it a method; at run time it is a property.
            write_options.disable_wal = True  # type: ignore[method-assign,assignment]
            db.set_write_options(write_options)
        return db

    def _open_directory(self) -> Rdict:
        where = f"{self.description} cannot open its RocksDB directory {str(self.directory)!r}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"{where}: {exc}; {_remedy(str(exc))}") from exc
        try:
            return Rdict(str(self.directory), self.settings.to_rocksdict())
        except Exception as exc:  # rocksdict raises plain Exception carrying RocksDB's status
            reason = str(exc)
            if "lock" in reason.lower():
                raise StoreLockedError(
                    f"{where}: {reason}; another store or process has this directory open: "
                    "stop it, or give each store and task a directory of its own"
                ) from exc
            raise StoreError(f"{where}: {reason}; {_remedy(reason)}") from exc

    def _failed(self, action: str, exc: Exception) -> NoReturn:
        if self._closed:
            raise StoreError(f"{self.description} is closed; cannot {action}") from exc
        raise StoreError(
            f"{self.description}: RocksDB {action} failed in {str(self.directory)!r}: {exc}"
        ) from exc

    # -- reads and writes --------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        try:
            return cast("bytes | None", self._db.get(key))
        except Exception as exc:
            self._failed("get", exc)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        try:
            return cast("list[bytes | None]", self._db.get(list(keys)))
        except Exception as exc:
            self._failed("multi-get", exc)

    def put(self, key: bytes, value: bytes) -> None:
        try:
            self._db.put(key, value)
        except Exception as exc:
            self._failed("put", exc)

    def delete(self, key: bytes) -> None:
        try:
            self._db.delete(key)
        except Exception as exc:
            self._failed("delete", exc)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        batch = WriteBatch(raw_mode=True)
        try:
            for key, value in entries:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            if batch.len():
                self._db.write(batch)
        except Exception as exc:
            self._failed("write batch", exc)

    def iterate(
        self, from_key: bytes | None, to_key: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        if from_key is not None and to_key is not None and from_key >= to_key:
            return iter(())
        read_options = ReadOptions()
        if to_key is not None:
            read_options.set_iterate_upper_bound(to_key)
        try:
            # A RocksDB iterator reads the snapshot of the moment it is created.
            items = self._db.items(from_key=from_key, read_opt=read_options)
        except Exception as exc:
            self._failed("iterator", exc)
        return self._entries(cast("Iterator[tuple[bytes, bytes]]", items), read_options)

    def _entries(
        self, items: Iterator[tuple[bytes, bytes]], read_options: ReadOptions
    ) -> Iterator[tuple[bytes, bytes]]:
        # read_options must outlive the iterator: RocksDB reads the upper bound from it, and
        # rocksdict does not keep it alive (a freed bound cuts the range short at random).
        try:
            yield from items
        except Exception as exc:
            self._failed("iteration", exc)

    # -- durability and life cycle ------------------------------------------------------------

    def flush(self) -> None:
        try:
            self._db.flush(wait=True)
        except Exception as exc:
            self._failed("flush", exc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._db.close()
        except Exception as exc:
            raise StoreError(
                f"{self.description}: closing RocksDB in {str(self.directory)!r} failed: {exc}"
            ) from exc

    def sequence(self) -> int | None:
        try:
            return int(self._db.latest_sequence_number())
        except Exception as exc:
            self._failed("sequence number", exc)

    def snapshot(self, directory: Path) -> None:
        try:
            Checkpoint(self._db).create_checkpoint(str(directory))
        except Exception as exc:
            self._failed(f"snapshot to {str(directory)!r}", exc)

    def restore_snapshot(self, directory: Path) -> None:
        """The snapshot is linked into a directory beside the store's and swapped in; if it
        cannot be linked or does not open (a damaged snapshot), the store's own directory is
        put back and reopened, entries untouched, before the StoreError is raised."""
        live = self.directory
        staged = live.with_name(live.name + ".restoring")
        replaced = live.with_name(live.name + ".replaced")
        failure = f"{self.description}: restoring the snapshot {str(directory)!r} failed"
        self.close()
        try:
            # Left by a run killed in the middle of a restore, if any.
            for leftover in (staged, replaced):
                shutil.rmtree(leftover, ignore_errors=True)
            staged.mkdir(parents=True)
            for source in Path(directory).iterdir():
                _link_or_copy(source, staged / source.name)
            live.rename(replaced)
            staged.rename(live)
        except OSError as exc:
            shutil.rmtree(staged, ignore_errors=True)
            if replaced.exists() and not live.exists():
                replaced.rename(live)
            self._reopen()
            raise StoreError(f"{failure}: {exc}") from exc
        try:
            self._reopen()
        except StoreError as exc:
            shutil.rmtree(live, ignore_errors=True)
            replaced.rename(live)
            self._reopen()
            raise StoreError(f"{failure}: {exc}") from exc
        shutil.rmtree(replaced, ignore_errors=True)

    def _reopen(self) -> None:
        self._db = self._open()
        self._closed = False

    def property_int(self, name: str) -> int | None:
        """A RocksDB integer property, e.g. ``rocksdb.block-cache-capacity``."""
        try:
            return self._db.property_int_value(name)
        except Exception as exc:
            self._failed(f"property {name!r}", exc)


def _link_or_copy(source: Path, target: Path) -> None:
    """A table file (``*.sst``, never changed once written) is linked; the files RocksDB
    rewrites or appends to (MANIFEST, CURRENT, OPTIONS, logs) are copied."""
    if source.suffix == ".sst":
        try:
            os.link(source, target)
            return
        except OSError:
            pass  # another file system, or no hard links: copy instead
    shutil.copy2(source, target)


class RocksDBStoreFactory(StoreFactory):
    """``rocksdb``: builds a RocksDBStorageEngine from the store's ``rocksdb.*`` options."""

    persistent = True

    def create(
        self,
        store_name: str,
        task_name: TaskName,
        directory: Path,
        options: Mapping[str, Any],
        *,
        logged: bool = False,
    ) -> RocksDBStorageEngine:
        settings = RocksDBSettings.from_options(store_name, options)
        return RocksDBStorageEngine(store_name, task_name, directory, settings, wal=not logged)


__all__ = ["RocksDBStorageEngine", "RocksDBStoreFactory"]
