"""A write cache in front of a store's engine (``stores.<name>.object.cache.size``).

Samza's CachedStore and Kafka Streams' record cache, kept in serialized form (so a value a
task mutates after ``put`` is not mutated in the cache too). A write stays in the cache,
marked dirty, and reads see it; the dirty entries are written back to the engine below (for a
logged store, ``LoggedStorageEngine``, which sends each to the changelog) as one batch:

1. at ``write_back``, which a commit calls before it reads how far the changelogs got (step 2
   of ``TaskInstance.commit``, through ``TaskStores.flush``);
2. when ``write.batch.size`` entries are dirty;
3. when the cache holds more than ``object.cache.size`` entries and the one to evict is dirty.

So a key written many times between two commits reaches the engine and the changelog once.
Besides the dirty entries the cache keeps what reads fetched from the engine (a key the engine
does not have, as None), and evicts the entries that entered it first. ``iterate``
writes the dirty entries back first, so the engine's order and snapshot cover them.

``close`` writes the dirty entries back before it closes the engine (a clean close keeps
every write). After a failure ``TaskStores`` drops a logged store's dirty entries instead: the
checkpoint does not cover them, and the store is rebuilt from its changelog.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from samzapy.storage.ports import StorageEngine

_MISSING = object()


class CachedStorageEngine(StorageEngine):
    """A write-back cache of up to ``capacity`` entries over ``inner``; ``write_batch_size``
    dirty entries (at most ``capacity``) are written back at once."""

    def __init__(self, inner: StorageEngine, capacity: int, write_batch_size: int) -> None:
        super().__init__(inner.store_name, inner.task_name)
        if not 1 <= write_batch_size <= capacity:
            raise ValueError(
                f"write_batch_size must be from 1 to the capacity {capacity}, "
                f"got {write_batch_size}"
            )
        self.inner = inner
        self.capacity = capacity
        self.write_batch_size = write_batch_size
        #: Key -> value (None: the key has no value), in the order they entered the cache.
        self._entries: dict[bytes, bytes | None] = {}
        #: The keys whose entry the engine does not have yet, in the order first written.
        self._dirty: dict[bytes, None] = {}
        #: Entries written back so far (the writes the cache saved: puts minus these).
        self.written_back = 0

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def dirty(self) -> int:
        """Entries written since the last write-back."""
        return len(self._dirty)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        value = self._entries.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[return-value]
        value = self.inner.get(key)
        self._entries[key] = value
        if len(self._entries) > self.capacity:
            self._evict()
        return value

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        entries = self._entries
        found: list[bytes | None] = []
        missing: list[bytes] = []
        for key in keys:
            value = entries.get(key, _MISSING)
            if value is _MISSING:
                missing.append(key)
                found.append(None)
            else:
                found.append(value)  # type: ignore[arg-type]
        if missing:
            fetched = dict(zip(missing, self.inner.get_many(missing), strict=True))
            found = [fetched.get(k, v) for k, v in zip(keys, found, strict=True)]
            for key, value in fetched.items():
                entries[key] = value
            if len(entries) > self.capacity:
                self._evict()
        return found

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self.write_back()
        return self.inner.iterate(from_key, to_key)

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        self._write(key, value)

    def delete(self, key: bytes) -> None:
        self._write(key, None)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self._write(key, value)

    def _write(self, key: bytes, value: bytes | None) -> None:
        entries = self._entries
        entries[key] = value
        dirty = self._dirty
        dirty[key] = None
        if len(dirty) >= self.write_batch_size:
            self.write_back()
        elif len(entries) > self.capacity:
            self._evict()

    def write_back(self) -> None:
        """Write the dirty entries to the engine below, in the order first written."""
        dirty = self._dirty
        if not dirty:
            return
        entries = self._entries
        self._dirty = {}
        self.written_back += len(dirty)
        self.inner.write_batch([(key, entries[key]) for key in dirty])

    def _evict(self) -> None:
        """Drop the oldest entries down to the capacity, after writing back the dirty ones
        if one of them is among those to drop."""
        entries = self._entries
        oldest = list(islice(entries, len(entries) - self.capacity))
        if any(key in self._dirty for key in oldest):
            self.write_back()
        for key in oldest:
            del entries[key]

    # -- durability and life cycle --------------------------------------------------------------

    def flush(self) -> None:
        self.write_back()
        self.inner.flush()

    def close(self) -> None:
        """Write the dirty entries back, then close the engine."""
        if self._entries or self._dirty:
            self.write_back()
            self._entries.clear()
        self.inner.close()

    def drop(self) -> None:
        """Forget every entry, dirty ones included (after a failure)."""
        self._entries.clear()
        self._dirty.clear()


__all__ = ["CachedStorageEngine"]
