"""CachingTable: a cache in front of a task's local or remote table (Samza's CachingTable).

Reads are served from an LRU cache (``samzapy.tables.cache``) while its entry is fresh; writes
go to the table behind it. The rules:

1. A read that hits a fresh entry returns it (a cache hit); any other read reads the table (a
   cache miss), unless rule 3 applies. A value found is cached for the read ttl; an absent
   key is not cached (as in Samza), so it is read from the table again next time.
2. ``get_all`` answers the hits from the cache and reads every miss in one ``get_all`` of the
   table.
3. Concurrent misses of one key share one read of the table (single flight): a read that
   misses while another read of the key is under way waits for that one instead of calling
   the table again. It counts as a hit, as it costs the table no call: ``cache-misses`` is
   the number of keys read from the table. A waiter that is cancelled does not cancel
   the shared read.
4. Writes go through to the table first. Then, write-through (the default), a put stores its
   value in the cache for the write ttl (default: the read ttl); with ``with_write_around()``
   it drops the key's entry instead. A delete always drops the entry, and so does a write
   that failed (the table's state for the key is unknown).
5. A write makes a read of the same key still under way stale: its result is not cached (the
   write's is), and later reads do not wait for it.
6. ``put(key, None)`` deletes, as every table's does.
7. A write made to the table behind the cache directly (the task's own instance of it, which
   a ``send_to`` or a function may write too, or a local table's store as the functions get
   it) drops the key's entry, as a delete through the cache does (``table_wrote``, which
   that table calls).

The cache, the reads under way and ``get_all`` tell keys apart by their identity
(``samzapy.api.keys``): over a local table, what its key serde writes of them (1, True
and 1.0 are three keys under ``json``; a list key is a key); over a remote table, their type
and value.

Over a local table every method, async or not, runs at once on the caller's thread, as the
local table's do. Over a remote table the async methods run on the event loop the table was
opened on, and the plain ones refuse to run on it (``samzapy.tables.bridge``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from functools import partial
from typing import Any

from samzapy.api.envelope import KV
from samzapy.api.keys import KeyIdentity, by_identity, found_map, unique
from samzapy.api.store import entry_pairs, key_list
from samzapy.api.tables import CachingTableDescriptor
from samzapy.tables.bridge import LoopBridge
from samzapy.tables.cache import LruCache
from samzapy.tables.local import not_a_pair, not_keys
from samzapy.tables.metrics import TableMetrics

# A read of the table under way: the values it found, by key identity.
_Load = asyncio.Task[dict[Any, Any]]


class CachingTable:
    """Table ``descriptor.table_id``: a cache of ``descriptor.cache_size`` entries in front of
    ``table``, this task's instance of ``descriptor.table``; ``clock`` (seconds, default
    ``time.monotonic``) ages the entries; ``owns_table`` False leaves opening and closing
    ``table`` to its owner. See the module docstring."""

    def __init__(
        self,
        descriptor: CachingTableDescriptor,
        table: Any,
        *,
        metrics: TableMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        owns_table: bool = True,
    ) -> None:
        self.table_id = descriptor.table_id
        self.descriptor = descriptor
        self.table = table
        #: Whether ``open`` and ``close`` open and close ``table`` too (False when the task
        #: has it as a table of its own, opened and closed as such).
        self.owns_table = owns_table
        self.metrics = metrics if metrics is not None else TableMetrics(self.table_id)
        read_ttl = None if descriptor.read_ttl_ms is None else descriptor.read_ttl_ms / 1000
        write_ttl = read_ttl if descriptor.write_ttl_ms is None else descriptor.write_ttl_ms / 1000
        self.cache = LruCache(
            descriptor.cache_size, read_ttl_s=read_ttl, write_ttl_s=write_ttl, clock=clock
        )
        self.write_around = descriptor.write_around
        #: Whether the plain methods run anywhere (over a local table) or only off the loop.
        self.sync_anywhere: bool = bool(getattr(table, "sync_anywhere", False))
        #: Reads under way, by key identity.
        self._loads: dict[Any, _Load] = {}
        #: The cache's and the reads' keys are identities (module docstring).
        self.key_identity = KeyIdentity.of_table(self.table_id, getattr(table, "key_serde", None))
        self._fast = self.key_identity.fast
        self._slow = self.key_identity.slow
        self._bridge = LoopBridge(self.table_id)

    def attach(self, context: Any) -> None:
        """Note the event loop, and attach the table behind the cache (if it owns it): the
        task attaches every table before it opens any (``samzapy.tables.functions``)."""
        self._bridge.open()
        attach = getattr(self.table, "attach", None)
        if self.owns_table and attach is not None:
            attach(context)

    async def open(self, context: Any) -> None:
        """Note the event loop, then open the table behind the cache (if it owns it)."""
        self._bridge.open()
        if self.owns_table:
            await self.table.open(context)

    @property
    def opened(self) -> bool:
        """Whether the table behind the cache, its own, was opened (the task's own table
        is the task's to close)."""
        return self.owns_table and bool(getattr(self.table, "opened", True))

    async def close(self) -> None:
        """Close the table behind the cache (if it owns it; else only flush it)."""
        if self.owns_table:
            await self.table.close()
        else:
            await self.table.flush_async()

    # -- reads ------------------------------------------------------------------------------------

    async def get_async(self, key: Any) -> Any:
        if self.sync_anywhere:
            return self.get(key)
        ident = key if type(key) in self._fast else self._slow(key)
        metrics = self.metrics
        metrics.gets += 1
        value = self.cache.get(ident)
        if value is not None:
            metrics.cache_hits += 1
            return value
        load = self._loads.get(ident)  # rule 3
        if load is None:
            metrics.cache_misses += 1
            load = self._start_load([ident], self._read_one(key, ident))
        else:
            metrics.cache_hits += 1
        found = await asyncio.shield(load)
        return found.get(ident)

    async def get_all_async(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        if self.sync_anywhere:
            return self.get_all(keys)
        keys = key_list(keys, not_keys(self.table_id, "get_all"))
        wanted, idents = unique(self.key_identity, keys)
        result, missing = self._lookup_all(wanted, idents)
        waits: dict[_Load, list[Any]] = {}
        unread: list[tuple[Any, Any]] = []
        for key, ident in missing:
            load = self._loads.get(ident)
            if load is None:
                unread.append((key, ident))
            else:
                waits.setdefault(load, []).append(ident)
        self.metrics.cache_hits += len(result) + len(missing) - len(unread)
        self.metrics.cache_misses += len(unread)
        if unread:
            unread_ids = [ident for _, ident in unread]
            read = self._read_many([key for key, _ in unread])
            waits[self._start_load(unread_ids, read)] = unread_ids
        for load, load_ids in waits.items():
            found = await asyncio.shield(load)
            for ident in load_ids:
                if ident in found:
                    result[ident] = found[ident]
        return self._found(wanted, idents, result)

    def _found(
        self, wanted: list[Any], idents: list[Any], result: dict[Any, Any]
    ) -> Mapping[Any, Any]:
        """``get_all``'s result: the values in ``result`` (by identity) of ``wanted``."""
        pairs = [(key, result[i]) for key, i in zip(wanted, idents, strict=True) if i in result]
        return found_map(self.key_identity, pairs)

    def _lookup_all(
        self, wanted: list[Any], idents: list[Any]
    ) -> tuple[dict[Any, Any], list[tuple[Any, Any]]]:
        """The fresh entries of ``wanted`` (by identity), and the keys that missed with their
        identities (``gets`` counted; the caller counts the hits and misses)."""
        self.metrics.gets += len(wanted)
        get = self.cache.get
        result: dict[Any, Any] = {}
        missing: list[tuple[Any, Any]] = []
        for key, ident in zip(wanted, idents, strict=True):
            value = get(ident)
            if value is None:
                missing.append((key, ident))
            else:
                result[ident] = value
        return result, missing

    def _start_load(self, idents: list[Any], read: Coroutine[Any, Any, dict[Any, Any]]) -> _Load:
        load = asyncio.get_running_loop().create_task(read)
        for ident in idents:
            self._loads[ident] = load
        load.add_done_callback(partial(self._loaded, idents))
        return load

    def _loaded(self, idents: list[Any], load: _Load) -> None:
        """Cache what ``load`` found for the keys no write made stale since (rule 5). Runs
        before the readers waiting for it resume, so they find the entries there."""
        loads = self._loads
        current = [ident for ident in idents if loads.get(ident) is load]
        for ident in current:
            del loads[ident]
        if load.cancelled() or load.exception() is not None:
            return  # exception() marks it seen: each waiter raises it, none may be left
        found = load.result()
        fill = self.cache.fill
        for ident in current:
            if ident in found:
                fill(ident, found[ident])

    async def _read_one(self, key: Any, ident: Any) -> dict[Any, Any]:
        value = await self.table.get_async(key)
        return {} if value is None else {ident: value}

    async def _read_many(self, keys: list[Any]) -> dict[Any, Any]:
        return by_identity(self.key_identity, await self.table.get_all_async(keys))

    # -- writes -----------------------------------------------------------------------------------

    async def put_async(self, key: Any, value: Any) -> None:
        if self.sync_anywhere:
            self.put(key, value)
            return
        if value is None:
            await self.delete_async(key)
            return
        self.metrics.puts += 1
        try:
            await self.table.put_async(key, value)
        except BaseException:
            self._forget(key)
            raise
        self._written(key, value)

    async def put_all_async(
        self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]
    ) -> None:
        if self.sync_anywhere:
            self.put_all(entries)
            return
        pairs = self._pairs(entries)
        try:
            await self.table.put_all_async(pairs)
        except BaseException:
            self._forget_all(key for key, _ in pairs)
            raise
        for key, value in pairs:
            self._written(key, value)

    async def delete_async(self, key: Any) -> None:
        if self.sync_anywhere:
            self.delete(key)
            return
        self.metrics.deletes += 1
        try:
            await self.table.delete_async(key)
        finally:
            self._forget(key)

    async def delete_all_async(self, keys: Iterable[Any]) -> None:
        if self.sync_anywhere:
            self.delete_all(keys)
            return
        keys = key_list(keys, not_keys(self.table_id, "delete_all"))
        self.metrics.deletes += len(keys)
        try:
            await self.table.delete_all_async(keys)
        finally:
            self._forget_all(keys)

    async def flush_async(self) -> None:
        await self.table.flush_async()

    def _pairs(
        self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]
    ) -> list[tuple[Any, Any]]:
        pairs: list[tuple[Any, Any]] = []
        for key, value in entry_pairs(entries, not_a_pair(self.table_id)):
            pairs.append((key, value))
            if value is None:
                self.metrics.deletes += 1
            else:
                self.metrics.puts += 1
        return pairs

    def _written(self, key: Any, value: Any) -> None:
        """Rule 4, after the table took the write."""
        if value is None or self.write_around:
            self._forget(key)
        else:
            ident = key if type(key) in self._fast else self._slow(key)
            self._loads.pop(ident, None)  # rule 5
            self.cache.store(ident, value)

    def _forget(self, key: Any) -> None:
        ident = key if type(key) in self._fast else self._slow(key)
        self._loads.pop(ident, None)  # rule 5
        self.cache.invalidate(ident)

    def _forget_all(self, keys: Iterable[Any]) -> None:
        for key in keys:
            self._forget(key)

    def table_wrote(self, keys: Iterable[Any]) -> None:
        """Rule 7: the table behind the cache took (or failed) a write of ``keys``."""
        self._forget_all(keys)

    # -- plain methods: at once over a local table, through the loop over a remote one -----------

    def get(self, key: Any) -> Any:
        if not self.sync_anywhere:
            return self._bridge.run("get", lambda: self.get_async(key))
        ident = key if type(key) in self._fast else self._slow(key)
        metrics = self.metrics
        metrics.gets += 1
        value = self.cache.get(ident)
        if value is not None:
            metrics.cache_hits += 1
            return value
        metrics.cache_misses += 1
        value = self.table.get(key)
        self.cache.fill(ident, value)
        return value

    def get_all(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        keys = key_list(keys, not_keys(self.table_id, "get_all"))
        wanted, idents = unique(self.key_identity, keys)
        if not self.sync_anywhere:
            found: Mapping[Any, Any] = self._bridge.run(
                "get_all", lambda: self.get_all_async(wanted)
            )
            return found
        result, missing = self._lookup_all(wanted, idents)
        self.metrics.cache_hits += len(result)
        self.metrics.cache_misses += len(missing)
        if missing:
            read = by_identity(self.key_identity, self.table.get_all([k for k, _ in missing]))
            for _, ident in missing:
                if ident in read:
                    result[ident] = read[ident]
                    self.cache.fill(ident, read[ident])
        return self._found(wanted, idents, result)

    def put(self, key: Any, value: Any) -> None:
        if not self.sync_anywhere:
            self._bridge.run("put", lambda: self.put_async(key, value))
            return
        if value is None:
            self.delete(key)
            return
        self.metrics.puts += 1
        try:
            self.table.put(key, value)
        except BaseException:
            self._forget(key)
            raise
        self._written(key, value)

    def put_all(self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]) -> None:
        if not self.sync_anywhere:
            listed = list(entry_pairs(entries, not_a_pair(self.table_id)))
            self._bridge.run("put_all", lambda: self.put_all_async(listed))
            return
        pairs = self._pairs(entries)
        try:
            self.table.put_all(pairs)
        except BaseException:
            self._forget_all(key for key, _ in pairs)
            raise
        for key, value in pairs:
            self._written(key, value)

    def delete(self, key: Any) -> None:
        if not self.sync_anywhere:
            self._bridge.run("delete", lambda: self.delete_async(key))
            return
        self.metrics.deletes += 1
        try:
            self.table.delete(key)
        finally:
            self._forget(key)

    def delete_all(self, keys: Iterable[Any]) -> None:
        keys = key_list(keys, not_keys(self.table_id, "delete_all"))
        if not self.sync_anywhere:
            self._bridge.run("delete_all", lambda: self.delete_all_async(keys))
            return
        self.metrics.deletes += len(keys)
        try:
            self.table.delete_all(keys)
        finally:
            self._forget_all(keys)

    def flush(self) -> None:
        if not self.sync_anywhere:
            self._bridge.run("flush", self.flush_async)
            return
        self.table.flush()

    def __repr__(self) -> str:
        return f"CachingTable({self.table_id!r}, {self.descriptor.describe()})"


__all__ = ["CachingTable"]
