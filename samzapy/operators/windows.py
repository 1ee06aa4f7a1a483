"""The window operator's common part: tumbling (``tumbling.py``) and session
(``sessions.py``) windows, in processing or event time.

One task's ``WindowOperator`` keeps its windows' contents in its own store (``stores.<op_id>``,
bytes in and out, with a changelog when the job has a system for one), so they survive a
restart and are exact after kill -9 and under exactly-once as any store is. Per message it is
one read-modify-write of that store: the path the store's per-commit write cache makes cheap
(a window without an aggregator holds its panes' lists between write-backs instead,
``held_values.py``).

Store layout (keys ordered as bytes):

- ``T`` + pane id (8 bytes, big-endian, offset by 2**63) + the serialized key: a tumbling
  window's value for one key and pane, so one pane is one range of the store;
- ``S`` + the serialized key: a key's open sessions, ``[(start, last, value bytes), ...]``;
- ``A`` + the same pane id and key: a tumbling window's trigger state (a count, two times,
  whether it fired), so a restarted task's triggers go on where they were;
- ``M``: the window's watermark, written when the window fires and before each commit's
  flush of the stores (``TaskContextImpl.before_commit``), so a restart has it as of its
  checkpoint: it neither fires a pane twice nor takes a message the watermark had passed for
  one on time. (Written at every move instead where the context offers no such hook.)

What runs in memory is bounded by the open windows: the open panes' ids, one due time per key
with open sessions, and the state of early and late triggers (also in the store, above).

When panes fire: processing time, at the task's tick (``task.window.ms``) once the clock
passed a pane's end; event time, as soon as the window's watermark reaches a pane's end
(``advance``, called by ``event_time.Watermarks``), and at end-of-stream. A pane's event time
(the time its records are sent with, and the time a window downstream sees) is its window's
last millisecond, ``end - 1``, as in Flink and Beam: a pane stays in the same window of a
window of the same size downstream.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from samzapy.api.envelope import KV, OutgoingMessageEnvelope
from samzapy.api.errors import OperatorError
from samzapy.api.system import SystemStream
from samzapy.api.task import END_WATERMARK
from samzapy.api.windows import (
    AccumulationMode,
    FiringType,
    Window,
    WindowKey,
    WindowPane,
)
from samzapy.operators.awaiting import await_all
from samzapy.operators.event_time import EventClock, message_time, wall_ms
from samzapy.operators.held_values import WRITE_BACK_EVERY, HeldValues
from samzapy.operators.refusals import Refusals
from samzapy.operators.sends import SendingOperator
from samzapy.operators.state_serdes import state_serde

log = structlog.get_logger("samzapy.operators")

_META = b"M"
#: At most this many panes are remembered as logged for late drops (one line per window).
_LOGGED_LATE = 1024

EARLY, DEFAULT, LATE = FiringType.EARLY, FiringType.DEFAULT, FiringType.LATE

#: ``read_pane``'s (``read_key``'s) value for a pane whose value (key) its serde cannot read,
#: dropped (``refusals.py``).
UNREADABLE = object()


_new = tuple.__new__


class WindowOperator(SendingOperator):
    """One task's window (see the module docstring). ``send``: the collector's, for the late
    output stream when the window has one. A subclass keeps its panes: ``restore`` them from
    the store, take a ``message``, ``fire`` what ended by a time, say if any is ``due``."""

    kind = "window"
    counts_out = True
    __slots__ = (
        "accumulating",
        "aggregator",
        "at_commit",
        "event_time",
        "held",
        "initial",
        "key_fn",
        "kserde",
        "late",
        "late_logged",
        "lateness",
        "merger",
        "now_ms",
        "pending",
        "refusals",
        "size",
        "store",
        "vserde",
        "watermark",
        "window",
        "written",
    )

    def __init__(
        self,
        op_id: str,
        window: Window,
        functions: Mapping[str, Callable[..., Any] | None],
        clock: EventClock,
        late_stream: SystemStream | None,
        pending: list[Awaitable[Any]],
    ) -> None:
        super().__init__(op_id, late_stream)  # type: ignore[arg-type]
        self.window = window
        self.key_fn = functions.get("key_fn")
        self.initial = functions.get("initial_value")
        self.aggregator = functions.get("aggregator")
        self.merger = functions.get("merger")
        self.clock = clock
        #: Processing time in ms: the container's clock (``hooks.WindowHooks.use_clock``).
        self.now_ms: Callable[[], int] = wall_ms
        self.size = window.size_ms
        self.event_time = window.event_time
        self.lateness = window.allowed_lateness_ms
        self.accumulating = window.accumulation_mode is AccumulationMode.ACCUMULATING
        self.pending = pending
        self.store: Any = None
        self.kserde: Any = None
        self.vserde: Any = None
        self.watermark: int | None = None
        #: The watermark ``M`` holds, and whether a commit writes it (else each move does).
        self.written: int | None = None
        self.at_commit = False
        #: A window without an aggregator: its panes' lists appended to since the last
        #: write-back (``held_values.py``).
        self.held: HeldValues | None = None
        #: What becomes of state the serde refuses outside a message's call (``open``).
        self.refusals: Refusals | None = None
        self.late = 0
        self.late_logged: dict[int, None] = {}

    # -- what a kind of window does ----------------------------------------------------------

    def restore(self) -> None:
        raise NotImplementedError

    def message(self, message: Any, key: Any, t: int) -> None:
        raise NotImplementedError

    def fire(self, now: int, final: bool = False) -> None:
        """Fire what ended by ``now``; everything when ``final`` (end-of-stream)."""
        raise NotImplementedError

    def due(self, now: int) -> bool:
        """Whether anything ends by ``now``."""
        raise NotImplementedError

    def timed_triggers(self) -> None:
        """Fire the early and late triggers whose time came (processing time)."""

    # -- start-up ------------------------------------------------------------------------------

    def open(self, context: Any) -> None:
        """Take the task's store and what it holds: the watermark, the open panes."""
        self.store = context.get_store(self.op_id)
        self.kserde = state_serde(self.window.key_serde, context.config)
        self.vserde = state_serde(self.window.value_serde, context.config)
        meta = self.store.get(_META)
        if meta is not None:
            self.watermark = self.written = int(pickle.loads(meta))
        before_commit = getattr(context, "before_commit", None)
        if before_commit is not None:
            before_commit(self.write_watermark)
            self.at_commit = True
        self.refusals = Refusals(self, context)
        if self.aggregator is None:
            limit = WRITE_BACK_EVERY if self.at_commit else 1
            self.held = HeldValues(self.store, self.encode_held, limit, self.refusals)
            if before_commit is not None:
                before_commit(self.write_back)
        self.restore()

    def encode_held(self, value: Any) -> bytes:
        """A held entry's bytes in the store (``held_values.py``)."""
        raise NotImplementedError

    def write_back(self) -> None:
        """The held panes into the store: before a commit's flush, and before the store is
        read for panes (firing)."""
        if self.held is not None and self.held.held:
            try:
                self.held.write_back()
            except Exception as exc:
                raise self.failed(exc, "writing its panes to its store") from exc

    def write_watermark(self) -> None:
        """Before a commit's flush: the watermark into the store, if it moved since."""
        watermark = self.watermark
        if watermark is not None and watermark != self.written:
            try:
                self.store.put(_META, pickle.dumps(watermark, 5))
            except Exception as exc:
                raise self.failed(exc, "writing its watermark") from exc
            self.written = watermark

    # -- messages ------------------------------------------------------------------------------

    def _time(self) -> int:
        return message_time(self, self.event_time, self.clock)

    def _key(self, message: Any) -> Any:
        if self.key_fn is None:
            return None
        try:
            return self.key_fn(message)
        except Exception as exc:
            raise self.failed(exc, "key function") from exc

    def _add(self, message: Any, value: Any) -> Any:
        if self.aggregator is None:
            if value is None:
                return [message]
            value.append(message)
            return value
        if value is None:
            value = self.initial_value()
        try:
            return self.aggregator(message, value)
        except Exception as exc:
            raise self.failed(exc, "aggregator") from exc

    def initial_value(self) -> Any:
        """A new pane's value (the window has an aggregator)."""
        try:
            return self.initial()  # type: ignore[misc]
        except Exception as exc:
            raise self.failed(exc, "initial_value") from exc

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        return self._take(message, self._key(message), self._time())

    def timed(self, message: Any) -> Awaitable[Any] | None:
        return self.on_message(message)

    def transform(self, message: Any) -> list[Any]:
        self.on_message(message)
        return []

    def _take(self, message: Any, key: Any, t: int) -> Awaitable[Any] | None:
        """``message``, then what the panes it fired owe. When it fails after a pane went on
        (a LATE pane, then the store refusing to write the session), what that pane started is
        awaited all the same, then the failure raised (``take_pending``): it is not left to
        the next message's processing, nor never awaited."""
        try:
            self.message(message, key, t)
        except OperatorError as exc:
            return take_pending(self.pending, exc)
        except Exception as exc:  # its own (its store's, a serde's): named as the chain does
            error = self.failed(exc, "processing")
            error.__cause__ = exc
            return take_pending(self.pending, error)
        return take_pending(self.pending)

    def too_late(
        self,
        message: Any,
        pane: int,
        t: int,
        why: str = "its window fired and the allowed lateness passed",
    ) -> None:
        """Count a message too late for its window, and send it to the late output (or
        drop it, logged once per window)."""
        self.late += 1
        late_stream = self.stream
        if late_stream is not None:
            if type(message) is KV:
                envelope = OutgoingMessageEnvelope(late_stream, message[1], message[0])
            else:
                envelope = OutgoingMessageEnvelope(late_stream, message)
            envelope.timestamp = t
            try:
                self.send(envelope)
            except Exception as exc:
                raise self.failed(exc, f"send to {late_stream}") from exc
            return
        if pane not in self.late_logged:
            if len(self.late_logged) >= _LOGGED_LATE:
                self.late_logged.pop(next(iter(self.late_logged)))
            self.late_logged[pane] = None
            log.warning(
                "late_message_dropped",
                operator=self.op_id,
                pane_id=pane,
                event_time=t,
                watermark=self.watermark,
                allowed_lateness_ms=self.lateness,
                reason=f"{why}; counted in {self.op_id}-late-messages (with_late_output "
                "keeps such messages)",
            )

    # -- firing ----------------------------------------------------------------------------------

    def read_pane(self, raw: bytes, key: Any, pane: int) -> Any:
        """A pane's value from the store as it fires outside a message's call (a tick, a
        watermark, end-of-stream); ``UNREADABLE`` when the serde cannot read it and
        ``task.drop.process.errors`` dropped it (``refusals.py``; else the task fails)."""
        try:
            return self.vserde.from_bytes(raw)
        except Exception as exc:
            assert self.refusals is not None  # (opened)
            self.refusals.unreadable(exc, key, pane)
        return UNREADABLE

    def read_stored(self, skey: bytes, raw: bytes, key: Any, pane: int) -> Any:
        """The value stored under ``skey`` for ``key``'s pane ``pane`` as a message of its key
        comes; a fresh pane's when the serde cannot read it and ``task.drop.process.errors``
        let it go (``let_go``; else the task fails)."""
        try:
            return self.vserde.from_bytes(raw)
        except Exception as exc:
            return self.let_go(exc, skey, key, pane)

    def let_go(self, error: Exception, skey: bytes, key: Any, pane: int) -> Any:
        """The serde cannot read (``error``) the value stored under ``skey`` as a message of
        its key comes: let go once, logged and counted (``refusals.py``), with what its
        trigger counted, and the message starts a fresh pane, whose value this returns (or
        the task fails). Failing the message instead failed each later one of that key on
        the same stored value."""
        assert self.refusals is not None  # (opened)
        self.refusals.unreadable_stored(error, key, pane)
        self.uncount(skey)
        return None if self.aggregator is None else self.initial_value()

    def uncount(self, skey: bytes, lost: int | None = None) -> None:
        """``lost`` of the messages ``skey``'s trigger counted (None: all) left its pane."""

    def read_key(self, kbytes: bytes, pane: int) -> Any:
        """A pane's key from the store as it fires outside a message's call; ``UNREADABLE``
        when the key serde cannot read it and ``task.drop.process.errors`` dropped the pane
        (``refusals.py``; else the task fails)."""
        try:
            return self.kserde.from_bytes(kbytes)
        except Exception as exc:
            assert self.refusals is not None  # (opened)
            self.refusals.unreadable_key(exc, kbytes, pane)
        return UNREADABLE

    def emit_pane(self, key: Any, pane: int, end: int, value: Any, firing: FiringType) -> None:
        clock = self.clock
        before = clock.t
        clock.t = end - 1
        try:
            # tuple.__new__: without the NamedTuples' __new__ in Python (a pane per message)
            pane_of = _new(WindowPane, (_new(WindowKey, (key, pane)), value, firing))
            pending = self.emit(pane_of)
        finally:
            clock.t = before
        self.out += 1
        if pending is not None:
            self.pending.append(pending)

    # Firing: what fails in an operator after the window (a pane went on) names that
    # operator; the window's own failures (its store's, a serde's) name the window.

    def advance(self, watermark: int) -> None:
        """The window's watermark moved (event time): fire what it completed, and write it
        to the store when it fired something (``M``, module docstring; else the commit does)."""
        if self.watermark is not None and watermark <= self.watermark:
            return
        self.watermark = watermark
        due = self.due(watermark)
        if due:
            try:
                self.fire(watermark)
            except OperatorError:
                raise
            except Exception as exc:
                raise self.failed(exc, "firing") from exc
        if due or not self.at_commit:
            self.write_watermark()

    def tick(self) -> None:
        """Processing time passed (``task.window.ms``): fire what is due by the clock."""
        try:
            if not self.event_time:
                self.fire(self.now_ms())
            self.timed_triggers()
        except OperatorError:
            raise
        except Exception as exc:
            raise self.failed(exc, "firing") from exc

    def end_of_stream(self) -> None:
        """Every input ended: fire every open window's DEFAULT pane."""
        try:
            self.fire(END_WATERMARK, final=True)
            if self.event_time:
                self.watermark = END_WATERMARK
                self.store.put(_META, pickle.dumps(END_WATERMARK, 5))
        except OperatorError:
            raise
        except Exception as exc:
            raise self.failed(exc, "firing") from exc


def take_pending(
    pending: list[Awaitable[Any]], failure: Exception | None = None
) -> Awaitable[Any] | None:
    """What the windows' panes sent to asynchronous operators still owe, as one awaitable
    (then cleared; None when nothing). ``failure``: what failed after those panes went on (a
    later pane, the window's own work); the awaitable raises it once they completed
    (``await_all``), or it is raised now when none did."""
    if not pending:
        if failure is not None:
            raise failure
        return None
    awaitables = list(pending)
    pending.clear()
    return await_all(awaitables, failure)


def gather_pending(
    pending: list[Awaitable[Any]], failure: Exception | None = None
) -> Awaitable[Any] | None:
    """``take_pending``, as a future (what a hook returns)."""
    owed = take_pending(pending, failure)
    return None if owed is None else asyncio.ensure_future(owed)


__all__ = [
    "DEFAULT",
    "EARLY",
    "LATE",
    "UNREADABLE",
    "WindowOperator",
    "gather_pending",
    "take_pending",
]
