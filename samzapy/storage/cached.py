"""A read cache of what a store's engine holds (``stores.<name>.object.cache.size``).

Samza's CachedStore, kept in serialized form (so a value a task mutates after ``put`` is not
mutated in the cache too): up to ``capacity`` entries, the least recently used evicted first.
It keeps what reads fetched from the engine (a key the engine does not have, as None) and what
was written to it.

It sits below the write buffer (``buffered.py``): a key written since the last commit is read
from the buffer and never reaches the cache, so the cache sees each key's first read after a
commit, and each key the buffer writes back, at most once per commit. Writes go through to
the engine at once, so the cache never holds a write of its own and evicting costs nothing
more than dropping the entry.

A cache much smaller than the working set would still cost a dict insert and an eviction per
read it misses, and save little. So it watches itself: once full, it counts its hits over
each window of ``window`` reads (``capacity``, at least 1,024), and when fewer than a quarter
hit, it empties itself and lets reads and writes pass for the next fifty windows, then tries
again. A cache that cannot hold the working set then costs what no cache costs, within the
one window in fifty-one that it tries.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence

from samzapy.storage.ports import StorageEngine

_MISSING = object()

#: Windows of reads a cache that hits too little lets pass before it tries again.
PASSING_WINDOWS = 50


class CachedStorageEngine(StorageEngine):
    """An LRU cache of up to ``capacity`` entries over ``inner``; writes go through."""

    def __init__(self, inner: StorageEngine, capacity: int) -> None:
        super().__init__(inner.store_name, inner.task_name)
        if capacity < 1:
            raise ValueError(f"a cache needs a capacity >= 1, got {capacity}")
        self.inner = inner
        self.capacity = capacity
        #: Key -> value (None: the key has no value), least recently used first.
        self._entries: OrderedDict[bytes, bytes | None] = OrderedDict()
        self._read = inner.get
        #: Reads the cache answered, and reads it passed to the engine (while admitting).
        self.hits = 0
        self.misses = 0
        self.window = max(capacity, 1024)
        #: Reads left in the current window, and the hits before it began.
        self._left = self.window
        self._hits_before = 0
        #: Reads left to let pass (0: reads and writes enter the cache).
        self._passing = 0

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def size(self) -> int:
        """Entries held."""
        return len(self._entries)

    # -- reads ----------------------------------------------------------------------------------

    @property
    def admitting(self) -> bool:
        """Whether reads and writes enter the cache (False while it lets them pass)."""
        return not self._passing

    def get(self, key: bytes) -> bytes | None:
        if self._passing:
            self._passing -= 1
            return self._read(key)
        entries = self._entries
        value = entries.get(key, _MISSING)
        if value is not _MISSING:
            entries.move_to_end(key)
            self.hits += 1
        else:
            self.misses += 1
            value = entries[key] = self._read(key)
            if len(entries) > self.capacity:
                entries.popitem(last=False)
        self._left -= 1
        if not self._left:
            self._review()
        return value  # type: ignore[return-value]

    def _review(self) -> None:
        """A window of reads ended: let the next fifty windows pass when a full cache had
        fewer than a quarter of them hit (module docstring)."""
        self._left = self.window
        hits, self._hits_before = self.hits - self._hits_before, self.hits
        if len(self._entries) >= self.capacity and hits * 4 < self.window:
            self._passing = PASSING_WINDOWS * self.window
            self._entries.clear()

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        if self._passing:
            return self.inner.get_many(keys)
        entries = self._entries
        missing = [key for key in keys if key not in entries]
        fetched = dict(zip(missing, self.inner.get_many(missing), strict=True)) if missing else {}
        found = []
        for key in keys:
            if key in fetched:
                value = fetched[key]
                entries[key] = value
            else:
                value = entries[key]
                entries.move_to_end(key)
            found.append(value)
        while len(entries) > self.capacity:
            entries.popitem(last=False)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return found

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.iterate(from_key, to_key)

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        self._remember(key, value)
        self.inner.put(key, value)

    def delete(self, key: bytes) -> None:
        self._remember(key, None)
        self.inner.delete(key)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        if self._passing:
            self.inner.write_batch(entries)
            return
        entries = list(entries)
        kept = self._entries
        # Only the last ``capacity`` entries would stay: the others only leave the cache.
        head = len(entries) - self.capacity
        for key, _ in entries[:head] if head > 0 else ():
            kept.pop(key, None)
        for key, value in entries[max(head, 0) :]:
            self._remember(key, value)
        self.inner.write_batch(entries)

    def _remember(self, key: bytes, value: bytes | None) -> None:
        if self._passing:
            return
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        if len(entries) > self.capacity:
            entries.popitem(last=False)

    # -- durability and life cycle --------------------------------------------------------------

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self._entries.clear()
        self.inner.close()

    def drop(self) -> None:
        """Forget every entry (after a failure, or before a restore writes under the cache)."""
        self._entries.clear()


__all__ = ["CachedStorageEngine"]
