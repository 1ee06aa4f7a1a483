"""Origins in a task: its sends carry them, its reads of framed streams are deduplicated.

The bookkeeping is ``samzapy.control.origins``; here is how a task instance applies it.

- A *writer* (a task that may send to a framed stream) gets an ``OriginCollector``: each
  send made during a call for an input message carries that message's partition, offset
  and the send's ordinal; the router tags the record with them when its stream is framed.
  A sync task makes one call at a time. On the loop thread, its slot names the message of
  the call in progress (``MessageInProgress.env``, set before the call and cleared before
  anything else runs: a barrier, a control message): a send's ordinal counts from 0 for each
  new message there. On the thread pool, ``writing`` wraps ``process`` to set the message
  and the thread making the call (sends from other threads carry no origin: nothing orders
  them with the call's own). Sends from ``window``, ``on_watermark`` or ``on_end_of_stream``
  carry none. An async task may have several calls in flight: the current message is a
  context variable, set in the slot's own asyncio task before each call (so it follows the
  call through its awaits and into the tasks it creates) and cleared before each barrier; a
  send made once its call completed carries none. With ``task.max.concurrency`` > 1 each
  send also carries the writer's *floor*, the offset of its oldest message of that
  partition still in flight (type 4).
- The first message the task takes from each resumed partition settles that partition's
  epoch (``WriterOrigins.observe``), just before its call: the sync slot on the loop thread
  does it itself (``SlotContext.observe``), the others' ``process`` is wrapped. Not earlier,
  as the message arrives: a commit before its call would save the new epoch with the old
  offset, and a restart would move the epoch on again.
- A *reader* (a task with a framed input) gets from its consumer the envelopes of records
  that carry an origin with the record as read in ``origin``; those its ``ReaderOrigins``
  already applied are dropped (the call is skipped, the offset counts as processed): by the
  slot itself for a sync task on the loop thread (``SlotContext.admit``), else by the
  ``reading`` wrapper.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.container.collector import OutputRouter
from samzapy.container.pool import in_task_pool
from samzapy.container.slots import SlotContext
from samzapy.container.task_collector import MessageInProgress
from samzapy.control.origins import ReaderOrigins, WriterOrigins

log = structlog.get_logger("samzapy.task")

_thread = threading.get_ident


class _Cursor:
    """The input message of an async call in flight, how many sends it made, its entry in
    its partition's tracker and that tracker."""

    __slots__ = ("entry", "env", "ordinal", "tracker")

    def __init__(self, env: IncomingMessageEnvelope, tracker: OffsetTracker) -> None:
        self.env = env
        self.ordinal = 0
        self.tracker = tracker
        self.entry = tracker.newest()  # the slot noted the call just before


#: The current call's cursor in each asyncio task of an async writer (None: no message).
_CURSOR: contextvars.ContextVar[_Cursor | None] = contextvars.ContextVar(
    "samzapy_origin_cursor", default=None
)


class OriginCollector:
    """A writer task's MessageCollector: sends carry the origin of the current message."""

    __slots__ = (
        "_current",
        "_last",
        "_loop",
        "_loop_thread",
        "_route",
        "_router",
        "_task",
        "_writer",
        "concurrent",
        "env",
        "inline",
        "is_async",
        "ordinal",
        "thread",
    )

    def __init__(
        self,
        router: OutputRouter,
        loop: asyncio.AbstractEventLoop,
        task: TaskName,
        writer: WriterOrigins,
        *,
        is_async: bool,
        concurrent: bool = False,
        current: MessageInProgress | None = None,
        pooled: bool = False,
    ) -> None:
        """``concurrent``: an async task with several calls in flight (sends carry floors).
        ``current``: the message a sync task's slot on the loop thread is calling it for;
        ``pooled``: the calls run on the thread pool instead (``writing`` names their
        messages; ``current`` says when the task was closed)."""
        self._router = router
        self._route = router.send
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._task = task
        self._writer = writer
        self.is_async = is_async
        self.concurrent = concurrent
        self.inline = current is not None and not is_async and not pooled
        self._current = current if current is not None else MessageInProgress()
        #: The message the last send with an origin was for (its sends are counted by
        #: ``ordinal``): a sync task on the loop thread.
        self._last: IncomingMessageEnvelope | None = None
        #: A sync task on the thread pool: its current input message (None between calls),
        #: its sends so far, and the thread making the call.
        self.env: IncomingMessageEnvelope | None = None
        self.ordinal = 0
        self.thread = self._loop_thread

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        if self.inline:  # the hot path first: a sync task's call on the loop thread
            env = self._current.env
            if env is not None and _thread() == self._loop_thread:
                if env is self._last:  # a further send for the same message
                    ordinal = self.ordinal = self.ordinal + 1
                else:
                    self._last = env
                    ordinal = self.ordinal = 0
                self._route(envelope, self._task, self._writer, env, ordinal, None)
                return
        self._send(envelope)

    def _send(self, envelope: OutgoingMessageEnvelope) -> None:
        """Any other send: an async task's, one from the thread pool or another thread, or
        one made between calls (no origin)."""
        floor = None
        me = _thread()
        env: IncomingMessageEnvelope | None
        if self.inline:  # between calls, or from another thread
            env = None
            ordinal = 0
        elif self.is_async:
            cursor = _CURSOR.get()
            if cursor is None or cursor.entry.done:
                env = None  # no call, or a send after its call completed
                ordinal = 0
            else:
                env, ordinal = cursor.env, cursor.ordinal
                cursor.ordinal = ordinal + 1
                if self.concurrent:
                    floor = cursor.tracker.oldest_offset()
        else:
            env = self.env
            if env is None or me != self.thread:
                env = None  # between calls, or from another thread: no origin, no count
                ordinal = 0
            else:
                ordinal = self.ordinal
                self.ordinal = ordinal + 1
        writer = self._writer if env is not None else None
        if me == self._loop_thread:
            self._router.send(envelope, self._task, writer, env, ordinal, floor)
        elif in_task_pool():  # the task's call on the thread pool: dropped once closed
            self._loop.call_soon_threadsafe(
                self._current.from_call,
                self._router.send_from_thread,
                *(envelope, self._task, writer, env, ordinal, floor),
            )
        else:
            self._loop.call_soon_threadsafe(
                self._router.send_from_thread, envelope, self._task, writer, env, ordinal, floor
            )


def clear_cursor() -> None:
    """No message is current in this asyncio task any more (before a barrier)."""
    if _CURSOR.get() is not None:
        _CURSOR.set(None)


def writing(
    process: Callable[..., Any],
    collector: OriginCollector,
    trackers: Mapping[SystemStreamPartition, OffsetTracker],
) -> Callable[..., Any]:
    """``process`` (or ``process_async``) of an async task or one on the thread pool, with
    its sends carrying the message's origin; the first message of each resumed partition
    settles its epoch (``WriterOrigins.observe``)."""
    writer = collector._writer
    unresolved, observe = writer.unresolved, writer.observe
    if collector.is_async:
        cursor_var = _CURSOR

        def process_async(env: IncomingMessageEnvelope, c: Any, coordinator: Any) -> Any:
            if unresolved:
                observe(env.system_stream_partition, env.offset)
            cursor_var.set(_Cursor(env, trackers[env.system_stream_partition]))
            return process(env, c, coordinator)

        return process_async

    def process_in_pool(env: IncomingMessageEnvelope, c: Any, coordinator: Any) -> Any:
        if unresolved:
            observe(env.system_stream_partition, env.offset)
        collector.thread = _thread()  # the pool's thread making this call
        collector.env = env
        collector.ordinal = 0
        try:
            return process(env, c, coordinator)
        finally:
            collector.env = None

    return process_in_pool


def reading(
    process: Callable[..., Any], reader: ReaderOrigins, *, is_async: bool, threaded: bool
) -> Callable[..., Any]:
    """``process`` (or ``process_async``) skipping the records ``reader`` already applied.
    ``threaded``: calls run on the thread pool, and ``reader.busy`` says when one is running
    (a call cancelled at a stop goes on in its thread)."""
    admit = reader.admitter
    skipped: Any = None
    if is_async:
        skipped = asyncio.get_running_loop().create_future()
        skipped.set_result(None)

    def process_read(env: IncomingMessageEnvelope, c: Any, coordinator: Any) -> Any:
        record = env.origin
        if record is not None and not admit(env.system_stream_partition, record):
            return skipped
        return process(env, c, coordinator)

    if not threaded:
        return process_read

    def process_read_in_pool(env: IncomingMessageEnvelope, c: Any, coordinator: Any) -> Any:
        reader.busy = True
        try:
            return process_read(env, c, coordinator)
        finally:
            reader.busy = False

    return process_read_in_pool


def with_origins(
    process: Callable[..., Any], ctx: SlotContext, reader: ReaderOrigins | None, *, is_async: bool
) -> tuple[Callable[..., Any], SlotContext]:
    """A task's ``process`` (or ``process_async``) and the context its slots call it with:
    writing origins when its collector is an ``OriginCollector``, reading them when it has
    a ``reader`` (a sync slot on the loop thread asks the context's ``admit`` itself)."""
    threaded = ctx.executor is not None
    collector = ctx.collector
    if isinstance(collector, OriginCollector):
        if collector.inline:  # its slot names the message and settles the epochs itself
            writer = collector._writer
            ctx = dataclasses.replace(ctx, unresolved=writer.unresolved, observe=writer.observe)
        else:
            process = writing(process, collector, ctx.trackers)
    if reader is not None:
        if is_async or threaded:
            process = reading(process, reader, is_async=is_async, threaded=threaded)
        else:
            ctx = dataclasses.replace(ctx, admit=reader.admitter)
    return process, ctx


def committable(reader: ReaderOrigins, in_flight: int, task: TaskName) -> bool:
    """Whether a reader's task may commit: not when a stop cancelled calls still in flight
    (what it applied is then ahead of its offsets: the last checkpoint stands, and the
    restart reads the rest again)."""
    if reader.busy or in_flight:
        log.warning("checkpoint_skipped", task=task, reason="calls in flight were cancelled")
        return False
    return True


def log_dropped(reader: ReaderOrigins, logged: int, task: TaskName) -> int:
    """Log how many copies were dropped since ``logged`` of them were; return the count
    logged now."""
    if reader.dropped > logged:
        log.info(
            "duplicates_dropped",
            task=task,
            count=reader.dropped - logged,
            reason="records a restarted upstream task wrote again (their origin was applied)",
        )
    return reader.dropped


__all__ = [
    "OriginCollector",
    "clear_cursor",
    "committable",
    "log_dropped",
    "reading",
    "with_origins",
    "writing",
]
