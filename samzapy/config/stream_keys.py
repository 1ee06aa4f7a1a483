"""Checks of ``streams.<id>`` keys that only an input uses, and Samza's keys that samzapy
does not have (its input keys, and those naming a Java class samzapy has no place for).

Where a stream starts (``samza.offset.default``, ``samza.reset.offset``), whether it is read to
its head first (``samza.bootstrap``) and how its watermarks are derived
(``samza.watermark.lateness.ms``, ``samza.watermark.idle.ms``) mean something only for a
stream the job reads. Set for a stream id that matches none of the job's inputs, such a key
is a typo of the id, most likely, and ignored silently it would do harm: an input meant to
start at ``oldest`` starts at the system's default, and its checkpoint keeps it there.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from samzapy.api.system import SystemStream

#: The keys (after ``streams.<id>.``) that only an input uses.
INPUT_ONLY = (
    "samza.offset.default",
    "samza.reset.offset",
    "samza.bootstrap",
    "samza.watermark.lateness.ms",
    "samza.watermark.idle.ms",
)


#: Samza's input keys that samzapy does not have, each with what to do instead (filled with
#: the key's named groups): an unknown key, but not one to suggest a close name for.
_NOT_IN_SAMZAPY = (
    (
        re.compile(
            r"streams\.[^.]+\.samza\.priority|systems\.[^.]+\.default\.stream\.samza\.priority"
        ),
        "samzapy has no input priorities (Samza's DefaultChooser): a task takes its inputs "
        "in turn; to read a stream before the others, make it a bootstrap stream with "
        "streams.<id>.samza.bootstrap: true",
    ),
    (
        re.compile(r"systems\.[^.]+\.default\.stream\.samza\.bootstrap"),
        "a system's default.stream.* keys give only samza.offset.default and "
        "samza.reset.offset to its streams; set streams.<id>.samza.bootstrap: true on each "
        "stream to bootstrap",
    ),
    (
        re.compile(
            r"systems\.(?P<system>[^.]+)\.default\.stream\.samza\.(?P<which>key|msg)\.serde"
        ),
        "a system's serdes are set with systems.{system}.samza.{which}.serde "
        "(streams.<id>.samza.{which}.serde for one stream)",
    ),
    (
        re.compile(r"metrics\.reporter\.[^.]+\.class"),
        "samzapy's reporters are listed in metrics.reporters by name (log, prometheus) or "
        "as the 'module:Class' path of a samzapy.metrics.MetricsReporter; Samza's reporter "
        "classes (JmxReporterFactory, MetricsSnapshotReporterFactory) have no counterpart",
    ),
    (
        re.compile(r"job\.factory\.class"),
        "samzapy runs a job itself (samzapy run job.yaml; docs/deploy.md for a cluster): "
        "there is no job factory to name; leave it out",
    ),
    (
        re.compile(r"job\.systemstreampartition\.grouper\.factory|task\.name\.grouper\.factory"),
        "samzapy groups input partitions by partition number, one task per number, as "
        "Samza's default GroupByPartitionFactory does, and has no other grouper; leave it out",
    ),
)


def not_in_samzapy(key: str) -> str | None:
    """Why samzapy refuses ``key``, one of Samza's keys it does not have (None: another)."""
    for pattern, reason in _NOT_IN_SAMZAPY:
        if (match := pattern.fullmatch(key)) is not None:
            return reason.format(**match.groupdict())
    return None


def input_key_problems(
    values: Mapping[str, Any],
    streams: Iterable[str],
    inputs: Sequence[SystemStream],
    problem: Callable[[str | None, str], None],
) -> None:
    """Report an input-only key of a stream id that is none of ``inputs`` (the job's, broadcast
    ones included; an entry matches an input by physical name, and by system when it names
    one)."""
    for stream in streams:  # an idle timeout applies to the watermarks a lateness derives
        prefix = f"streams.{stream}.samza.watermark."
        if prefix + "idle.ms" in values and prefix + "lateness.ms" not in values:
            problem(
                prefix + "idle.ms",
                f"{prefix}idle.ms is set without {prefix}lateness.ms: the idle timeout "
                "applies to the watermarks a stream derives from its messages' times; set "
                "both, or neither",
            )
    if not inputs:  # no inputs to compare with: another check reports that
        return
    names = sorted({ss.stream for ss in inputs})
    for stream in streams:
        keys = [f"streams.{stream}.{k}" for k in INPUT_ONLY if f"streams.{stream}.{k}" in values]
        if not keys:
            continue
        physical = values.get(f"streams.{stream}.samza.physical.name") or stream
        system = values.get(f"streams.{stream}.samza.system")
        if any(ss.stream == physical and system in (None, ss.system) for ss in inputs):
            continue
        close = difflib.get_close_matches(physical, names, n=1, cutoff=0.75)
        hint = f"; did you mean the input {close[0]!r}?" if close else ""
        problem(
            keys[0],
            f"{keys[0]} is set, but stream {stream!r} is none of the job's inputs "
            f"({', '.join(names)}), and only an input uses it{hint}",
        )


__all__ = ["INPUT_ONLY", "input_key_problems"]
