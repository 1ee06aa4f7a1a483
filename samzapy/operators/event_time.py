"""Event time inside one task's operator graph: the current message's time, and watermarks.

``EventClock.t`` is the event time of the message going through the graph (ms since the
epoch): set where it enters (the record's timestamp, or the input descriptor's
``with_timestamp`` function), kept through ``map``, ``filter``, ``flat_map`` and
``flat_map_async``, sent by ``send_to`` and ``partition_by`` in the frame of a framed stream
(so an intermediate stream's reader gets it back; ``control/wire.py``), and set to a pane's
time by a window.

``Watermarks`` keeps the watermark of each input stream of the task and gives each event-time
window the minimum over the streams that reach it, whenever that moves forward:

- a stream that carries watermarks in-band (an intermediate or framed stream, or one with
  ``samza.watermark.lateness.ms``) gets them from the container (``on_stream_watermark``);
- a stream whose descriptor says ``with_watermarks(max_out_of_orderness, idle_timeout)``
  generates its own here, per message: the largest event time seen minus the
  out-of-orderness. So whether a message is late never depends on how messages were batched.
  A stream that saw no message for ``idle_timeout`` (processing time, on the container's
  clock, checked at each tick) stops holding the minimum back, and holds it again with its
  next message.

It also ends each window, in either time domain, once every input stream that reaches it
ended in the task (``ended``), before the task's own end-of-stream: a task that writes an
intermediate stream ends it once its partitions of the stream's upstream inputs ended, while
it may still read others (that stream itself, in a job of several stages), so what a window
before the stream fires at its end must go first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from typing import Any, NoReturn

from samzapy.api.errors import OperatorError, WatermarkFiringError
from samzapy.api.graph import OperatorSpec, upstream_of
from samzapy.api.system import SystemStream
from samzapy.api.task import END_WATERMARK


class EventClock:
    """The event time of the message the graph is working on (None: none known)."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t: int | None = None


def wall_ms() -> int:
    """Wall-clock time in ms: processing time, until the task's init gives the container's."""
    return int(time.time() * 1000)


def message_time(op: Any, event_time: bool, clock: EventClock) -> int:
    """The time of the message ``op`` (a window, a join) is working on, in ms: ``op.now_ms()``
    in processing time, the clock's in event time (the operator's failure when it has none)."""
    if not event_time:
        return int(op.now_ms())
    t = clock.t
    if t is None:
        error = ValueError(
            "the message has no event time: its record has no timestamp; give its input "
            "descriptor with_timestamp(fn)"
        )
        raise op.failed(error, "event time") from error
    return int(t)


class _Generated:
    """A stream's generated watermark: out-of-orderness, idle timeout, and activity."""

    __slots__ = ("active_at", "idle", "idle_ms", "lateness", "seen", "top")

    def __init__(self, lateness: int, idle_ms: int | None) -> None:
        self.lateness = lateness
        self.idle_ms = idle_ms
        self.top: int | None = None  # the largest event time seen
        self.seen = False  # a message came since the last tick
        self.active_at: float | None = None  # when one was last seen (the clock's s)
        self.idle = False


class Watermarks:
    """The task's input streams' watermarks, and the windows that wait on them."""

    def __init__(self, deferred: bool = False) -> None:
        #: An asynchronous graph's: a generated watermark moves at the tick only, when
        #: nothing is in flight (a message still in a ``flat_map_async`` would be late).
        self.deferred = deferred
        self.streams: dict[SystemStream, int | None] = {}
        self.generated: dict[SystemStream, _Generated] = {}
        #: The streams the container found idle in this task (``stream_idleness``).
        self.idle_streams: set[SystemStream] = set()
        #: Each window's advance function, with the streams that reach it.
        self._windows: list[tuple[Callable[[int], None], tuple[SystemStream, ...]]] = []
        self._by_stream: dict[SystemStream, list[int]] = {}
        #: Each window's end (every time domain's), with the streams that reach it, until
        #: they all ended; and the streams that ended.
        self._ends: list[tuple[Callable[[], None], frozenset[SystemStream]]] = []
        self._ended: set[SystemStream] = set()

    def generate(self, stream: SystemStream, lateness: int, idle_ms: int | None) -> None:
        self.generated[stream] = _Generated(lateness, idle_ms)
        self.streams.setdefault(stream, None)

    def add_window(self, advance: Callable[[int], None], streams: Iterable[SystemStream]) -> None:
        index = len(self._windows)
        streams = tuple(streams)
        self._windows.append((advance, streams))
        for stream in streams:
            self.streams.setdefault(stream, None)
            self._by_stream.setdefault(stream, []).append(index)

    def add_end(self, end: Callable[[], None], streams: Iterable[SystemStream]) -> None:
        """``end()`` (a window's end of stream) once every one of ``streams`` ended."""
        self._ends.append((end, frozenset(streams)))

    def ended(self, stream: SystemStream) -> None:
        """Every partition of ``stream`` the task reads ended: end the windows whose streams
        all did, in the order they were added (a window's before the windows after it)."""
        self._ended.add(stream)
        ending = [(end, s) for end, s in self._ends if s and s <= self._ended]
        self._ends = [(end, s) for end, s in self._ends if not (s and s <= self._ended)]
        for end, _ in ending:
            end()

    def restrict(self, read: Collection[SystemStream]) -> None:
        """Only the streams this task reads (``read``) hold its windows back: a stream none
        of whose partitions it has (a merged input with fewer partitions than the others)
        never brings a message or a watermark here."""
        self._windows = [
            (advance, tuple(s for s in streams if s in read)) for advance, streams in self._windows
        ]
        self._by_stream = {s: i for s, i in self._by_stream.items() if s in read}
        # A window none of whose streams the task reads ends with the task only.
        self._ends = [(end, streams & frozenset(read)) for end, streams in self._ends]
        for stream in [s for s in self.streams if s not in read]:
            del self.streams[stream]

    def observer(self, stream: SystemStream) -> Callable[[Any], None] | None:
        """What an input of ``stream`` calls with each message's event time (None when the
        stream's watermarks are not generated here)."""
        gen = self.generated.get(stream)
        if gen is None:
            return None
        lateness = gen.lateness
        deferred = self.deferred
        windows = [self._windows[i] for i in self._by_stream.get(stream, ())]
        if deferred or any(streams != (stream,) for _, streams in windows):

            def observe(t: Any) -> None:
                gen.seen = True
                if gen.idle:
                    gen.idle = False
                if t is not None and (gen.top is None or t > gen.top):
                    gen.top = t
                    if not deferred:
                        self._moved(stream, t - lateness)

            return observe
        # Every window of this stream reads it alone: its watermark is the stream's.
        advances = [advance for advance, _ in windows]
        watermarks = self.streams

        def observe_alone(t: Any) -> None:
            gen.seen = True
            if gen.idle:
                gen.idle = False
            if t is not None and (gen.top is None or t > gen.top):
                gen.top = t
                watermarks[stream] = watermark = t - lateness
                for advance in advances:
                    advance(watermark)

        return observe_alone

    def received(self, stream: SystemStream, watermark: int) -> None:
        """The container's watermark of ``stream``; ignored for a stream generated here
        (the in-task one is never behind the container's, derived from the same times),
        except ``END_WATERMARK``: every partition of the stream ended."""
        if stream not in self.generated or watermark == END_WATERMARK:
            self._moved(stream, watermark)

    def stream_idleness(self, stream: SystemStream, idle: bool) -> None:
        """The container found every partition of ``stream`` in this task idle (or one
        active again); ignored for a stream generated here, whose idleness is its own."""
        if stream in self.generated:
            return
        if idle:
            self.idle_streams.add(stream)
        else:
            self.idle_streams.discard(stream)
        self._recompute(stream)

    def tick(self, now: float) -> None:
        """Processing time passed: mark streams idle past their timeout (``now``: monotonic
        seconds, the container's clock's); in a deferred graph, move the generated watermarks."""
        changed: list[SystemStream] = []
        for stream, gen in self.generated.items():
            if self.deferred and gen.top is not None:
                self._moved(stream, gen.top - gen.lateness)
            if gen.seen or gen.active_at is None:
                gen.seen = False
                gen.active_at = now
            elif (
                gen.idle_ms is not None
                and not gen.idle
                and (now - gen.active_at) * 1000 >= gen.idle_ms
            ):
                gen.idle = True
                changed.append(stream)
        for stream in changed:
            self._recompute(stream)

    def _moved(self, stream: SystemStream, watermark: int) -> None:
        last = self.streams.get(stream)
        if last is not None and watermark <= last:
            return
        self.streams[stream] = watermark
        self._recompute(stream)

    def _recompute(self, stream: SystemStream) -> None:
        for index in self._by_stream.get(stream, ()):
            advance, streams = self._windows[index]
            low = self.minimum(streams)
            if low is not None:
                advance(low)

    def minimum(self, streams: Iterable[SystemStream]) -> int | None:
        """The minimum over ``streams`` that neither ended nor are idle (None while one has
        none yet); when every one that has not ended is idle, the highest of those (as
        ``TaskControl`` does through an intermediate stream: an ended stream is no idle one,
        whose end of time would close every window for ever); ``END_WATERMARK`` once all
        ended, or the others are idle without any."""
        low: int | None = None
        held = ended = False
        highest: int | None = None
        for stream in streams:
            watermark = self.streams.get(stream)
            if watermark == END_WATERMARK:
                ended = True  # holds nothing back
                continue
            gen = self.generated.get(stream)
            if (gen is not None and gen.idle) or stream in self.idle_streams:
                if watermark is not None and (highest is None or watermark > highest):
                    highest = watermark
                continue
            held = True
            if watermark is None:
                return None
            if low is None or watermark < low:
                low = watermark
        if held:
            return low
        if highest is not None:  # every stream that has not ended is idle: the highest
            return highest
        # Idle ones without a watermark hold nothing back either (as a writer idle before
        # its first watermark does through an intermediate stream).
        return END_WATERMARK if ended else None


def firing_failed(exc: Exception, entry: Any) -> NoReturn:
    """Raise ``exc``, what failed as a message of input ``entry`` (its operator) moved a
    generated watermark and its windows fired, as a ``WatermarkFiringError``: the pane failed,
    not the message (never dropped). It names the operator that failed: a window names
    itself (its store's or a serde's failure as it fired: ``WindowOperator.advance``), an
    operator after it too; anything else failed on the way from the input to its windows (the
    watermarks' bookkeeping), and names the input."""
    if isinstance(exc, OperatorError):
        op_id, kind = exc.op_id, exc.kind
        cause = exc.__cause__ if isinstance(exc.__cause__, BaseException) else exc
    else:
        op_id, kind, cause = entry.op_id, entry.kind, exc
    raise WatermarkFiringError(
        f"{exc}, on what the windows fired as the message moved the watermark",
        op_id=op_id,
        kind=kind,
    ) from cause


def sources(spec: OperatorSpec, inputs_of: dict[int, SystemStream]) -> list[SystemStream]:
    """The input streams whose messages reach ``spec``."""
    found = [inputs_of[id(op)] for op in upstream_of(spec) if id(op) in inputs_of]
    return list(dict.fromkeys(found))


__all__ = ["EventClock", "Watermarks", "firing_failed", "message_time", "sources", "wall_ms"]
