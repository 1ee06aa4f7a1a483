"""What windows add to an application's plan: a store per window, its changelog, a clock.

Each window keeps its state in store ``<op_id>`` (bytes keys and values: the operator
serializes), created with the window's factory (``rocksdb`` unless ``with_store`` says
``inmemory``) and, when the job has a kafka or memory system for intermediate streams, a
changelog ``<job.name>-<job.id>-<op_id>-changelog`` on it, so the state is exact after a
crash. A window that needs a clock (processing time, a timed trigger, an input with an idle
timeout) gives the job ``task.window.ms`` (``WINDOW_TICK_MS``) unless the job file sets it
(above 0: a job file turning it off there is an error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph, upstream_of
from samzapy.api.windows import (
    AnyTrigger,
    RepeatingTrigger,
    TimeSinceFirstMessageTrigger,
    TimeSinceLastMessageTrigger,
    Trigger,
    Window,
)
from samzapy.operators.state_serdes import state_serde

#: ``task.window.ms`` an application gets when a window needs a clock and the job file sets
#: none: the panes of processing-time windows fire within this of their end.
WINDOW_TICK_MS = 100


def window_keys(
    graph: ApplicationGraph,
    set_key: Callable[[str, Any], None],
    job: tuple[str, str],
    changelog_system: str | None,
    config: Mapping[str, Any],
    asynchronous: bool,
) -> None:
    """Set each window's store keys and, when one needs it, the tick; a serde name the job
    does not know is an error here, naming the window (not when its task opens it).
    ``asynchronous``: the graph's operator task is (a ``flat_map_async``, a remote table:
    ``table_plan.is_asynchronous``), so its generated watermarks move at the tick
    (``event_time.py``)."""
    generated = [spec.settings["descriptor"].watermarks for spec in graph.inputs.values()]
    ticks = any(w is not None and w[1] is not None for w in generated)
    ticks = ticks or (asynchronous and any(w is not None for w in generated))
    needs: list[str] = []  # why a window needs the tick
    for spec in graph.operators:
        if spec.kind != "window":
            continue
        window: Window = spec.settings["window"]
        check_window(spec.op_id, window)
        for what, serde in (("key", window.key_serde), ("value", window.value_serde)):
            try:
                state_serde(serde, config)  # as the operator makes it
            except ConfigError as exc:
                raise ConfigError(f"window {spec.op_id!r}: its {what} serde: {exc}") from exc
        prefix = f"stores.{spec.op_id}."
        set_key(prefix + "factory", window.store_factory)
        set_key(prefix + "key.serde", "bytes")
        set_key(prefix + "msg.serde", "bytes")
        if changelog_system is not None:
            set_key(
                prefix + "changelog", f"{changelog_system}.{job[0]}-{job[1]}-{spec.op_id}-changelog"
            )
        needs += _ticks_of(spec, window, asynchronous)
        ticks = ticks or window.early_trigger is not None or window.late_trigger is not None
    if needs:
        tick_needed(config, needs)
    if ticks or needs:
        set_key("task.window.ms", WINDOW_TICK_MS)


def _ticks_of(spec: Any, window: Window, asynchronous: bool) -> list[str]:
    """Why window ``spec`` needs the tick: it runs in processing time, has a time trigger,
    or an input that reaches it in the task makes its watermarks with an idle timeout or in
    an asynchronous graph (moved at the tick)."""
    if not window.event_time:
        return [f"window {spec.op_id!r} in processing time"]
    needs = []
    if any(timed_trigger(t) for t in (window.early_trigger, window.late_trigger)):
        needs.append(f"the time triggers of window {spec.op_id!r}")
    for op in upstream_of(spec):
        if op.kind != "input" or op.settings.get("intermediate") is not None:
            continue
        marks = op.settings["descriptor"].watermarks
        if marks is None:
            continue
        if marks[1] is not None:
            needs.append(
                f"the idle timeout of input {op.op_id!r}, which reaches window {spec.op_id!r}"
            )
        elif asynchronous:
            needs.append(
                f"the watermarks of input {op.op_id!r}, which reach window {spec.op_id!r} and "
                "move at the tick in an asynchronous graph (a flat_map_async, a remote table)"
            )
    return needs


def timed_trigger(trigger: Trigger | None) -> bool:
    """Whether ``trigger`` has a time in it (checked at the tick; a count is not)."""
    if isinstance(trigger, TimeSinceFirstMessageTrigger | TimeSinceLastMessageTrigger):
        return True
    if isinstance(trigger, AnyTrigger):
        return any(timed_trigger(t) for t in trigger.triggers)
    if isinstance(trigger, RepeatingTrigger):
        return timed_trigger(trigger.trigger)
    return False


def tick_needed(
    config: Mapping[str, Any],
    needs: list[str],
    without: str = "these fire only at the end of the input",
) -> None:
    """A job file that turns the tick off (``task.window.ms`` -1 or 0) where the application
    needs it is an error: its processing-time panes, timed triggers, idle inputs or
    asynchronous graph's watermarks would wait for the end of the input (for ever on one that
    does not end). ``without``: what the job would do without the tick."""
    value = config.get("task.window.ms")
    try:
        off = value is not None and int(value) <= 0
    except (TypeError, ValueError):
        return  # not a number: the configuration's own check names it
    if off:
        raise ConfigError(
            f"task.window.ms is {value}, which turns the tick off, and the application needs "
            f"it for {'; '.join(needs)}: without it {without}. "
            f"Leave task.window.ms unset (the application then gets {WINDOW_TICK_MS}) or set "
            "it above 0",
            key="task.window.ms",
        )


def unwatermarked(graph: ApplicationGraph, config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(window op_id, input stream id)`` for each input that reaches an event-time window
    and carries no watermarks (not framed, no ``with_watermarks`` or
    ``samza.watermark.lateness.ms``): such a window fires only at end-of-stream. Intermediate
    streams are followed to the inputs upstream of their writer."""
    found: list[tuple[str, str]] = []
    for spec in graph.operators:
        if spec.kind != "window" or not spec.settings["window"].event_time:
            continue
        for op in upstream_of(spec, through_intermediates=True):
            if op.kind != "input" or op.settings.get("intermediate") is not None:
                continue
            if not carries(op.settings["descriptor"], config):
                found.append((spec.op_id, op.op_id))
    return found


def held_to_the_end(graph: ApplicationGraph, config: Mapping[str, Any]) -> frozenset[str]:
    """The event-time windows an input without watermarks reaches through an intermediate
    stream: they fire at end-of-stream only (``unwatermarked``), in every task. The writers'
    watermarks leave such an input out (``control/reconcile.py``), so a window that followed
    them would take its messages, which may come in any task, for late."""
    found: set[str] = set()
    for spec in graph.operators:
        if spec.kind != "window" or not spec.settings["window"].event_time:
            continue
        for op in upstream_of(spec):
            intermediate = op.settings.get("intermediate") if op.kind == "input" else None
            if intermediate is None or intermediate.writer is None:
                continue
            if any(
                up.kind == "input"
                and up.settings.get("intermediate") is None
                and not carries(up.settings["descriptor"], config)
                for up in upstream_of(intermediate.writer, through_intermediates=True)
            ):
                found.add(spec.op_id)
    return frozenset(found)


def carries(descriptor: Any, config: Mapping[str, Any]) -> bool:
    keys = {**descriptor.to_config(), **config}
    prefix = f"streams.{descriptor.stream_id}.samza."
    return (
        descriptor.watermarks is not None
        or bool(keys.get(prefix + "framed"))
        or keys.get(prefix + "watermark.lateness.ms") is not None
    )


def check_window(op_id: str, window: Window) -> None:
    """What only the whole window says is wrong (its builders check the rest)."""
    if window.kind == "session" and (window.early_trigger or window.late_trigger):
        raise ConfigError(
            f"window {op_id!r}: early and late triggers are not supported on session windows "
            "yet; use a tumbling window, or leave the triggers out"
        )
    session = window.kind == "session" and window.event_time
    if session and not window.collecting and window.merger is None:
        raise ConfigError(
            f"window {op_id!r}: a session window in event time merges two sessions when "
            "a message falls between them, and needs merger=fn(value_a, value_b) to "
            "combine their aggregates (or no aggregator, to collect the messages)"
        )


__all__ = [
    "WINDOW_TICK_MS",
    "carries",
    "check_window",
    "held_to_the_end",
    "tick_needed",
    "timed_trigger",
    "unwatermarked",
    "window_keys",
]
