"""The operator implementations that transform: one task's running copy of an application's
graph is made of these and of the operators that write (``sends.py``).

Each operator takes a message (``on_message``) and hands what it makes to the operators after
it. Everything synchronous returns None; an operator that has work still to finish (an
awaitable of ``flat_map_async`` or of an operator after it) returns an awaitable, and the
message is processed once it completes. This is the hot path: one Python call per operator,
no allocation beyond what the user's functions make.

Metrics, per operator id in the task's group: ``<op_id>-messages-in``, ``<op_id>-messages-out``
(an operator counts only what it cannot tell from the operators before it: inputs and
operators whose output count differs from their input count) and ``<op_id>-process-latency``,
the time spent in the operator's own function (and send), measured on one message in
``SAMPLE_EVERY`` of the task (each sampled message is timed through every operator it
reaches), and for ``flat_map_async`` on every message, until its awaitable completed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any

from samzapy.api.errors import OperatorError
from samzapy.api.system import SystemStream
from samzapy.operators.awaiting import await_all, awaits_argument, not_awaited

#: One message in this many is timed through the operators it reaches.
SAMPLE_EVERY = 1024

_clock = time.perf_counter_ns


def _nothing(message: Any) -> None:
    return None


def as_messages(given: Any, what: str) -> list[Any]:
    """``given``, what a ``flat_map``'s function (or ``flat_map_async``'s awaitable) gave, as
    its list of messages. None, a non-iterable, a ``str`` or ``bytes`` (which would go on as
    its characters or byte values) and a ``dict`` (as its keys: one message returned alone;
    Samza's functions return a Collection, which a Map is not) are a TypeError saying what
    was expected."""
    if not isinstance(given, str | bytes | bytearray | dict):
        try:
            messages = iter(given)
        except TypeError:
            pass
        else:
            return list(messages)  # what the iteration itself raises is the function's
    raise TypeError(
        f"{what} must be an iterable of messages (a list; [] for none), got "
        f"{type(given).__name__} {given!r:.60}"
    )


class OperatorImpl:
    """An operator of one task: its id and kind, the operators after it, its counts."""

    kind = ""
    #: Whether the operator counts its output itself (else it equals its input, less the
    #: messages it failed on: under task.drop.process.errors they go no further).
    counts_out = False

    __slots__ = (
        "downstream",
        "emit",
        "failures",
        "fused_counts",
        "op_id",
        "out",
        "timer",
        "upstream",
    )

    def __init__(self, op_id: str) -> None:
        self.op_id = op_id
        self.downstream: list[OperatorImpl] = []
        self.upstream: list[OperatorImpl] = []
        self.emit: Callable[[Any], Awaitable[Any] | None] = _nothing
        self.out = 0
        #: Its own failures (``failed``): messages it did not pass on or send.
        self.failures = 0
        #: The counts fused chains keep of this operator (``fusion.py``), beside ``out``.
        self.fused_counts: list[Callable[[], int]] = []
        self.timer: Any = None  # a metrics Timer once registered

    # -- wiring ------------------------------------------------------------------------------

    def connect(self, after: OperatorImpl) -> None:
        self.downstream.append(after)
        after.upstream.append(self)
        if len(self.downstream) == 1:
            self.emit = after.on_message
        else:
            self.emit = self._fan_out

    def _fan_out(self, message: Any) -> Awaitable[Any] | None:
        pending = None
        for op in self.downstream:
            try:
                result = op.on_message(message)
            except Exception as exc:
                if pending is None:
                    raise
                return await_all(pending, exc)  # the branches before it finish first
            if result is not None:
                if pending is None:
                    pending = [result]
                else:
                    pending.append(result)
        return None if pending is None else await_all(pending)

    # -- messages ----------------------------------------------------------------------------

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        raise NotImplementedError

    def transform(self, message: Any) -> list[Any]:
        """What ``on_message`` makes of ``message``, without passing it on (sync operators)."""
        raise NotImplementedError

    def timed(self, message: Any) -> Awaitable[Any] | None:
        """``on_message``, timing this operator and every one the message reaches after it."""
        t0 = _clock()
        results = self.transform(message)
        if self.timer is not None:
            self.timer.update_ns(_clock() - t0)
        return self.timed_after(results)

    def timed_after(self, results: list[Any]) -> Awaitable[Any] | None:
        """``results`` timed through every operator after this one."""
        pending = None
        for result in results:
            for op in self.downstream:
                try:
                    awaitable = op.timed(result)
                except Exception as exc:
                    if pending is None:
                        raise
                    return await_all(pending, exc)  # what was started finishes first
                if awaitable is not None:
                    pending = [awaitable] if pending is None else [*pending, awaitable]
        return None if pending is None else await_all(pending)

    @property
    def messages_in(self) -> int:
        return sum(op.messages_out for op in self.upstream)

    @property
    def messages_out(self) -> int:
        if not self.counts_out:
            return self.messages_in - self.failures
        return self.out + sum(count() for count in self.fused_counts)

    def failed(self, exc: BaseException, what: str = "function") -> OperatorError:
        """The error of this operator's failure on its message (counted in ``failures``)."""
        self.failures += 1
        return OperatorError(
            f"the {what} of operator {self.op_id!r} ({self.kind}) failed",
            op_id=self.op_id,
            kind=self.kind,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.op_id!r})"


class InputOperator(OperatorImpl):
    """Where an input stream's messages enter: a ``KV(key, message)`` for keyed streams, else
    the message alone. The task calls ``enter`` with the envelope."""

    kind = "input"
    counts_out = True
    __slots__ = ("keyed", "stream")

    def __init__(self, op_id: str, stream: SystemStream, keyed: bool) -> None:
        super().__init__(op_id)
        self.stream = stream
        self.keyed = keyed

    # No on_message: an input's messages enter through its fused chain (fusion.fuse_input),
    # which counts them.

    def transform(self, message: Any) -> list[Any]:
        return [message]  # counted by the fused chain


class MapOperator(OperatorImpl):
    """``fn(message)`` on; a None result goes no further (Samza's map), counted in
    ``dropped`` (rare: the messages out are those in, less it and the failures)."""

    kind = "map"
    __slots__ = ("dropped", "fn")

    def __init__(self, op_id: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(op_id)
        self.fn = fn
        self.dropped = 0

    def _apply(self, message: Any) -> Any:
        try:
            result = self.fn(message)
        except Exception as exc:
            raise self.failed(exc) from exc
        if result is None:
            self.dropped += 1
        return result

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        result = self._apply(message)
        return None if result is None else self.emit(result)

    def transform(self, message: Any) -> list[Any]:
        result = self._apply(message)
        return [] if result is None else [result]

    @property
    def messages_out(self) -> int:
        return self.messages_in - self.dropped - self.failures


class FilterOperator(OperatorImpl):
    kind = "filter"
    counts_out = True
    __slots__ = ("fn",)

    def __init__(self, op_id: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(op_id)
        self.fn = fn

    def _keep(self, message: Any) -> bool:
        try:
            keep = self.fn(message)
        except Exception as exc:
            raise self.failed(exc) from exc
        if keep:
            if keep is not True and type(keep) is CoroutineType:  # never run, and true
                error = not_awaited(keep, "filter's function")
                raise self.failed(error) from error
            self.out += 1
            return True
        return False

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        return self.emit(message) if self._keep(message) else None

    def transform(self, message: Any) -> list[Any]:
        return [message] if self._keep(message) else []


class FlatMapOperator(OperatorImpl):
    kind = "flat_map"
    counts_out = True
    __slots__ = ("fn",)

    def __init__(self, op_id: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(op_id)
        self.fn = fn

    def transform(self, message: Any) -> list[Any]:
        try:
            given = self.fn(message)
            if type(given) is list:  # the common case, without a call
                results = list(given)
            else:
                results = as_messages(given, "flat_map's function's result")
        except Exception as exc:
            raise self.failed(exc) from exc
        self.out += len(results)
        return results

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        emit = self.emit
        pending = None
        for result in self.transform(message):
            try:
                awaitable = emit(result)
            except Exception as exc:
                if pending is None:
                    raise
                return await_all(pending, exc)  # the results before it finish first
            if awaitable is not None:
                pending = [awaitable] if pending is None else [*pending, awaitable]
        return None if pending is None else await_all(pending)


class FlatMapAsyncOperator(OperatorImpl):
    """``fn(message)`` returns an awaitable of an iterable; the messages go on once it
    completes. Every call is timed, from the call until its awaitable completed."""

    kind = "flat_map_async"
    counts_out = True
    __slots__ = ("clock", "fn")

    def __init__(self, op_id: str, fn: Callable[[Any], Any]) -> None:
        super().__init__(op_id)
        self.fn = fn
        #: The graph's event clock when it keeps event time: the results go on with the
        #: message's time, whatever ran in between.
        self.clock: Any = None

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        return self._call(message, False)

    def timed(self, message: Any) -> Awaitable[Any] | None:
        return self._call(message, True)

    def _call(self, message: Any, timed: bool) -> Awaitable[Any]:
        t0 = _clock()
        event_time = None if self.clock is None else self.clock.t
        try:
            awaitable = self.fn(message)
        except Exception as exc:
            raise self.failed(exc) from exc
        if not inspect.isawaitable(awaitable):
            if not isinstance(awaitable, concurrent.futures.Future):
                error = TypeError(
                    "flat_map_async's function must return an awaitable of an iterable (or a "
                    f"concurrent.futures.Future of one), got {type(awaitable).__name__}"
                )
                raise self.failed(error) from error
            awaitable = asyncio.wrap_future(awaitable)  # as a task's process_async may return
        return self._complete(awaitable, t0, timed, event_time)

    async def _complete(
        self, awaitable: Awaitable[Any], t0: int, timed: bool, event_time: int | None
    ) -> None:
        try:
            results = as_messages(await awaitable, "what flat_map_async's awaitable gave")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self.failed(exc) from exc
        if self.timer is not None:
            self.timer.update_ns(_clock() - t0)
        self.out += len(results)
        clock = self.clock
        if not timed:
            emit = self.emit
            for result in results:
                if clock is not None:
                    clock.t = event_time  # another message's call may have run meanwhile
                pending = emit(result)
                if pending is not None:
                    await pending
            return
        for result in results:
            for op in self.downstream:
                if clock is not None:
                    clock.t = event_time
                pending = op.timed(result)
                if pending is not None:
                    await pending


awaits_argument(FlatMapAsyncOperator._complete, "awaitable")


class MergeOperator(OperatorImpl):
    kind = "merge"
    __slots__ = ()

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        return self.emit(message)

    def transform(self, message: Any) -> list[Any]:
        return [message]


__all__ = [
    "as_messages",
    "SAMPLE_EVERY",
    "FilterOperator",
    "FlatMapAsyncOperator",
    "FlatMapOperator",
    "InputOperator",
    "MapOperator",
    "MergeOperator",
    "OperatorImpl",
]
