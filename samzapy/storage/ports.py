"""The store port: StorageEngine (one task's store, at the level of bytes) and StoreFactory.

An engine keeps ``bytes`` keys and ``bytes`` values ordered by the keys' bytes (unsigned,
lexicographic: RocksDB's default comparator, and Python's own ``bytes`` ordering). It knows
nothing of serdes, iterator lifetimes or changelogs; SerializedKeyValueStore adds the first two
on top of any engine, the per-task store manager the third.

What an engine promises (each bullet is checked through ``tests/contract/test_store_contract.py``):

- ``get`` and ``iterate`` see every write made before them, flushed or not.
- ``write_batch`` applies its entries in order, a later entry for a key winning.
- ``iterate`` yields ``(key, value)`` pairs in key order, ``from_key`` included and ``to_key``
  excluded; writes made while it is being consumed never make it fail or repeat a key.
- ``flush`` makes the writes so far survive ``close`` and a new engine over the same directory
  (when ``persistent``), and ``close`` is idempotent.
- An engine's own failures (an unreadable directory, a disk error) are StoreErrors naming the
  store and the task; a directory another store or process holds open, a StoreLockedError.
- An engine with ``snapshots`` writes, with ``snapshot``, a copy of every entry so far that
  later writes leave untouched, and ``restore_snapshot`` replaces its entries with a
  snapshot's, leaving the snapshot as it was (so it can be restored again); a snapshot it
  cannot restore (damaged) is a StoreError that leaves the engine open with its entries.

Engines are synchronous and used from the event loop's thread only: a store belongs to one task,
and a task's callbacks never run at the same time as each other on the loop. One exception: a
commit calls ``flush`` from a thread before a snapshot, while nothing else uses the engine but
for reading its metrics (``snapshots.py``), so an engine with ``snapshots`` must allow that.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from samzapy.api.errors import StoreError
from samzapy.api.system import TaskName


class StoreLockedError(StoreError):
    """A persistent store's directory is held open by another store or process (an old
    owner of the task that is paused, not dead, on a state directory containers share)."""


class StorageEngine(ABC):
    """One task's instance of one store, keeping bytes in key order."""

    #: True when the entries outlive the process (RocksDB); False for in-memory engines.
    persistent: ClassVar[bool] = False
    #: True when the engine can ``snapshot`` its entries into a directory (RocksDB).
    snapshots: ClassVar[bool] = False

    def __init__(self, store_name: str, task_name: TaskName) -> None:
        self.store_name = store_name
        self.task_name = task_name

    @property
    def description(self) -> str:
        """``store 'name' (task 'Partition 0')``: how messages about this engine start."""
        return f"store {self.store_name!r} (task {str(self.task_name)!r})"

    @abstractmethod
    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, or None."""

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys``, position by position, None where a key has no value."""
        get = self.get
        return [get(key) for key in keys]

    @abstractmethod
    def put(self, key: bytes, value: bytes) -> None:
        """Stores ``value`` under ``key``."""

    @abstractmethod
    def delete(self, key: bytes) -> None:
        """Removes ``key``'s entry, if any."""

    @abstractmethod
    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Applies ``(key, value)`` entries in order; a value None deletes the key."""

    @abstractmethod
    def iterate(
        self, from_key: bytes | None, to_key: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        """The entries with ``from_key <= key < to_key`` in byte order; a None bound is open."""

    @abstractmethod
    def flush(self) -> None:
        """Makes the writes so far durable; a no-op for an engine that is not persistent."""

    @abstractmethod
    def close(self) -> None:
        """Releases the engine (files, memory); closing it again does nothing."""

    def sequence(self) -> int | None:
        """A number that grows with every write and only then (RocksDB's latest sequence
        number), so that a commit can tell a store without changelog has not changed since
        its last snapshot; None: the engine does not know one."""
        return None

    def snapshot(self, directory: Path) -> None:
        """Writes a copy of every entry so far, flushed or not, to ``directory`` (which must
        not exist; its parent must); later writes to the engine leave the copy untouched."""
        raise StoreError(f"{self.description} cannot take snapshots")

    def restore_snapshot(self, directory: Path) -> None:
        """Replaces every entry with those of the snapshot in ``directory``, which is left as
        it was; the engine stays open. StoreError when the snapshot cannot be restored: the
        entries are then as they were."""
        raise StoreError(f"{self.description} cannot restore snapshots")


class StoreFactory(ABC):
    """Builds the engine of one store for one task (``stores.<name>.factory``).

    A ``module:Class`` factory named in the config is instantiated with no arguments.
    """

    #: True when the engines it builds keep their entries in ``directory`` across restarts.
    persistent: ClassVar[bool] = False

    @abstractmethod
    def create(
        self,
        store_name: str,
        task_name: TaskName,
        directory: Path,
        options: Mapping[str, Any],
        *,
        logged: bool = False,
    ) -> StorageEngine:
        """The engine of store ``store_name`` for ``task_name``.

        ``logged``: the store has a changelog, which is where its durability comes from (the
        container rebuilds the local copy from it after a crash), so the engine may skip its
        own write-ahead log.

        ``directory`` is where the task's instance of the store lives (created when missing;
        ignored by engines that are not persistent). ``options`` are the store's config keys
        with the ``stores.<name>.`` prefix removed (``factory``, ``key.serde``,
        ``rocksdb.compression``...). Invalid options raise ConfigError naming the full key; a
        store that cannot be opened raises StoreError naming the store, task and directory.
        """


__all__ = ["StorageEngine", "StoreFactory", "StoreLockedError"]
