"""The stream-stream join (Samza's PartialJoinOperatorImpl, both sides).

Each side keeps its latest message per key in its store (``<op_id>-L``, ``<op_id>-R``), as 8
bytes of time then the message's serialized bytes. A message joins the other side's message
of its key when their times are at most ``ttl`` apart; ``apply`` always gets the first
stream's message first.

- Processing time: the time a message arrived.
- Event time (every input carries watermarks): the message's event time; a side keeps the
  message with the latest event time per key (an out-of-order older one still joins, but
  does not replace it), a message whose time the watermark already passed is late and
  dropped (as in Flink's interval join), and the result goes on with the later of the two
  times (the message keeps its own in the operators after it on other branches).

Each side's first message is checked to come back from its serde as the type it went in:
a ``KV`` kept with a serde for plain values (``json`` gives back a list) fails the join, as
``apply`` would get a ``KV`` or a list depending on which side came first.

A message whose result goes on is kept once the operators after the join took it, and taken
back out when what they still owe fails: one whose processing fails (and that
``task.drop.process.errors`` drops) leaves nothing behind, its side holding what it held.

A stored message its side's serde cannot read back (a serde changed since, say) fails the task
as a message of its key comes from the other side, naming the store, the key and the serde;
under ``task.drop.process.errors`` it is let go once instead (``refusals.JoinRefusals``:
logged, counted), and the message joins as if the other side held nothing for its key.

A message whose key is None joins nothing and is not kept. What expired (older than the ttl;
event time: the watermark passed its time by more than the ttl) never joins, and is deleted
by a sweep that looks at two entries per entry written (at least ``SWEEP_ENTRIES``) at each
tick, so nothing about the stores is kept in memory and a restart reads nothing back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from samzapy.api.descriptors import KVSerde
from samzapy.api.envelope import KV
from samzapy.operators.awaiting import awaits_argument
from samzapy.operators.event_time import message_time, wall_ms
from samzapy.operators.impl import OperatorImpl
from samzapy.operators.refusals import JoinRefusals
from samzapy.operators.state_serdes import state_serde

#: Entries a join's sweep looks at per tick (``task.window.ms``) at least, and per entry
#: written since the last tick: the sweep keeps up with the writes at about one store read
#: each, and goes on slowly when nothing is written.
SWEEP_ENTRIES = 100
SWEEP_PER_WRITE = 2
#: Above every key of a store (a serialized key of 1,024 bytes of 0xff would not be swept).
_END = b"\xff" * 1024


class _KVPacked:
    """A ``KVSerde`` as one serde of ``KV`` messages: the key's length (4 bytes), the key's
    bytes, the value's bytes."""

    __slots__ = ("key", "value")

    def __init__(self, key: Any, value: Any) -> None:
        self.key, self.value = key, value

    def to_bytes(self, message: Any) -> bytes:
        kb: bytes = self.key.to_bytes(message.key)
        vb: bytes = self.value.to_bytes(message.value)
        return len(kb).to_bytes(4, "big") + kb + vb

    def from_bytes(self, data: bytes) -> KV:
        n = int.from_bytes(data[:4], "big")
        return KV(self.key.from_bytes(data[4 : 4 + n]), self.value.from_bytes(data[4 + n :]))


def message_serde(serde: Any, config: Any) -> Any:
    """One side's message serde of a join (a ``KVSerde``: both parts, packed in one)."""
    if isinstance(serde, KVSerde):
        return _KVPacked(
            state_serde(serde.key_serde, config), state_serde(serde.value_serde, config)
        )
    return state_serde(serde, config)


class JoinSide(OperatorImpl):
    """One input of a stream-stream join: its messages go to the join as that side's."""

    kind = "join"
    __slots__ = ("join", "left")

    def __init__(self, join: JoinOperator, left: bool) -> None:
        super().__init__(join.op_id)
        self.join = join
        self.left = left

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        return self._take(message, False)

    def timed(self, message: Any) -> Awaitable[Any] | None:
        return self._take(message, True)

    def _take(self, message: Any, timed: bool) -> Awaitable[Any] | None:
        """``message`` into the join, its result on through the operators after it (timed
        through each when ``timed``); the message is kept on its side once they took the
        result (``JoinOperator.keep``), so that one they failed on, dropped under
        ``task.drop.process.errors``, leaves nothing behind."""
        join = self.join
        clock = join.clock
        before = None if clock is None else clock.t
        try:
            result = join.take(message, self.left)
            if result is None:
                return None
            try:
                pending = join.timed_after([result]) if timed else join.emit(result)
            except BaseException:
                join.owed = None
                raise
            return join.keep(pending)
        finally:
            if clock is not None:  # the result's time is not the message's, after it
                clock.t = before

    def transform(self, message: Any) -> list[Any]:
        result = self.join.take(message, self.left)
        if result is None:
            return []
        self.join.keep(None)
        return [result]


class JoinOperator(OperatorImpl):
    """A stream-stream join of one task (see the module docstring)."""

    kind = "join"
    counts_out = True
    __slots__ = (
        "apply",
        "clock",
        "cursor",
        "event_time",
        "first_key",
        "horizon",
        "kserde",
        "late",
        "left",
        "now_ms",
        "owed",
        "pass_floor",
        "pass_min",
        "refusals",
        "right",
        "second_key",
        "serdes",
        "stores",
        "ttl",
        "unchecked",
        "vserdes",
        "watermark",
        "written",
    )

    def __init__(self, op_id: str, join_fn: Any, serdes: tuple[Any, Any, Any], ttl_ms: int):
        super().__init__(op_id)
        self.apply = join_fn.apply
        self.first_key = join_fn.get_first_key
        self.second_key = join_fn.get_second_key
        self.serdes = serdes
        self.ttl = ttl_ms
        self.event_time = False
        self.clock: Any = None
        self.now_ms: Callable[[], int] = wall_ms  # processing time, as a window's
        self.watermark: int | None = None
        #: event time: messages that came after the watermark passed their time, dropped
        self.late = 0
        self.left = JoinSide(self, True)
        self.right = JoinSide(self, False)
        self.upstream = [self.left, self.right]
        self.stores: tuple[Any, Any] = (None, None)
        self.kserde: Any = None
        self.vserdes: tuple[Any, Any] = (None, None)
        #: What becomes of a stored message its serde cannot read (``open``).
        self.refusals: JoinRefusals | None = None
        #: The sides whose first message was not checked to come back from its serde yet
        #: (a ``KVSerde``'s and the default serde's give a ``KV`` back: no check).
        self.unchecked = [
            serde is not None and not isinstance(serde, KVSerde) for serde in serdes[1:]
        ]
        #: where the sweep of expired entries goes on: a side, and the key after the last
        #: one it looked at (None: the side's first)
        self.cursor: tuple[int, bytes | None] = (0, None)
        self.written = 0  # entries written since the last tick
        #: The entry the message whose result goes on is to keep once it went (``keep``):
        #: its side's store, the key's bytes, the entry, and what it replaces.
        self.owed: tuple[Any, bytes, bytes, bytes | None] | None = None
        #: no entry kept is older than this (None: not known); a pass's floor and earliest
        self.horizon: int | None = None
        self.pass_floor: int | None = None
        self.pass_min: int | None = None

    def open(self, context: Any) -> None:
        self.stores = (
            context.get_store(f"{self.op_id}-L"),
            context.get_store(f"{self.op_id}-R"),
        )
        key_serde, first, second = self.serdes
        self.kserde = state_serde(key_serde, context.config)
        self.vserdes = (
            message_serde(first, context.config),
            message_serde(second, context.config),
        )
        self.refusals = JoinRefusals(self, context)

    def _now(self) -> int:
        return message_time(self, self.event_time, self.clock)

    def take(self, message: Any, left: bool) -> Any:
        """Join ``message`` with the other side's message of its key: the result or None. The
        message is kept on its side now when there is no result, else once the operators
        after the join took it (``keep``): one whose processing fails keeps nothing."""
        side = 0 if left else 1
        try:
            key = (self.first_key if left else self.second_key)(message)
        except Exception as exc:
            raise self.failed(exc, "get_first_key" if left else "get_second_key") from exc
        if key is None:
            return None
        t = self._now()
        watermark = self.watermark
        if watermark is not None and t < watermark:  # set in event time only
            self.late += 1  # as Flink's interval join
            return None
        try:
            kb = self.kserde.to_bytes(key)
            mine = self.vserdes[side].to_bytes(message)
        except Exception as exc:
            raise self.failed(exc, "key or message serde") from exc
        if self.unchecked[side]:
            self._check_serde(message, mine, side)
        store = self.stores[side]
        held = None
        entry: bytes | None = t.to_bytes(8, "big", signed=True) + mine
        if self.event_time:
            held = store.get(kb)
            if held is not None and int.from_bytes(held[:8], "big", signed=True) > t:
                entry = None  # an older message: it joins, and the newer one stays
        result = self._join(message, side, key, kb, t)
        if result is None:
            if entry is not None:
                store.put(kb, entry)
                self.written += 1
            return None
        if entry is not None:
            self.owed = (store, kb, entry, held)
        return result

    def _join(self, message: Any, side: int, key: Any, kb: bytes, t: int) -> Any:
        """``message`` of ``side`` (its ``key``, whose bytes are ``kb``, its time ``t``) joined
        with the other side's message of its key: the result, or None."""
        other_store = self.stores[1 - side]
        other = other_store.get(kb)
        if other is None:
            return None
        t_other = int.from_bytes(other[:8], "big", signed=True)
        if abs(t - t_other) > self.ttl:
            return None
        try:
            other_message = self.vserdes[1 - side].from_bytes(other[8:])
        except Exception as exc:
            self._let_go(exc, 1 - side, key)
            other_store.delete(kb)
            return None
        try:
            if side == 0:
                result = self.apply(message, other_message)
            else:
                result = self.apply(other_message, message)
        except Exception as exc:
            raise self.failed(exc) from exc
        if result is None:
            return None
        self.out += 1
        if self.event_time and t_other > t:
            self.clock.t = t_other
        return result

    def _let_go(self, error: Exception, side: int, key: Any) -> None:
        """The serde of ``side`` cannot read (``error``) the message it keeps for ``key`` as a
        message of the other side comes: let go once under ``task.drop.process.errors``
        (logged, counted: ``refusals.py``), the message joining nothing, or the task fails.
        Failing the message instead failed each later one of that key on the same entry."""
        assert self.refusals is not None  # (opened)
        try:
            self.refusals.unreadable_stored(error, key, side)
        except Exception as exc:
            raise self.failed(exc, "message serde") from exc

    def keep(self, pending: Awaitable[Any] | None) -> Awaitable[Any] | None:
        """The message whose result the operators after the join took is kept on its side
        (``take``); ``pending``: what they still owe, which, when it fails, takes the message
        back out, its side holding again what it held before it."""
        owed, self.owed = self.owed, None
        if owed is None:
            return pending
        store, kb, entry, held = owed
        if pending is not None and held is None and not self.event_time:
            held = store.get(kb)
        store.put(kb, entry)
        self.written += 1
        if pending is None:
            return None
        return _undone_on_failure(pending, store, kb, entry, held)

    def _check_serde(self, message: Any, data: bytes, side: int) -> None:
        """A side's first message: a ``KV`` must come back from its serde as a ``KV``."""
        self.unchecked[side] = False
        if type(message) is not KV:
            return
        try:
            back = self.vserdes[side].from_bytes(data)
        except Exception as exc:
            raise self.failed(exc, "message serde") from exc
        if type(back) is KV:
            return
        which = "first" if side == 0 else "second"
        error = TypeError(
            f"the {which} stream's messages are KVs, and its message serde gives them back "
            f"as {type(back).__name__}s: give the join a KVSerde(key_serde, value_serde) for "
            "a stream of KVs (or None, the default serde)"
        )
        raise self.failed(error, "message serde") from error

    def sweep(self, before: int, budget: int, floor: int | None = None) -> int:
        """Look at up to ``budget`` kept entries, from where the last sweep stopped, and drop
        those whose time is before ``before``; how many it dropped. A full pass over both
        sides takes (entries / budget) ticks; what expired and is not swept yet never joins
        (``take`` compares the times), so the sweep only bounds the stores' size.

        ``floor``: no entry written from now on has a time below it (processing time: now;
        event time: the watermark, as later messages are dropped). A pass that ends knows
        that nothing kept is older than the earliest time it kept or its floor: the
        ``horizon`` below which no sweep is needed."""
        dropped = 0
        side, start = self.cursor
        if side == 0 and start is None:  # a new pass
            self.pass_floor, self.pass_min = floor, None
        pass_min = self.pass_min
        for _ in range(2):
            store = self.stores[side]
            expired = []
            finished = True
            with store.all() if start is None else store.range(start, _END) as entries:
                for entry in entries:
                    t = int.from_bytes(entry.value[:8], "big", signed=True)
                    if t < before:
                        expired.append(entry.key)
                    elif pass_min is None or t < pass_min:
                        pass_min = t
                    budget -= 1
                    if budget <= 0:
                        start, finished = entry.key + b"\x00", False
                        break
            if expired:
                store.delete_all(expired)
                dropped += len(expired)
            if not finished:
                break
            side, start = 1 - side, None
            if side == 0:  # both sides done: a new pass when one is due
                floor = self.pass_floor
                if floor is not None:
                    self.horizon = floor if pass_min is None else min(pass_min, floor)
                break
        self.pass_min = pass_min
        self.cursor = (side, start)
        return dropped

    def tick(self) -> None:
        """The tick: sweep what expired (processing time: older than the ttl; event time:
        the watermark passed its time by more than the ttl), unless nothing kept can have."""
        budget = max(SWEEP_ENTRIES, SWEEP_PER_WRITE * self.written)
        self.written = 0
        if not self.event_time:
            now = self.now_ms()
            before, floor = now - self.ttl, now
        elif self.watermark is not None:
            before, floor = self.watermark - self.ttl, self.watermark
        else:
            return
        mid_pass = self.cursor != (0, None)
        if mid_pass or self.horizon is None or before > self.horizon:
            self.sweep(before, budget, floor)

    def advance(self, watermark: int) -> None:
        """Event time: the watermark of the join's inputs moved (what is before it is late;
        the tick sweeps what it passed by more than the ttl). It never goes back: the
        minimum over the inputs does when an idle input comes back behind it, and what
        that input brings behind the join's watermark is late, as in Flink."""
        if self.watermark is None or watermark > self.watermark:
            self.watermark = watermark

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        raise AssertionError("a join's messages come through its sides")

    def transform(self, message: Any) -> list[Any]:
        raise AssertionError("a join's messages come through its sides")


async def _undone_on_failure(
    pending: Awaitable[Any], store: Any, kb: bytes, entry: bytes, held: bytes | None
) -> None:
    """``pending`` awaited; when it fails, the entry ``entry`` kept for it under ``kb``
    is taken back out (``held``: what was there before, or nothing) unless a later
    message of its key replaced it meanwhile, or the sweep deleted it."""
    try:
        await pending
    except Exception:
        if store.get(kb) == entry:
            if held is None:
                store.delete(kb)
            else:
                store.put(kb, held)
        raise


awaits_argument(_undone_on_failure, "pending")


__all__ = ["SWEEP_ENTRIES", "SWEEP_PER_WRITE", "JoinOperator", "JoinSide", "message_serde"]
