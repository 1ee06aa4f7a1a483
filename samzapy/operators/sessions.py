"""Session windows: a key's messages less than the gap apart are one session, which ends a
gap after its last message; in event time a message between two sessions merges them (the
window operator's common part is ``windows.py``).

A key's open sessions are one entry of the window's store, ``S`` + the serialized key:
``[(start, last, value bytes), ...]``. In memory: a heap of (due time, key), one live entry per
key with open sessions (``due``), so memory is bounded by the keys with open sessions. Early
and late triggers are not supported on session windows (``samzapy plan`` refuses them).
"""

from __future__ import annotations

import heapq
import pickle
from typing import Any

from samzapy.operators.windows import DEFAULT, LATE, WindowOperator

_SESSION = b"S"


class SessionWindowOperator(WindowOperator):
    __slots__ = ("heap", "key_due")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.heap: list[tuple[int, bytes]] = []
        self.key_due: dict[bytes, int] = {}

    def restore(self) -> None:
        with self.store.range(_SESSION, _SESSION + b"\xff" * 9) as entries:
            for entry in entries:
                self._schedule_sessions(entry.key[1:], pickle.loads(entry.value))

    def due(self, now: int) -> bool:
        return bool(self.heap) and self.heap[0][0] <= now

    def message(self, message: Any, key: Any, t: int) -> None:
        gap = self.size
        watermark = self.watermark
        kbytes = self.kserde.to_bytes(key)
        skey = _SESSION + kbytes
        raw = self.store.get(skey)
        sessions: list[tuple[int, int, bytes]] = [] if raw is None else pickle.loads(raw)
        late = self.event_time and watermark is not None and t + gap <= watermark
        if late and not any(t < last + gap and t + gap > start for start, last, _ in sessions):
            # Its own session is complete already, and joins none still open.
            assert watermark is not None
            if t + gap + self.lateness <= watermark:
                self.too_late(message, t, t)
            else:  # a LATE pane of the message alone
                self.emit_pane(key, t, t + gap, self._add(message, None), LATE)
            return
        start, last, value, kept = t, t, None, []
        for s_start, s_last, s_value in sessions:
            if t < s_last + gap and t + gap > s_start:  # the message's [t, t+gap) overlaps
                start, last = min(start, s_start), max(last, s_last)
                value = self._merge(value, self.vserde.from_bytes(s_value))
            else:
                kept.append((s_start, s_last, s_value))
        value = self._add(message, value)
        kept.append((start, last, self.vserde.to_bytes(value)))
        kept.sort()
        self.store.put(skey, pickle.dumps(kept, 5))
        self._schedule_sessions(kbytes, kept)

    def _merge(self, a: Any, b: Any) -> Any:
        if a is None:
            return b
        if self.aggregator is None:
            return a + b
        if self.merger is None:
            raise self.failed(
                ValueError("two sessions merged and the window has no merger"), "merger"
            )
        try:
            return self.merger(a, b)
        except Exception as exc:
            raise self.failed(exc, "merger") from exc

    def _schedule_sessions(self, kbytes: bytes, sessions: list[tuple[int, int, bytes]]) -> None:
        if not sessions:
            return
        due = min(last for _, last, _ in sessions) + self.size
        known = self.key_due.get(kbytes)
        if known is None or due < known:
            self.key_due[kbytes] = due
            heapq.heappush(self.heap, (due, kbytes))

    def fire(self, now: int, final: bool = False) -> None:
        heap = self.heap
        while heap and heap[0][0] <= now:
            due, kbytes = heapq.heappop(heap)
            if self.key_due.get(kbytes) != due:
                continue  # a stale entry: the key's live one is in the heap too
            del self.key_due[kbytes]
            skey = _SESSION + kbytes
            raw = self.store.get(skey)
            if raw is None:
                continue
            key = self.kserde.from_bytes(kbytes)
            left = []
            for start, last, value in pickle.loads(raw):
                if last + self.size <= now:
                    self.emit_pane(
                        key, start, last + self.size, self.vserde.from_bytes(value), DEFAULT
                    )
                else:
                    left.append((start, last, value))
            if left:
                self.store.put(skey, pickle.dumps(left, 5))
                self._schedule_sessions(kbytes, left)
            else:
                self.store.delete(skey)


__all__ = ["SessionWindowOperator"]
