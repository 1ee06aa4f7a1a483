"""Fusing a chain of operators into one function: the hot path of an application.

Each operator is an object whose ``on_message`` hands its result to the next: one Python call
per operator per message, about 100 ns each, as much as a whole pass-through task spends in
the run loop. ``fuse`` writes the chain after an operator as one function instead (the
technique ``dataclasses`` uses for ``__init__``): maps and filters become statements, a
``send_to`` at the end sends in place, and the first operator it does not inline (a fan-out, a
merge, ``flat_map``, ``flat_map_async``, ``sink``, ``partition_by``, ``broadcast``) gets the
message through its own ``on_message``, so the fused function returns what that returns.
``fuse_input`` starts the chain at an input envelope: the operator task's whole work per
message is one call (and a dict look-up when the task reads several streams).

The generated code names nothing the user wrote: functions, operators and streams are bound
as default arguments under generated names (``f1``, ``o1``...); it behaves as the operators do,
errors included (each function's failure is raised by its own operator's ``failed``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from samzapy.api.envelope import KV, OutgoingMessageEnvelope
from samzapy.operators.impl import (
    SAMPLE_EVERY,
    FilterOperator,
    InputOperator,
    MapOperator,
    OperatorImpl,
)
from samzapy.operators.sends import SendToOperator

Chain = Callable[[Any], Awaitable[Any] | None]


def fuse_input(entry: InputOperator) -> Chain:
    """One function taking an envelope of ``entry``'s stream through the whole chain: the
    message (``KV(key, message)`` for a keyed stream) counted as the input's, one in
    ``SAMPLE_EVERY`` timed through every operator it reaches, the others fused."""
    message = "KV(envelope.key, envelope.message)" if entry.keyed else "envelope.message"
    prologue = [
        f"message = {message}",
        "n = o0.out + 1",
        "o0.out = n",
        f"if not n % {SAMPLE_EVERY}:",
        "    return o0.timed(message)",
    ]
    return _compile(entry, "envelope", prologue)


def fuse(first: OperatorImpl) -> Chain:
    """One function doing what ``first.emit`` does (the chain after ``first``)."""
    return _compile(first, "message", [])


def _compile(first: OperatorImpl, argument: str, prologue: list[str]) -> Chain:
    bound: dict[str, Any] = {"KV": KV, "OGE": OutgoingMessageEnvelope, "o0": first}
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
            ]
        elif isinstance(nxt, FilterOperator):
            bound[f"f{n}"] = nxt.fn
            body += [
                "try:",
                f"    keep = f{n}(message)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc) from exc",
                "if not keep:",
                "    return None",
                f"{o}.out += 1",
            ]
        elif isinstance(nxt, SendToOperator):
            bound[f"s{n}"] = nxt.stream
            body += [
                "if type(message) is KV:",
                f"    envelope = OGE(s{n}, message[1], message[0])",
                "else:",
                f"    envelope = OGE(s{n}, message)",
                "try:",
                f"    {o}.send(envelope)",
                "except Exception as exc:",
                f"    raise {o}.failed(exc, 'send to ' + str(s{n})) from exc",
                "return None",
            ]
            break
        else:
            body.append(f"return {o}.on_message(message)")
            break
        op = nxt
    defaults = ", ".join(f"{name}={name}" for name in bound)
    source = f"def chain({argument}, {defaults}):\n" + "".join(f"    {line}\n" for line in body)
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<fused chain after {first.op_id}>", "exec"), dict(bound), namespace)
    chain: Chain = namespace["chain"]
    return chain


__all__ = ["Chain", "fuse", "fuse_input"]
