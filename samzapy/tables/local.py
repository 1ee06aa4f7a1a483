"""LocalTable: a table kept in one of the task's key-value stores (in-memory or RocksDB).

The table is a thin view of store ``<table_id>`` of the task, with Samza's table semantics on
top of the store's contract (``samzapy.api.store``):

1. ``put(key, None)`` deletes the key (a store refuses a None value), and so does an entry
   ``(key, None)`` of ``put_all``. ``put_all`` applies its entries in order: a run of values
   goes to the store's ``put_all`` (one batch), a run of Nones to its ``delete_all``, so
   ``[(k, 1), (k, None)]`` leaves ``k`` absent and ``[(k, None), (k, 1)]`` leaves 1.
2. ``get_all`` is the store's: absent keys left out, each key once by what the key serde
   writes of it, and a ``KeyedValues`` for keys that are not dict keys of their own (a list,
   or 1 and True under ``json``; ``samzapy.api.keys``).
3. A store never blocks for long, so every method works anywhere, on the event loop or off
   it, and each ``*_async`` coroutine just calls its plain twin.
4. ``flush`` flushes the store; the container flushes it before each checkpoint anyway.
5. A cache in front of this same instance (``caches``: a caching table of the task over it)
   drops its entries of the keys each write changes, so that a write made to the table
   directly (not through the cache) is seen through the cache too.
6. So does a write made to the table's store (``context.get_store(table_id)``): with a cache
   in front of the table, the task gets ``store_for_task()``, a ``StoreBehindCaches`` whose
   writes drop the caches' entries of their keys (its reads are the store's own methods);
   without one, the store itself, its writes paying nothing for this.

The store's errors (StoreError naming the store, the task and the key) pass through as they
are. Reads, writes and deletions are counted per key in ``metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from samzapy.api.envelope import KV
from samzapy.api.errors import TableError
from samzapy.api.keys import KeyIdentity
from samzapy.api.store import KeyValueStore, entry_pairs, key_list
from samzapy.tables.metrics import TableMetrics


def not_a_pair(table_id: str) -> Callable[[Any], TableError]:
    """What ``entry_pairs`` raises for an entry of table ``table_id``'s ``put_all`` that is
    no pair: a TableError naming the table."""

    def refuse(entry: Any) -> TableError:
        return TableError(
            f"table {table_id!r}: put_all expects (key, value) entries, got {entry!r}",
            table_id=table_id,
        )

    return refuse


def not_keys(table_id: str, operation: str) -> Callable[[Any], TableError]:
    """What ``key_list`` raises for the keys of table ``table_id``'s ``get_all`` or
    ``delete_all`` (``operation``) that are no collection of keys (a str, say): a
    TableError naming the table."""

    def refuse(keys: Any) -> TableError:
        return TableError(
            f"table {table_id!r}: {operation} takes keys (a list, a set...), got {keys!r:.80}: "
            "give one key as [key]",
            table_id=table_id,
        )

    return refuse


class CachedBehind:
    """A table caches of the task may sit in front of (a local or a remote one): it tells
    them of each write it takes, so that they drop their entries of the keys written."""

    def __init__(self) -> None:
        #: The caching tables in front of this instance.
        self.caches: list[Any] = []

    def _changed(self, keys: Iterable[Any]) -> None:
        """The caches in front of the table drop their entries of ``keys``."""
        for cache in self.caches:
            cache.table_wrote(keys)


class StoreBehindCaches:
    """``store`` as the task gets it when caches sit in front of its table (step 6 of the
    module docstring): reads and iterators are the store's own methods; each write, done or
    failed, then calls ``changed(keys)``, which drops the caches' entries of ``keys``. Any
    other attribute (``key_serde``, ``store_name``...) is the store's."""

    def __init__(
        self, store: KeyValueStore[Any, Any], changed: Callable[[Iterable[Any]], None]
    ) -> None:
        self._store = store
        self._changed = changed
        self.get = store.get
        self.get_all = store.get_all
        self.range = store.range
        self.all = store.all
        self.flush = store.flush

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put(self, key: Any, value: Any) -> None:
        try:
            self._store.put(key, value)
        finally:
            self._changed((key,))

    def put_all(self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]) -> None:
        listed = list(entries.items()) if isinstance(entries, Mapping) else list(entries)
        try:
            self._store.put_all(listed)  # the store's checks and errors, entries read once
        finally:
            self._changed(_entry_keys(listed))

    def delete(self, key: Any) -> None:
        try:
            self._store.delete(key)
        finally:
            self._changed((key,))

    def delete_all(self, keys: Iterable[Any]) -> None:
        listed = (
            keys if isinstance(keys, str | bytes) or not isinstance(keys, Iterable) else list(keys)
        )
        try:
            self._store.delete_all(listed)  # refuses a str, bytes or non-iterable: its error
        finally:
            if isinstance(listed, list):
                self._changed(listed)

    def __repr__(self) -> str:
        return f"StoreBehindCaches({self._store!r})"


def _entry_keys(entries: Sequence[Any]) -> list[Any]:
    """The keys of those of a store's ``put_all`` entries that are pairs (the store refused
    the others, writing nothing)."""
    keys: list[Any] = []
    for entry in entries:
        if isinstance(entry, str | bytes):
            continue
        try:
            key, _ = entry
        except (TypeError, ValueError):
            continue
        keys.append(key)
    return keys


class LocalTable(CachedBehind):
    """Table ``table_id`` over ``store``, a task's KeyValueStore (see the module docstring)."""

    #: The plain methods run on any thread, the event loop's included (step 3).
    sync_anywhere = True

    def __init__(
        self,
        table_id: str,
        store: KeyValueStore[Any, Any],
        *,
        metrics: TableMetrics | None = None,
    ) -> None:
        super().__init__()  # the caches in front of it (step 5)
        self.table_id = table_id
        self.store = store
        self.metrics = metrics if metrics is not None else TableMetrics(table_id)
        #: What makes two keys one: what the store's key serde writes of them (a cache in
        #: front of the table reads it too).
        self.key_serde: Any = getattr(store, "key_serde", None)
        self.key_identity = KeyIdentity.of_table(table_id, self.key_serde)
        self._store_for_task: StoreBehindCaches | None = None

    def store_for_task(self) -> KeyValueStore[Any, Any]:
        """What ``context.get_store(table_id)`` gives the task (step 6): the store, or with
        caches in front of the table, a view of it whose writes drop their entries."""
        if not self.caches:
            return self.store
        if self._store_for_task is None:
            self._store_for_task = StoreBehindCaches(self.store, self._changed)
        return self._store_for_task

    # -- life cycle: the store is the container's, opened before and closed after the table --

    async def open(self, context: Any) -> None:
        """Nothing to do: the container opened the store already."""

    async def close(self) -> None:
        """Nothing to do: the container flushes and closes the store."""

    # -- reads ------------------------------------------------------------------------------------

    def get(self, key: Any) -> Any:
        self.metrics.gets += 1
        return self.store.get(key)

    def get_all(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        keys = key_list(keys, not_keys(self.table_id, "get_all"))
        self.metrics.gets += len(keys)
        return self.store.get_all(keys)  # step 2

    async def get_async(self, key: Any) -> Any:
        return self.get(key)

    async def get_all_async(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        return self.get_all(keys)

    # -- writes -----------------------------------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.delete(key)
            return
        self.metrics.puts += 1
        try:
            self.store.put(key, value)
        finally:
            if self.caches:
                self._changed((key,))

    def put_all(self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]) -> None:
        # Runs of values and runs of deletions, in order (step 1 of the module docstring),
        # of entries all read first: one that is no pair leaves the table as it was.
        pairs = list(entry_pairs(entries, not_a_pair(self.table_id)))
        run: list[Any] = []
        deleting = False
        for key, value in pairs:
            if (value is None) != deleting and run:
                self._apply(run, deleting)
                run = []
            deleting = value is None
            run.append(key if deleting else (key, value))
        if run:
            self._apply(run, deleting)

    def _apply(self, run: list[Any], deleting: bool) -> None:
        if deleting:
            self.delete_all(run)
        else:
            self.metrics.puts += len(run)
            try:
                self.store.put_all(run)
            finally:
                if self.caches:
                    self._changed([key for key, _ in run])

    def delete(self, key: Any) -> None:
        self.metrics.deletes += 1
        try:
            self.store.delete(key)
        finally:
            if self.caches:
                self._changed((key,))

    def delete_all(self, keys: Iterable[Any]) -> None:
        keys = key_list(keys, not_keys(self.table_id, "delete_all"))
        self.metrics.deletes += len(keys)
        try:
            self.store.delete_all(keys)
        finally:
            if self.caches:
                self._changed(keys)

    def flush(self) -> None:
        self.store.flush()

    async def put_async(self, key: Any, value: Any) -> None:
        self.put(key, value)

    async def put_all_async(
        self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]
    ) -> None:
        self.put_all(entries)

    async def delete_async(self, key: Any) -> None:
        self.delete(key)

    async def delete_all_async(self, keys: Iterable[Any]) -> None:
        self.delete_all(keys)

    async def flush_async(self) -> None:
        self.flush()

    def __repr__(self) -> str:
        return f"LocalTable({self.table_id!r})"


__all__ = ["CachedBehind", "LocalTable", "StoreBehindCaches", "not_a_pair", "not_keys"]
