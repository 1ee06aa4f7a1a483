"""Fusing a chain of operators into one function: the hot path of an application.

Each operator is an object whose ``on_message`` hands its result to the next: one Python call
per operator per message, about 100 ns each, as much as a whole pass-through task spends in
the run loop. ``fuse`` writes the chain after an operator as one function instead (the
technique ``dataclasses`` uses for ``__init__``): maps and filters become statements, a
``send_to`` or ``partition_by`` at the end sends in place, and the first operator it does not
inline (a fan-out, a merge, ``flat_map``, ``flat_map_async``, ``sink``, ``broadcast``) gets the
message through its own ``on_message``, so the fused function returns what that returns.
``fuse_input`` starts the chain at an input envelope: the operator task's whole work per
message is one call (and a dict look-up when the task reads several streams).

The generated code names nothing the user wrote: functions, operators and streams are bound
as default arguments under generated names (``f1``, ``o1``...); it behaves as the operators do,
errors included (each function's failure is raised by its own operator's ``failed``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any

from samzapy.api.descriptors import MAX_EVENT_TIME, MIN_EVENT_TIME, event_time_ms
from samzapy.api.envelope import KV, OutgoingMessageEnvelope
from samzapy.api.errors import OperatorError, SerdeError
from samzapy.operators.awaiting import not_awaited
from samzapy.operators.event_time import firing_failed
from samzapy.operators.impl import (
    SAMPLE_EVERY,
    FilterOperator,
    InputOperator,
    MapOperator,
    OperatorImpl,
)
from samzapy.operators.sends import PartitionByOperator, SendToOperator

Chain = Callable[[Any], Awaitable[Any] | None]
#: An input's chain, shaped as a task's ``process``: ``(envelope, collector, coordinator)``.
Entry = Callable[[Any, Any, Any], Awaitable[Any] | None]


def fuse_input(
    entry: InputOperator,
    bind: Callable[[Any, Any], None],
    clock: Any = None,
    timestamp_fn: Callable[[Any], Any] | None = None,
    observe: Callable[[Any], None] | None = None,
    timed_by_consumer: bool = False,
) -> Entry:
    """One function taking an envelope of ``entry``'s stream through the whole chain, with
    the signature of a task's ``process``: ``bind(collector, coordinator)`` the first time a
    collector comes (the operators that send keep its ``send``), the message (``KV(key,
    message)`` for a keyed stream) counted as the input's, one in ``SAMPLE_EVERY`` timed
    through every operator it reaches, the others fused. With a ``clock`` (the graph keeps
    event time) the message's time is set on it first: ``timestamp_fn(message)`` or the
    record's timestamp, and handed to ``observe`` (a stream generating its watermarks).
    ``timed_by_consumer``: the container set the envelope's timestamp to
    ``timestamp_fn``'s (the stream's derived watermarks read it; None where it failed, and
    the function is called here again to fail the task)."""
    if SAMPLE_EVERY & (SAMPLE_EVERY - 1):
        raise AssertionError("SAMPLE_EVERY must be a power of two")
    # tuple.__new__ makes the KV without NamedTuple's __new__ in Python (a third of the time)
    keyed = "new(KV, (envelope.key, envelope.message))"
    message = keyed if entry.keyed else "envelope.message"
    prologue = [
        "if collector is not bound:",
        "    bound = collector",
        "    bind(collector, coordinator)",
        f"message = {message}",
    ]
    extra: dict[str, Any] = {"bind": bind}
    if clock is not None:
        extra["clk"] = clock
        if timestamp_fn is None:
            prologue.append("ts = envelope.timestamp")
        else:
            extra.update(tsf=timestamp_fn, as_time=event_time_ms)
            timing = [
                "try:",
                "    ts = tsf(message)",
                f"    if type(ts) is not int or not {MIN_EVENT_TIME} <= ts <= {MAX_EVENT_TIME}:",
                "        ts = as_time(ts)",
                "except Exception as exc:",
                "    raise o0.failed(exc, 'timestamp function') from exc",
            ]
            if timed_by_consumer:  # the container's derived watermarks timed it already
                prologue += ["ts = envelope.timestamp", "if ts is None:"]
                prologue += [f"    {line}" for line in timing]
            else:
                prologue += timing
        prologue.append("clk.t = ts")
        if observe is not None:  # may fire panes: their failure is not the message's
            extra.update(observe=observe, fired=firing_failed)
            prologue += [
                "try:",
                "    observe(ts)",
                "except Exception as exc:",
                "    fired(exc, o0)",
            ]
    prologue += _counted("c0", sampled=True)
    chain: Entry = _compile(entry, "envelope, collector, coordinator", prologue, extra)
    return chain


def fuse(first: OperatorImpl) -> Chain:
    """One function doing what ``first.emit`` does (the chain after ``first``)."""
    chain: Chain = _compile(first, "message", [], {})
    return chain


def _compile(
    first: OperatorImpl, arguments: str, prologue: list[str], extra: dict[str, Any]
) -> Any:
    """Writes ``make(<bound values>)``, which returns the chain and a function reading its
    counters: closure cells (``c0`` the first operator's, when the prologue counts it; one
    per filter), cheaper than an attribute of an operator."""
    bound: dict[str, Any] = {
        "KV": KV,
        "OGE": OutgoingMessageEnvelope,
        "new": tuple.__new__,
        "o0": first,
        **extra,
    }
    counters: list[tuple[str, OperatorImpl]] = []
    if any("c0" in line for line in prologue):
        counters.append(("c0", first))
    body: list[str] = list(prologue)
    op = first
    n = 0
    while True:
        if len(op.downstream) != 1:
            if not op.downstream:
                body.append("return None")
            else:  # a fan-out: each operator after it in turn
                bound["fan_out"] = op._fan_out
                body.append("return fan_out(message)")
            break
        n += 1
        nxt = op.downstream[0]
        o = f"o{n}"
        bound[o] = nxt
        if isinstance(nxt, MapOperator):
            bound[f"f{n}"] = nxt.fn
            body += [
                "try:",
                f"    message = f{n}(message)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc) from exc",
                "if message is None:",  # Samza's map: a null result goes no further
                f"    {o}.dropped += 1",
                "    return None",
            ]
        elif isinstance(nxt, FilterOperator):
            bound[f"f{n}"] = nxt.fn
            bound.update(CoroutineType=CoroutineType, not_awaited=not_awaited)
            counters.append((f"c{n}", nxt))
            body += [
                "try:",
                f"    keep = f{n}(message)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc) from exc",
                "if not keep:",
                "    return None",
                "if keep is not True and type(keep) is CoroutineType:",  # true, never run
                '    error = not_awaited(keep, "filter\'s function")',
                f"    raise {o}.failed(error) from error",
                *_counted(f"c{n}"),
            ]
        elif isinstance(nxt, PartitionByOperator):
            bound.update({f"k{n}": nxt.key_fn, f"v{n}": nxt.value_fn, f"s{n}": nxt.stream})
            bound["SerdeError"] = SerdeError
            body += [
                "try:",
                f"    key = k{n}(message)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'key function') from exc",
                "try:",
                f"    value = v{n}(message)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'value function') from exc",
                f"envelope = OGE(s{n}, value, key)",
                *_stamp(nxt, n, bound),
                "try:",
                f"    {o}.send(envelope)",
                "except SerdeError as exc:",
                f"    raise {o}.unserializable(exc) from exc",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'send to ' + str(s{n})) from exc",
                "return None",
            ]
            break
        elif isinstance(nxt, SendToOperator):
            bound[f"s{n}"] = nxt.stream
            body += [
                "if type(message) is KV:",
                f"    envelope = OGE(s{n}, message[1], message[0])",
                "else:",
                f"    envelope = OGE(s{n}, message)",
                *_stamp(nxt, n, bound),
                "try:",
                f"    {o}.send(envelope)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'send to ' + str(s{n})) from exc",
                "return None",
            ]
            break
        else:
            # Its own errors (a store's serde, say) name it; those of the operators after it
            # name themselves already.
            bound["OperatorError"] = OperatorError
            body += [
                "try:",
                f"    return {o}.on_message(message)",
                "except OperatorError:",
                "    raise",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'processing') from exc",
            ]
            break
        op = nxt
    cells = [cell for name, _ in counters for cell in (name, "w" + name[1:])]
    if "bind" in bound:
        cells.append("bound")
    lines = [f"def make({', '.join(bound)}):"]
    lines += [f"    {cell} = {'None' if cell == 'bound' else '0'}" for cell in cells]
    lines.append(f"    def chain({arguments}):")
    if cells:
        lines.append(f"        nonlocal {', '.join(cells)}")
    lines += [f"        {line}" for line in body]
    counted = ", ".join(f"w{name[1:]} * {WRAP} + {name}" for name, _ in counters)
    lines += ["    def counts():", f"        return ({counted}{',' if counters else ''})"]
    lines.append("    return chain, counts")
    namespace: dict[str, Any] = {}
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<fused chain after {first.op_id}>", "exec"), {}, namespace)
    chain, counts = namespace["make"](**bound)
    for index, (_, counted_op) in enumerate(counters):
        counted_op.fused_counts.append(_reader(counts, index))
    return chain


#: A counter cell counts up to this, then starts again from 0 and its wraps cell counts one:
#: it stays within CPython's cached small ints (up to 256), so that counting a message
#: allocates no int (a larger one is a new object at each increment, then freed).
WRAP = 256


def _counted(cell: str, sampled: bool = False) -> list[str]:
    """The lines counting a message in ``cell`` (with its wraps in ``w...``): the first
    operator's count also times one message in ``SAMPLE_EVERY`` through the chain.

    The count is ``wraps * WRAP + cell``. The cell is reset before the wraps move on, so a
    count read meanwhile (by the metrics, on the loop thread, while the chain runs on the
    thread pool) may fall short, never exceed the messages counted (``_reader``)."""
    wraps = "w" + cell[1:]
    lines = [f"{cell} += 1", f"if {cell} == {WRAP}:", f"    {cell} = 0", f"    {wraps} += 1"]
    if not sampled:
        return lines
    if SAMPLE_EVERY <= WRAP:  # a power of two: a sample at each multiple of it
        return [*lines, f"if not {cell} & {SAMPLE_EVERY - 1}:", "    return o0.timed(message)"]
    every = SAMPLE_EVERY // WRAP
    return [*lines, f"    if not {wraps} & {every - 1}:", "        return o0.timed(message)"]


def _stamp(op: Any, n: int, bound: dict[str, Any]) -> list[str]:
    """The line giving a send the message's event time (a graph keeping event time)."""
    if op.clock is None:
        return []
    bound[f"t{n}"] = op.clock
    return [f"envelope.timestamp = t{n}.t"]


def _reader(counts: Callable[[], tuple[int, ...]], index: int) -> Callable[[], int]:
    """Counter ``index`` of ``counts``, never less than it read before (a read while its cell
    wraps on another thread falls short: ``_counted``)."""
    last = 0

    def read() -> int:
        nonlocal last
        last = max(last, counts()[index])
        return last

    return read


__all__ = ["Chain", "Entry", "fuse", "fuse_input"]
