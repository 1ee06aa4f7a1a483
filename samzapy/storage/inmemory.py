"""The in-memory storage engine (``factory: inmemory``): a dict plus a lazily sorted key list.

Point reads and writes go to a dict and cost one hash lookup. Key order is needed only by
``iterate``, so the sorted key list is built on the first ``iterate`` and then kept up to date
lazily: writes only note which keys were added or removed since the last ``iterate``, and the
next ``iterate`` folds those notes in (one ``insort`` or ``del`` each for a few keys, one
merge-sort pass for many). A store that is only ever read and written by key never pays for
the order.

An iterator copies the slice of the key list it covers when it is created (a C-level copy of
references) and looks each value up as it reaches it: a key deleted meanwhile is skipped, a
value replaced meanwhile is returned as it is now, a key added meanwhile is not returned. So
writes while iterating never fail or repeat a key, as the port asks; they may be seen, as in
Samza's in-memory store (RocksDB iterators, by contrast, read a snapshot).

Nothing here outlives the process: ``persistent`` is False, and a restarted task starts empty
(its changelog, when it has one, restores it).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from samzapy.api.system import TaskName
from samzapy.storage.ports import StorageEngine, StoreFactory

# Up to this many keys added (or removed) since the last iterate are folded into the sorted
# list one by one (a memmove each); beyond it one sort pass over the whole list is cheaper.
_FOLD_ONE_BY_ONE = 32


class InMemoryStorageEngine(StorageEngine):
    """Bytes in a dict, with a lazily maintained sorted key list for ordered iteration.

    Invariant, once ``_indexed``: the dict's keys are ``(_keys - _removed) | _added``, with
    ``_removed`` a subset of ``_keys`` and ``_added`` disjoint from it.
    """

    persistent = False

    def __init__(self, store_name: str, task_name: TaskName) -> None:
        super().__init__(store_name, task_name)
        self._data: dict[bytes, bytes] = {}
        self._indexed = False
        self._keys: list[bytes] = []
        self._added: set[bytes] = set()
        self._removed: set[bytes] = set()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        get = self._data.get
        return [get(key) for key in keys]

    def put(self, key: bytes, value: bytes) -> None:
        data = self._data
        if self._indexed and key not in data:
            self._note_added(key)
        data[key] = value

    def delete(self, key: bytes) -> None:
        if self._data.pop(key, None) is not None and self._indexed:
            self._note_removed(key)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        put = self.put
        delete = self.delete
        for key, value in entries:
            if value is None:
                delete(key)
            else:
                put(key, value)

    def iterate(
        self, from_key: bytes | None, to_key: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        keys = self._sorted_keys()
        low = 0 if from_key is None else bisect_left(keys, from_key)
        high = len(keys) if to_key is None else bisect_left(keys, to_key)
        if low >= high:
            return iter(())
        return self._entries(keys[low:high])

    def flush(self) -> None:
        """Nothing to make durable: the entries live and die with the process."""

    def close(self) -> None:
        self._data = {}
        self._keys = []
        self._added = set()
        self._removed = set()
        self._indexed = False

    # -- the sorted key index --------------------------------------------------------------

    def _note_added(self, key: bytes) -> None:
        removed = self._removed
        if key in removed:
            removed.discard(key)  # still in _keys: only its deletion is undone
        else:
            self._added.add(key)

    def _note_removed(self, key: bytes) -> None:
        added = self._added
        if key in added:
            added.discard(key)  # never made it into _keys
        else:
            self._removed.add(key)

    def _sorted_keys(self) -> list[bytes]:
        """The key list, sorted and exactly the dict's keys."""
        if not self._indexed:
            self._keys = sorted(self._data)
            self._indexed = True
            return self._keys
        keys = self._keys
        removed = self._removed
        if removed:
            if len(removed) <= _FOLD_ONE_BY_ONE:
                for key in removed:
                    del keys[bisect_left(keys, key)]
            else:
                keys = self._keys = [key for key in keys if key not in removed]
            removed.clear()
        added = self._added
        if added:
            if len(added) <= _FOLD_ONE_BY_ONE:
                for key in added:
                    insort(keys, key)
            else:
                # Timsort finds the sorted run and the new tail and merges them.
                keys.extend(added)
                keys.sort()
            added.clear()
        return keys

    def _entries(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        get = self._data.get
        for key in keys:
            value = get(key)
            if value is not None:  # deleted since the iterator was created
                yield key, value


class InMemoryStoreFactory(StoreFactory):
    """``inmemory``: builds an InMemoryStorageEngine; the directory and options are unused."""

    persistent = False

    def create(
        self,
        store_name: str,
        task_name: TaskName,
        directory: Path,
        options: Mapping[str, Any],
        *,
        logged: bool = False,
    ) -> InMemoryStorageEngine:
        return InMemoryStorageEngine(store_name, task_name)


__all__ = ["InMemoryStorageEngine", "InMemoryStoreFactory"]
