"""What the drop policies ask of a job's configuration: ``task.dead.letter.stream``.

1. it is ``system.stream``, on a defined system that keeps record headers (a dead letter
   carries the input's headers and those naming its error: not a ``file`` system);
2. something is dropped: ``task.drop.process.errors`` or ``task.drop.deserialization.errors``
   is true (else the stream would stay empty, which is more likely a mistake);
3. it is none of the job's inputs (a dropped message would be read again, dropped again and
   written again, forever) and not a framed stream (``samza.intermediate``, ``samza.framed``:
   its readers expect frames, and a dead letter is the record as read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from samzapy.api.system import SystemStream
from samzapy.config.guarantee import parse_system_stream
from samzapy.config.schema import KEYLESS_FACTORIES

KEY = "task.dead.letter.stream"
DROP_KEYS = ("task.drop.process.errors", "task.drop.deserialization.errors")


def dead_letter_problems(
    values: Mapping[str, Any],
    factories: Mapping[str, str | None],
    problem: Callable[[str, str], None],
    inputs: Sequence[SystemStream] = (),
    streams: Iterable[str] = (),
) -> None:
    """Report, through ``problem(key, message)``, what is wrong with ``values``' (typed keys)
    dead-letter stream; nothing when none is set. ``inputs``: the job's (broadcast ones
    included); ``streams``: the ids under ``streams.``."""
    value = values.get(KEY)
    if value is None:
        return
    parsed = parse_system_stream(str(value))
    if parsed is None:
        problem(KEY, f"{KEY} must be 'system.stream', got {value!r}")
        return
    system = parsed[0]
    if system not in factories:
        problem(
            KEY,
            f"{KEY} refers to system '{system}', which is not defined "
            f"(set systems.{system}.samza.factory)",
        )
    elif factories[system] in KEYLESS_FACTORIES:
        problem(
            KEY,
            f"{KEY}: system '{system}' (samza.factory {factories[system]}) does not keep record "
            "headers, which a dead letter carries; use a kafka or memory system",
        )
    target = SystemStream(*parsed)
    if target in inputs:
        problem(
            KEY,
            f"{KEY} is {value!r}, an input of the job: each message dropped would be read "
            "again, and dropped again; name a stream the job does not read",
        )
    for stream in streams:
        prefix = f"streams.{stream}."
        physical = values.get(prefix + "samza.physical.name") or stream
        framed = any(values.get(f"{prefix}samza.{k}") is True for k in ("intermediate", "framed"))
        on = values.get(prefix + "samza.system")
        if framed and (on, physical) == (target.system, target.stream):
            problem(
                KEY,
                f"{KEY} is {value!r}, the framed stream {stream!r} (samza.intermediate or "
                "samza.framed): its readers expect frames, and a dead letter is a record as "
                "read; name a stream of its own",
            )
    if not any(values.get(k) is True for k in DROP_KEYS):
        problem(
            KEY,
            f"{KEY} is set, but nothing is dropped: set {DROP_KEYS[0]} or {DROP_KEYS[1]} to "
            f"true, or unset {KEY}",
        )


__all__ = ["DROP_KEYS", "KEY", "dead_letter_problems"]
