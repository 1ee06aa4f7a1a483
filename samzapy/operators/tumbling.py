"""Tumbling windows: panes of a fixed interval aligned to the epoch, with early and late
triggers (the window operator's common part is ``windows.py``).

A key's value in a pane is one entry of the window's store, ``T`` + the pane id (8 bytes,
big-endian, offset by 2**63) + the serialized key, so one pane is one range of the store. In
memory: the open panes' ids (and whether each has fired, kept for its allowed lateness) and
the triggers' state per pane and key: a count, the first and last message's processing times
(ms, on the container's clock) and whether a trigger that does not repeat has fired. A window
with triggers also keeps that state in its store, ``A`` + the same pane id and key, so a
restarted task's triggers go on where they were (their counts and times exact as of the last
checkpoint) and a time trigger that came due while the task was down fires at the first tick.
A time trigger's state also has a timer, in a heap by time, so the tick looks at the states
whose time came, not at every key's. The state and when a trigger is due for it are in
``trigger_state.py``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from samzapy.api.windows import FiringType, RepeatingTrigger, Trigger
from samzapy.operators.held_values import as_held, longest_accepted
from samzapy.operators.trigger_state import Armed, next_time, trigger_due
from samzapy.operators.window_plan import timed_trigger
from samzapy.operators.windows import (
    DEFAULT,
    EARLY,
    LATE,
    UNREADABLE,
    WindowOperator,
    take_pending,
)

_TUMBLING = b"T"
_ARMED = b"A"
_OFFSET = 2**63
_MISSING = object()


def _pane_prefix(pane: int, kind: bytes = _TUMBLING) -> bytes:
    """The start of ``pane``'s keys: its values (``T``), or its triggers' state (``A``)."""
    return kind + (pane + _OFFSET).to_bytes(8, "big")


class TumblingWindowOperator(WindowOperator):
    __slots__ = (
        "armed",
        "last_pane",
        "next_due",
        "panes",
        "plain",
        "time_triggered",
        "timers",
        "triggered",
    )

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        #: each open pane's id -> whether its DEFAULT pane fired (kept for lateness)
        self.panes: dict[int, bool] = {}
        self.next_due: int | None = None  # the earliest time something is due in ``panes``
        self.armed: dict[bytes, Armed] = {}
        #: The common case, which ``on_message`` runs in one method: an aggregator and no
        #: early trigger (a late message still takes ``message``'s way).
        self.plain = self.aggregator is not None and self.window.early_trigger is None
        window = self.window
        self.triggered = window.early_trigger is not None or window.late_trigger is not None
        #: Whether a trigger has a time in it, which the tick checks: counts fire as messages
        #: come, and walking every key's trigger state at each tick would only cost time.
        self.time_triggered = any(
            timed_trigger(t) for t in (window.early_trigger, window.late_trigger)
        )
        #: (when a time trigger may come due, its state's key): the tick looks at those whose
        #: time came, not at every key's (at most one live entry a state, ``Armed.scheduled``).
        self.timers: list[tuple[int, bytes]] = []
        #: The last pane's id and key prefix (None before the first: every int is a pane id,
        #: -1 that of a 1 ms window's messages at -1 ms).
        self.last_pane: tuple[int | None, bytes] = (None, b"")

    def on_message(self, message: Any) -> Any:
        """``WindowOperator.on_message`` and ``message``, in one method for the plain case:
        a read-modify-write of the key's value in its pane."""
        if not self.plain:
            return super().on_message(message)
        key_fn = self.key_fn
        if key_fn is None:
            key = None
        else:
            try:
                key = key_fn(message)
            except Exception as exc:
                raise self.failed(exc, "key function") from exc
        t = self.clock.t if self.event_time else self.now_ms()
        if t is None:
            t = self._time()  # raises: no event time
        size = self.size
        pane = t - t % size
        watermark = self.watermark
        if watermark is not None and pane + size <= watermark and self.event_time:
            return self._take(message, key, t)  # late
        last = self.last_pane
        if last[0] == pane:
            prefix = last[1]
        else:
            prefix = _pane_prefix(pane)
            self.last_pane = (pane, prefix)
        skey = prefix + self.kserde.to_bytes(key)
        store = self.store
        raw = store.get(skey)
        if raw is None:
            value = self.initial_value()
        else:
            try:
                value = self.vserde.from_bytes(raw)
            except Exception as exc:
                value = self.let_go(exc, skey, key, pane)  # a fresh pane's (or raises)
        try:
            value = self.aggregator(message, value)  # type: ignore[misc]
        except Exception as exc:
            raise self.failed(exc, "aggregator") from exc
        store.put(skey, self.vserde.to_bytes(value))
        if pane not in self.panes:
            self.panes[pane] = False
            end = pane + size
            if self.next_due is None or end < self.next_due:
                self.next_due = end
        return take_pending(self.pending) if self.pending else None

    def restore(self) -> None:
        fired = self.watermark
        panes = list(self._stored_panes())
        if self.triggered:
            # A trigger's state may outlive its pane's values (a discarding trigger that
            # fired and does not repeat): its pane is open too, so that it goes with it.
            gone: list[bytes] = []
            with self.store.range(_ARMED, bytes([_ARMED[0] + 1])) as entries:
                for entry in entries:
                    pane = int.from_bytes(entry.key[1:9], "big") - _OFFSET
                    skey = _TUMBLING + entry.key[1:]
                    try:
                        key = self.kserde.from_bytes(skey[9:])
                    except Exception as exc:  # its pane is dropped as it fires
                        assert self.refusals is not None  # (opened)
                        self.refusals.unreadable_trigger_key(exc, skey[9:], pane)
                        gone.append(entry.key)
                        continue
                    panes.append(pane)
                    armed = self.armed[skey] = Armed(key, pane)
                    armed.load(entry.value)
            if gone:
                self.store.delete_all(gone)
        for pane in panes:
            if pane not in self.panes:
                done = self.event_time and fired is not None and pane + self.size <= fired
                self.panes[pane] = bool(done)
        for skey, armed in self.armed.items():
            late = self.panes.get(armed.pane, False)
            self._set_timer(skey, armed, late)
        self._reschedule()

    def _stored_panes(self) -> Iterator[int]:
        """The ids of the panes with values in the store: one seek each, to the first key of
        the next pane after one is found, not a read of every key's value."""
        start, end = _TUMBLING, bytes([_TUMBLING[0] + 1])
        while True:
            with self.store.range(start, end) as entries:
                entry = next(entries, None)
                if entry is None:
                    return
                pane = int.from_bytes(entry.key[1:9], "big") - _OFFSET
            yield pane
            if pane + 1 + _OFFSET >= 2**64:  # the last pane id there is
                return
            start = _pane_prefix(pane + 1)

    def due(self, now: int) -> bool:
        return self.next_due is not None and now >= self.next_due

    def message(self, message: Any, key: Any, t: int) -> None:
        size = self.size
        pane = t - t % size
        end = pane + size
        watermark = self.watermark
        fired = self.event_time and watermark is not None and end <= watermark
        late_trigger = self.window.late_trigger
        if fired:
            assert watermark is not None
            if end + self.lateness <= watermark:
                self.too_late(message, pane, t)
                return
            if late_trigger is None and not self.accumulating:
                self.emit_pane(key, pane, end, self._add(message, None), LATE)
                return
        kbytes = self.kserde.to_bytes(key)
        skey = _pane_prefix(pane) + kbytes
        if fired and late_trigger is not None:
            armed = self.armed.get(skey)
            if armed is not None and armed.done:  # its one late firing is over
                self.too_late(message, pane, t, "its late trigger fired (and is not repeated)")
                return
        store = self.store
        held = self.held
        if held is not None and not fired:  # a list appended to, written back later
            message = as_held(self.vserde, message)
            value = held.held.get(skey, _MISSING)
            if value is _MISSING:
                raw = store.get(skey)
                value = None if raw is None else self.read_stored(skey, raw, key, pane)
            value = self._add(message, value)
            try:
                held.put(skey, value)
            except BaseException as exc:
                value.pop()  # the message, out of a held list again (``HeldValues.put``)
                if isinstance(exc, Exception) and held.trim_refused(skey):
                    return self.message(message, key, t)  # into what the pane keeps
                raise
            appended_to, raw = value, None
        else:
            if held is not None:
                held.settle(skey)  # the late pane sent now is not appended to after
            raw = store.get(skey)
            value = None if raw is None else self.read_stored(skey, raw, key, pane)
            value = self._add(message, value)
            encoded = self.vserde.to_bytes(value)
            if fired and late_trigger is None:
                # Accumulating: the whole value, sent before it is stored, so that a message
                # that fails downstream (and is dropped) leaves the pane as it was.
                self.emit_pane(key, pane, end, value, LATE)
            store.put(skey, encoded)
            appended_to = None
        if pane not in self.panes:
            # A window that had no message when the watermark passed its end is one that
            # fired (empty): it is kept for its lateness, and fires no DEFAULT pane now.
            self.panes[pane] = fired
            due = end + self.lateness if fired else end
            if self.next_due is None or due < self.next_due:
                self.next_due = due
        trigger = late_trigger if fired else self.window.early_trigger
        if trigger is None:  # (fired: its LATE pane went on, above)
            return
        try:
            self._count(skey, key, pane, trigger, LATE if fired else EARLY)
        except BaseException as exc:
            self._take_back(skey, appended_to, raw)
            if held is not None and isinstance(exc, Exception) and held.trim_refused(skey):
                return self.message(message, key, t)  # into what the pane keeps
            raise

    def _take_back(self, skey: bytes, appended_to: Any, raw: bytes | None) -> None:
        """The message just taken into ``skey``'s pane failed as its trigger fired (the serde
        refused the pane, or an operator after the window failed on it): the pane as before
        it, so that dropped (``task.drop.process.errors``) it is in no later pane.
        ``appended_to``: the held list it went into; else ``raw``, the entry it replaced."""
        store = self.store
        if appended_to is None:
            if raw is None:
                store.delete(skey)
            else:
                store.put(skey, raw)
            return
        appended_to.pop()
        held = self.held
        assert held is not None
        if held.held.get(skey) is appended_to:  # still held (not settled nor written back)
            if not appended_to:
                del held.held[skey]
        elif appended_to:
            store.put(skey, self.encode_held(appended_to))
        else:
            store.delete(skey)

    # -- triggers --------------------------------------------------------------------------------

    def _count(
        self, skey: bytes, key: Any, pane: int, trigger: Trigger, firing: FiringType
    ) -> None:
        armed = self.armed.get(skey)
        if armed is None:
            armed = self.armed[skey] = Armed(key, pane)
        if armed.done:
            return
        now = self.now_ms()
        counted = armed.count, armed.first, armed.last
        armed.count += 1
        if armed.first is None:
            armed.first = now
        armed.last = now
        if trigger_due(trigger, armed, now):
            try:
                self._trigger_fire(skey, armed, trigger, firing)
            except BaseException:  # not counted: its message is taken back (``_take_back``)
                armed.count, armed.first, armed.last = counted
                raise
        else:
            self.store.put(_ARMED + skey[1:], armed.to_bytes())
            if armed.scheduled is None:
                self._set_timer(skey, armed, firing is LATE)

    def _set_timer(self, skey: bytes, armed: Armed, late: bool) -> None:
        """A timer for ``armed``'s time trigger (the late one when its pane fired), if it
        has one and is not done."""
        trigger = self.window.late_trigger if late else self.window.early_trigger
        if not self.time_triggered or trigger is None or armed.done:
            return
        at = next_time(trigger, armed)
        if at is not None:
            heapq.heappush(self.timers, (at, skey))
            armed.scheduled = at

    def encode_held(self, value: Any) -> bytes:
        return self.vserde.to_bytes(value)  # type: ignore[no-any-return]

    def trim_held(self, skey: bytes, value: list[Any]) -> tuple[bytes | None, int]:
        """A held list the serde refused outside its messages' calls (``Refusals``): its
        first messages, as many as the serde accepts. Its pane's early trigger counts only
        what the pane still holds: the messages lost, the last, are the last it counted."""
        kept, data = longest_accepted(self.vserde.to_bytes, value)
        lost = len(value) - kept
        del value[kept:]
        self.uncount(skey, lost)
        return data, lost

    def uncount(self, skey: bytes, lost: int | None = None) -> None:
        armed = self.armed.get(skey)
        if armed is not None and armed.count:
            # The times are left when some are: the first message counted is still held, and
            # a time since the last one (not known apart from the lost ones') only comes later.
            armed.count = 0 if lost is None else max(0, armed.count - lost)
            if not armed.count:
                armed.first = armed.last = None
            self.store.put(_ARMED + skey[1:], armed.to_bytes())

    def _trigger_fire(
        self, skey: bytes, armed: Armed, trigger: Trigger, firing: FiringType, own: bool = True
    ) -> None:
        """``own``: as a message arrives, whose failure the serde refusing its pane is."""
        if self.held is not None:
            self.held.settle(skey, own)
        raw = self.store.get(skey)
        if raw is not None:
            if own:
                value = self.vserde.from_bytes(raw)
            else:
                value = self.read_pane(raw, armed.key, armed.pane)
            if value is not UNREADABLE:
                self.emit_pane(armed.key, armed.pane, armed.pane + self.size, value, firing)
            if not self.accumulating:
                self.store.delete(skey)
        armed.count = 0
        armed.first = armed.last = None
        armed.done = not isinstance(trigger, RepeatingTrigger)
        if armed.done:
            self.store.put(_ARMED + skey[1:], armed.to_bytes())
        else:
            self.store.delete(_ARMED + skey[1:])

    def timed_triggers(self) -> None:
        timers = self.timers
        if not timers:
            return
        now = self.now_ms()
        watermark = self.watermark
        while timers and timers[0][0] <= now:
            at, skey = heapq.heappop(timers)
            armed = self.armed.get(skey)
            if armed is None or armed.scheduled != at:
                continue  # let go with its pane, or one set for a state let go before
            armed.scheduled = None
            if armed.done:
                continue
            end = armed.pane + self.size
            late = self.event_time and watermark is not None and end <= watermark
            trigger = self.window.late_trigger if late else self.window.early_trigger
            if trigger is not None and trigger_due(trigger, armed, now):
                self._trigger_fire(skey, armed, trigger, LATE if late else EARLY, own=False)
            else:
                self._set_timer(skey, armed, late)  # a message since moved its time on

    def _disarm(self, pane: int) -> None:
        """Forget the triggers' state for ``pane`` (it fired, or its lateness ran out)."""
        if not self.triggered:
            return
        for skey in [skey for skey, armed in self.armed.items() if armed.pane == pane]:
            del self.armed[skey]
        start, end = _pane_prefix(pane, _ARMED), _pane_prefix(pane + 1, _ARMED)
        with self.store.range(start, end) as rows:
            stored = [entry.key for entry in rows]
        self.store.delete_all(stored)

    def _reschedule(self) -> None:
        due = None
        for pane, fired in self.panes.items():
            at = pane + self.size + (self.lateness if fired else 0)
            if due is None or at < due:
                due = at
        self.next_due = due

    def fire(self, now: int, final: bool = False) -> None:
        """Fire the panes that ended by ``now``, drop those past their lateness; all of them
        when ``final`` (end-of-stream)."""
        if not self.due(now) and not (final and self.panes):
            return
        self.write_back()
        store = self.store
        for pane in sorted(self.panes):
            end = pane + self.size
            fired = self.panes[pane]
            if not fired and (end <= now or final):
                prefix = _pane_prefix(pane)
                with store.range(prefix, _pane_prefix(pane + 1)) as entries:
                    found = [(e.key, e.value) for e in entries]
                for skey, raw in found:
                    key = self.read_key(skey[9:], pane)
                    value = UNREADABLE if key is UNREADABLE else self.read_pane(raw, key, pane)
                    if value is UNREADABLE:
                        store.delete(skey)  # dropped: not kept for its lateness either
                    else:
                        self.emit_pane(key, pane, end, value, DEFAULT)
                self._disarm(pane)
                keep = self.event_time and self.lateness > 0 and not final
                if keep and end + self.lateness > now:
                    self.panes[pane] = True
                    if not self.accumulating:
                        store.delete_all([skey for skey, _ in found])
                    continue
                store.delete_all([skey for skey, _ in found])
                del self.panes[pane]
            elif fired and (end + self.lateness <= now or final):
                prefix = _pane_prefix(pane)
                with store.range(prefix, _pane_prefix(pane + 1)) as entries:
                    stale = [(e.key, e.value) for e in entries]
                for skey, raw in stale:
                    armed = self.armed.get(skey)
                    # Late messages the late trigger still held: in discarding mode each
                    # entry is such.
                    if not self.accumulating or (armed is not None and armed.count):
                        key = self.read_key(skey[9:], pane)
                        if key is not UNREADABLE:
                            value = self.read_pane(raw, key, pane)
                            if value is not UNREADABLE:
                                self.emit_pane(key, pane, end, value, LATE)
                store.delete_all([skey for skey, _ in stale])
                self._disarm(pane)
                del self.panes[pane]
        self._reschedule()


__all__ = ["TumblingWindowOperator"]
