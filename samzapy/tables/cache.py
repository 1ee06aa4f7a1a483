"""LruCache: the entries a caching table keeps, least recently used out first, each with a
time to live.

Pure and synchronous; the caching table (``samzapy.tables.caching``) decides when to look up,
fill, store and invalidate. The rules:

1. At most ``size`` entries. Storing one more evicts the least recently used entry, where a
   hit and a store count as a use.
2. An entry filled by a read lives ``read_ttl`` seconds, one stored by a write ``write_ttl``
   seconds (None: forever), counted from when it was filled or stored; a hit does not extend
   it. An expired entry is a miss, and is dropped when it is looked up.
3. ``None`` is never cached (the table caches found values only, as Samza's does), so ``get``
   returns None for a miss.
4. Time is ``clock()``, in seconds (``time.monotonic`` by default; tests pass their own). It
   is read only for entries that can expire.

Its keys are what the caching table gives it: key identities (``samzapy.api.keys``), so
that ``1`` and ``True`` are two entries where the table behind says so.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

_FOREVER = math.inf


class LruCache:
    """An LRU map of at most ``size`` entries with read and write ttls (module docstring)."""

    __slots__ = ("_clock", "_entries", "read_ttl_s", "size", "write_ttl_s")

    def __init__(
        self,
        size: int,
        *,
        read_ttl_s: float | None = None,
        write_ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cache holds at least one entry, got size={size!r}")
        self.size = size
        self.read_ttl_s = read_ttl_s
        self.write_ttl_s = write_ttl_s
        self._clock = clock
        self._entries: OrderedDict[Any, tuple[Any, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Any) -> bool:
        """Whether ``key`` has an entry, fresh or not (for tests and reports)."""
        return key in self._entries

    def get(self, key: Any) -> Any:
        """The value of ``key`` when its entry is fresh (a use: rule 1), else None (rule 3)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        value, expires = entry
        if expires != _FOREVER and expires <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def fill(self, key: Any, value: Any) -> None:
        """``value`` as read from the table: it lives ``read_ttl_s``."""
        self._put(key, value, self.read_ttl_s)

    def store(self, key: Any, value: Any) -> None:
        """``value`` as written through the cache: it lives ``write_ttl_s``."""
        self._put(key, value, self.write_ttl_s)

    def invalidate(self, key: Any) -> None:
        """Drop the entry of ``key``, if any."""
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def _put(self, key: Any, value: Any, ttl: float | None) -> None:
        if value is None:
            self._entries.pop(key, None)
            return
        expires = _FOREVER if ttl is None else self._clock() + ttl
        entries = self._entries
        entries[key] = (value, expires)
        entries.move_to_end(key)
        if len(entries) > self.size:
            entries.popitem(last=False)

    def __repr__(self) -> str:
        return f"LruCache({len(self._entries)} of {self.size})"


__all__ = ["LruCache"]
