"""Session windows: a key's messages less than the gap apart are one session, which ends a
gap after its last message; in event time a message between two sessions merges them (the
window operator's common part is ``windows.py``).

A key's sessions are one entry of the window's store, ``S`` + the serialized key:
``[(start, last, value bytes, fired), ...]`` (an entry without ``fired``, as written before
it existed, is an open session). In event time with an allowed lateness, a session that fired
stays, ``fired``, until the watermark passes its end plus the lateness, as a tumbling pane
does: a late message that joins it fires a LATE pane at once (in accumulating mode of the
session's whole value, in discarding mode of the message alone) under the session's pane
id, and a message between it and an open session joins them (the fired one's value only in
accumulating mode: in discarding mode it was sent already). In memory: a heap of (due time,
key), one live entry per key with sessions, so memory is bounded by the keys with open or
kept sessions. Early and late triggers are not supported on session windows (``samzapy
plan`` refuses them).
"""

from __future__ import annotations

import heapq
import pickle
from typing import Any

from samzapy.operators.held_values import as_held, longest_accepted
from samzapy.operators.windows import DEFAULT, LATE, UNREADABLE, WindowOperator

_SESSION = b"S"
#: Above every session key, whatever its key's bytes (``range`` stops before it).
_AFTER_SESSIONS = b"T"


class SessionWindowOperator(WindowOperator):
    __slots__ = ("heap", "key_due")

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.heap: list[tuple[int, bytes]] = []
        self.key_due: dict[bytes, int] = {}

    def restore(self) -> None:
        with self.store.range(_SESSION, _AFTER_SESSIONS) as entries:
            for entry in entries:
                self._schedule_sessions(entry.key[1:], _sessions(entry.value))

    def due(self, now: int) -> bool:
        return bool(self.heap) and self.heap[0][0] <= now

    def message(self, message: Any, key: Any, t: int) -> None:
        gap = self.size
        watermark = self.watermark
        kbytes = self.kserde.to_bytes(key)
        skey = _SESSION + kbytes
        held = self.held
        if held is not None:  # no aggregator: the key's sessions held, their lists as objects
            sessions = held.held.get(skey)
            if sessions is None:
                raw = self.store.get(skey)
                sessions = [] if raw is None else self._decoded(raw, skey, key)
        else:
            raw = self.store.get(skey)
            sessions = [] if raw is None else _sessions(raw)
        joined = [s for s in sessions if t < s[1] + gap and t + gap > s[0]]
        late = self.event_time and watermark is not None and t + gap <= watermark
        if late and not joined:  # its own session is complete already, and joins none
            assert watermark is not None
            if t + gap + self.lateness <= watermark:
                self.too_late(message, t, t)
                return
            joined_fired = True
        else:
            joined_fired = bool(joined) and all(fired for *_, fired in joined)
        if held is not None:  # checked now, not when too late (above)
            kept_message = as_held(self.vserde, message)
        start, last, value = t, t, None
        for s_start, s_last, s_value, fired in joined:
            if self.accumulating or not fired:  # a fired one's value was sent (discarding)
                if not held:
                    try:
                        s_value = self.vserde.from_bytes(s_value)
                    except Exception as exc:  # let go (or raises): not joined, not kept
                        self.let_go(exc, skey, key, s_start)
                        continue
                value = self._merge(value, s_value)
            start, last = min(start, s_start), max(last, s_last)
        complete = late and joined_fired  # every session it joins fired: so does it, late
        if complete and held is not None and value is not None:
            # A held fired session's own list: the LATE pane gets a copy, so a failure after
            # it went on (task.drop.process.errors) leaves the session as it was.
            value = list(value)
        value = self._add(message if held is None or complete else kept_message, value)
        kept = [s for s in sessions if s not in joined]
        if held is not None and not complete:
            kept.append((start, last, value, False))
            kept.sort(key=_bounds)
            try:
                held.put(skey, kept)
            except BaseException as exc:
                value.pop()  # the message, out of a held list again (``HeldValues.put``)
                if isinstance(exc, Exception) and held.trim_refused(skey):
                    return self.message(message, key, t)  # into what the sessions keep
                raise
        else:
            # Serialized before the LATE pane goes on, which is read back from those bytes
            # as a DEFAULT pane is: what is stored is not what downstream does to the pane,
            # and a serde that refuses leaves what is held as it was.
            if held is not None:
                try:
                    kept = [(a, b, self.vserde.to_bytes(v), f) for a, b, v, f in kept]
                except Exception:  # another session, held, grew too large before it
                    if held.trim_refused(skey):
                        return self.message(message, key, t)
                    raise
            encoded = self.vserde.to_bytes(value)
            kept.append((start, last, encoded, complete))
            kept.sort()
            if complete:
                pane = self.vserde.from_bytes(encoded)
                self.emit_pane(key, start, last + gap, pane, LATE)
            self.store.put(skey, pickle.dumps(kept, 5))
            if held is not None:  # the LATE pane sent is not appended to after: stored now
                held.held.pop(skey, None)
        self._schedule_sessions(kbytes, kept)

    def _decoded(self, raw: bytes, skey: bytes, key: Any) -> list[tuple[int, int, Any, bool]]:
        """A key's stored sessions with their lists as objects (no aggregator: held); one the
        serde cannot read is let go (``let_go``, or the task fails)."""
        decoded = []
        for a, b, v, f in _sessions(raw):
            try:
                decoded.append((a, b, self.vserde.from_bytes(v), f))
            except Exception as exc:
                self.let_go(exc, skey, key, a)
        return decoded

    def encode_held(self, value: Any) -> bytes:
        to_bytes = self.vserde.to_bytes
        return pickle.dumps([(a, b, to_bytes(v), f) for a, b, v, f in value], 5)

    def trim_held(self, skey: bytes, value: Any) -> tuple[bytes | None, int]:
        """A key's held sessions, one of whose lists the serde refused outside its messages'
        calls (``Refusals``): each such list keeps its first messages, as many as the serde
        accepts (a session left with none is let go)."""
        to_bytes = self.vserde.to_bytes
        rows, lost = [], 0
        for start, last, messages, fired in value:
            try:
                data = to_bytes(messages)
            except Exception:
                kept, data = longest_accepted(to_bytes, messages)
                lost += len(messages) - kept
                del messages[kept:]
                if data is None:
                    continue
            rows.append((start, last, data, fired))
        return (pickle.dumps(rows, 5) if rows else None), lost

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

    def _due(self, last: int, fired: bool) -> int:
        """When a session fires (open) or is let go (fired: the allowed lateness passed)."""
        return last + self.size + (self.lateness if fired else 0)

    def _schedule_sessions(
        self, kbytes: bytes, sessions: list[tuple[int, int, bytes, bool]]
    ) -> None:
        if not sessions:
            return
        due = min(self._due(last, fired) for _, last, _, fired in sessions)
        known = self.key_due.get(kbytes)
        if known is None or due < known:
            self.key_due[kbytes] = due
            heapq.heappush(self.heap, (due, kbytes))

    def fire(self, now: int, final: bool = False) -> None:
        heap = self.heap
        # A fired session is kept for late messages: in event time, with an allowed lateness.
        keep = self.event_time and self.lateness > 0 and not final
        while heap and heap[0][0] <= now:
            due, kbytes = heapq.heappop(heap)
            if self.key_due.get(kbytes) != due:
                continue  # a stale entry: the key's live one is in the heap too
            del self.key_due[kbytes]
            skey = _SESSION + kbytes
            if self.held is not None:
                self.held.settle(skey, own=False)
            raw = self.store.get(skey)
            if raw is None:
                continue
            key: Any = UNREADABLE  # read as a session fires (again if it could not be)
            left = []
            for start, last, value, fired in _sessions(raw):
                if fired:
                    if keep and self._due(last, True) > now:
                        left.append((start, last, value, True))
                elif last + self.size <= now:
                    end = last + self.size
                    if key is UNREADABLE:
                        key = self.read_key(kbytes, start)
                    read = UNREADABLE if key is UNREADABLE else self.read_pane(value, key, start)
                    if read is UNREADABLE:
                        continue  # dropped: not kept for its lateness either
                    self.emit_pane(key, start, end, read, DEFAULT)
                    if keep and self._due(last, True) > now:
                        left.append((start, last, value, True))
                else:
                    left.append((start, last, value, False))
            if left:
                self.store.put(skey, pickle.dumps(left, 5))
                self._schedule_sessions(kbytes, left)
            else:
                self.store.delete(skey)


def _bounds(session: tuple[int, int, Any, bool]) -> tuple[int, int]:
    return session[0], session[1]


def _sessions(raw: bytes) -> list[tuple[int, int, bytes, bool]]:
    """A key's sessions as stored (one written without ``fired`` is open)."""
    return [s if len(s) == 4 else (*s, False) for s in pickle.loads(raw)]


__all__ = ["SessionWindowOperator"]
