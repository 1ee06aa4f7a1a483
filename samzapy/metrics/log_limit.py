"""Log lines limited per key: at most one per ``DROP_LOG_INTERVAL_S``, the next one saying how
many were held back (``not_logged``), while the metrics beside them count every one. The
container's drops are limited per partition (``container/drops.py``), the operators' refusals
per kind of line (``operators/refusals.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

#: Drops and refusals are logged at most once per key per interval.
DROP_LOG_INTERVAL_S = 60.0

K = TypeVar("K", bound=Hashable)


class LogLimit(Generic[K]):
    """Says when a line for a key is to be logged (``due``), by ``clock`` (seconds; tests set
    it), and how many were held back since the last one."""

    __slots__ = ("_logged_at", "_unlogged", "clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._logged_at: dict[K, float] = {}
        self._unlogged: dict[K, int] = {}

    def due(self, key: K) -> int | None:
        """None: not to be logged (counted for the next line); else the lines for ``key``
        that were not logged since the last one (its ``not_logged``)."""
        now = self.clock()
        last = self._logged_at.get(key)
        if last is not None and now - last < DROP_LOG_INTERVAL_S:
            self._unlogged[key] = self._unlogged.get(key, 0) + 1
            return None
        self._logged_at[key] = now
        return self._unlogged.pop(key, 0)


__all__ = ["DROP_LOG_INTERVAL_S", "LogLimit"]
