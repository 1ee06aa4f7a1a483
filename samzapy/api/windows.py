"""Windows and triggers of the high-level API (Samza's ``Windows``, ``Triggers``,
``WindowPane``), pure descriptions: ``samzapy.operators.windows`` runs them.

A window groups a stream's messages by key (``keyed_*``) and by time, aggregates each group
(``aggregator(message, value) -> value`` from ``initial_value()``, or the list of messages in
the forms without an aggregator) and emits ``WindowPane``s:

- tumbling windows of ``interval``, aligned to the epoch: a message at ``t`` (ms since the
  epoch) is in the pane whose id is ``t - t % interval``, which ends at ``id + interval``;
- session windows: a key's messages less than ``session_gap`` apart are one session, which ends
  ``session_gap`` after its last message; its pane id is its first message's time. In event
  time a message between two sessions merges them (their values are combined by ``merger``,
  or the lists concatenated in the collecting form).

Time domains. By default a window runs in processing time (Samza's semantics): a message's time
is when it is processed, a pane fires when the clock passes its end. ``with_event_time`` makes
it run in event time (each message's time comes from its input: the record's timestamp, or the
input descriptor's ``with_timestamp``): a window's DEFAULT pane fires when the task's
watermark for the window's inputs reaches the window's end; a message for a window that has
fired, within ``allowed_lateness``, fires a LATE pane at once (or when the late trigger says);
a message later than that is dropped (counted, logged once per window) or sent to
``with_late_output``. Watermark ``W`` means: no message with a time below ``W`` is still to
come (Flink's and Beam's reading); a window ``[start, end)`` is complete when ``W >= end``.

Triggers fire EARLY panes before the window's end: ``Triggers.count(n)``,
``time_since_first_message(d)``, ``time_since_last_message(d)`` (processing time, as in Samza),
``any(...)`` and ``repeat(trigger)``. A trigger that is not repeated fires once per window. In
DISCARDING mode (the default, as Samza) each pane holds what came since the pane before; in
ACCUMULATING mode each pane holds the whole window's value so far.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NamedTuple

from samzapy.api.durations import duration_ms
from samzapy.api.errors import ConfigError
from samzapy.api.functions import check_sync_function


class FiringType(enum.Enum):
    """Why a pane fired: a trigger before the end (EARLY), the end itself (DEFAULT), or a
    message for a window that had already fired (LATE)."""

    EARLY = "early"
    DEFAULT = "default"
    LATE = "late"


class AccumulationMode(enum.Enum):
    """What a pane after the first holds: the whole window's value (ACCUMULATING) or what
    came since the pane before (DISCARDING)."""

    ACCUMULATING = "accumulating"
    DISCARDING = "discarding"


class WindowKey(NamedTuple):
    """A pane's key: the group's key (None for a window that is not keyed) and the pane's id,
    the window's start in ms since the epoch."""

    key: Any
    pane_id: int


class WindowPane(NamedTuple):
    """One firing of a window: its key, the aggregate (or the list of messages), why it fired."""

    key: WindowKey
    message: Any
    firing_type: FiringType


# -- triggers -------------------------------------------------------------------------------


class Trigger:
    """When a window fires before its end (or again after it): see ``Triggers``."""

    __slots__ = ()

    def describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.describe()


class CountTrigger(Trigger):
    __slots__ = ("count",)

    def __init__(self, count: int) -> None:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"Triggers.count takes a count of 1 or more, got {count!r}")
        self.count = count

    def describe(self) -> str:
        return f"count({self.count})"


class TimeSinceFirstMessageTrigger(Trigger):
    __slots__ = ("ms",)

    def __init__(self, duration: timedelta) -> None:
        self.ms = duration_ms(duration, "Triggers.time_since_first_message's duration")

    def describe(self) -> str:
        return f"time_since_first_message({self.ms} ms)"


class TimeSinceLastMessageTrigger(Trigger):
    __slots__ = ("ms",)

    def __init__(self, duration: timedelta) -> None:
        self.ms = duration_ms(duration, "Triggers.time_since_last_message's duration")

    def describe(self) -> str:
        return f"time_since_last_message({self.ms} ms)"


class AnyTrigger(Trigger):
    __slots__ = ("triggers",)

    def __init__(self, triggers: tuple[Trigger, ...]) -> None:
        if not triggers:
            raise ConfigError("Triggers.any takes one or more triggers")
        for trigger in triggers:
            _check_trigger(trigger, "Triggers.any")
        self.triggers = triggers

    def describe(self) -> str:
        return f"any({', '.join(t.describe() for t in self.triggers)})"


class RepeatingTrigger(Trigger):
    __slots__ = ("trigger",)

    def __init__(self, trigger: Trigger) -> None:
        self.trigger = _check_trigger(trigger, "Triggers.repeat")

    def describe(self) -> str:
        return f"repeat({self.trigger.describe()})"


def _check_trigger(trigger: Any, what: str) -> Trigger:
    if not isinstance(trigger, Trigger):
        raise ConfigError(
            f"{what} takes a trigger made by Triggers (count, time_since_first_message, "
            f"time_since_last_message, any, repeat), got {trigger!r}"
        )
    return trigger


class Triggers:
    """Samza's trigger factory."""

    @staticmethod
    def count(n: int) -> Trigger:
        """Fires once ``n`` messages came since the window's last pane."""
        return CountTrigger(n)

    @staticmethod
    def time_since_first_message(duration: timedelta) -> Trigger:
        """Fires ``duration`` (processing time) after the first message since the last pane."""
        return TimeSinceFirstMessageTrigger(duration)

    @staticmethod
    def time_since_last_message(duration: timedelta) -> Trigger:
        """Fires once no message came for ``duration`` (processing time)."""
        return TimeSinceLastMessageTrigger(duration)

    @staticmethod
    def any(*triggers: Trigger) -> Trigger:
        """Fires when the first of ``triggers`` fires."""
        return AnyTrigger(tuple(triggers))

    @staticmethod
    def repeat(trigger: Trigger) -> Trigger:
        """``trigger``, armed again each time it fires (else a trigger fires once a window)."""
        return RepeatingTrigger(trigger)


# -- windows --------------------------------------------------------------------------------


class Window:
    """A window's description (``Windows`` makes them); every ``set_*``/``with_*`` returns it."""

    __slots__ = (
        "accumulation_mode",
        "aggregator",
        "allowed_lateness_ms",
        "early_trigger",
        "event_time",
        "initial_value",
        "key_fn",
        "key_serde",
        "kind",
        "late_output",
        "late_trigger",
        "merger",
        "size_ms",
        "store_factory",
        "value_serde",
    )

    def __init__(
        self,
        kind: str,
        key_fn: Callable[[Any], Any] | None,
        size_ms: int,
        initial_value: Callable[[], Any] | None,
        aggregator: Callable[[Any, Any], Any] | None,
        key_serde: Any,
        value_serde: Any,
        merger: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        self.kind = kind  # "tumbling" or "session"
        self.key_fn = key_fn
        self.size_ms = size_ms  # the interval, or the session gap
        if (initial_value is None) != (aggregator is None):
            raise ConfigError(
                "a window takes both initial_value and aggregator, or neither (then each pane "
                "holds the list of its messages)"
            )
        for fn, what in (
            (key_fn, "key function"),
            (initial_value, "initial_value"),
            (aggregator, "aggregator"),
            (merger, "merger"),
        ):
            if fn is not None:
                check_sync_function(fn, f"the window's {what}")
        self.initial_value = initial_value
        self.aggregator = aggregator
        self.merger = merger
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.early_trigger: Trigger | None = None
        self.late_trigger: Trigger | None = None
        self.accumulation_mode = AccumulationMode.DISCARDING
        self.event_time = False
        self.allowed_lateness_ms = 0
        #: An OutputStream (checked by ``MessageStream.window``), or None.
        self.late_output: Any = None
        self.store_factory = "rocksdb"

    @property
    def keyed(self) -> bool:
        return self.key_fn is not None

    @property
    def collecting(self) -> bool:
        """Whether panes hold the list of messages (no aggregator)."""
        return self.aggregator is None

    def set_early_trigger(self, trigger: Trigger) -> Window:
        """Fire EARLY panes when ``trigger`` fires, before the window's end."""
        self.early_trigger = _check_trigger(trigger, "set_early_trigger")
        return self

    def set_late_trigger(self, trigger: Trigger) -> Window:
        """Fire LATE panes when ``trigger`` fires (default: at each late message)."""
        self.late_trigger = _check_trigger(trigger, "set_late_trigger")
        return self

    def set_accumulation_mode(self, mode: AccumulationMode) -> Window:
        if not isinstance(mode, AccumulationMode):
            raise ConfigError(
                "set_accumulation_mode takes AccumulationMode.ACCUMULATING or "
                f"AccumulationMode.DISCARDING, got {mode!r}"
            )
        self.accumulation_mode = mode
        return self

    def with_event_time(self, allowed_lateness: timedelta = timedelta(0)) -> Window:
        """Run in event time, closed by the task's watermarks; messages up to
        ``allowed_lateness`` after their window fired fire LATE panes."""
        self.allowed_lateness_ms = duration_ms(
            allowed_lateness, "with_event_time's allowed_lateness", positive=False
        )
        self.event_time = True
        return self

    def with_late_output(self, output: Any) -> Window:
        """Send messages too late for their window to ``output`` (an OutputStream) instead of
        dropping them."""
        self.late_output = output
        return self

    def with_store(self, factory: str) -> Window:
        """Where the window keeps its state: ``rocksdb`` (default) or ``inmemory``; both have a
        changelog when the job has a system for one."""
        if factory not in ("rocksdb", "inmemory"):
            raise ConfigError(f"with_store takes rocksdb or inmemory, got {factory!r}")
        self.store_factory = factory
        return self

    def describe(self) -> str:
        """How ``samzapy plan`` shows it: kind, size, time domain, lateness, triggers and
        accumulation mode."""
        size = "interval" if self.kind == "tumbling" else "gap"
        keyed = "keyed " if self.keyed else ""
        text = f"{keyed}{self.kind} {size} {self.size_ms} ms, "
        if self.event_time:
            text += f"event time, allowed lateness {self.allowed_lateness_ms} ms"
        else:
            text += "processing time"
        if self.early_trigger is not None:
            text += f", early {self.early_trigger.describe()}"
        if self.late_trigger is not None:
            text += f", late {self.late_trigger.describe()}"
        return f"{text}, {self.accumulation_mode.value}"

    def __repr__(self) -> str:
        return f"Window({self.describe()})"


class Windows:
    """Samza's window factory; ``interval`` and ``session_gap`` are ``timedelta``s."""

    @staticmethod
    def keyed_tumbling_window(
        key_fn: Callable[[Any], Any],
        interval: timedelta,
        initial_value: Callable[[], Any] | None = None,
        aggregator: Callable[[Any, Any], Any] | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> Window:
        """Panes per ``key_fn(message)`` and per ``interval``, aligned to the epoch."""
        if key_fn is None:
            raise ConfigError("keyed_tumbling_window needs a key function")
        size = duration_ms(interval, "keyed_tumbling_window's interval")
        return Window("tumbling", key_fn, size, initial_value, aggregator, key_serde, value_serde)

    @staticmethod
    def tumbling_window(
        interval: timedelta,
        initial_value: Callable[[], Any] | None = None,
        aggregator: Callable[[Any, Any], Any] | None = None,
        value_serde: Any = None,
    ) -> Window:
        """One pane per ``interval`` for the whole stream (of the task), aligned to the epoch."""
        size = duration_ms(interval, "tumbling_window's interval")
        return Window("tumbling", None, size, initial_value, aggregator, None, value_serde)

    @staticmethod
    def keyed_session_window(
        key_fn: Callable[[Any], Any],
        session_gap: timedelta,
        initial_value: Callable[[], Any] | None = None,
        aggregator: Callable[[Any, Any], Any] | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
        merger: Callable[[Any, Any], Any] | None = None,
    ) -> Window:
        """Sessions per ``key_fn(message)``: messages less than ``session_gap`` apart.
        ``merger(a, b)`` combines two sessions' values when a message joins them (event
        time; required there with an aggregator)."""
        if key_fn is None:
            raise ConfigError("keyed_session_window needs a key function")
        gap = duration_ms(session_gap, "keyed_session_window's session_gap")
        return Window(
            "session", key_fn, gap, initial_value, aggregator, key_serde, value_serde, merger
        )

    @staticmethod
    def session_window(
        session_gap: timedelta,
        initial_value: Callable[[], Any] | None = None,
        aggregator: Callable[[Any, Any], Any] | None = None,
        value_serde: Any = None,
        merger: Callable[[Any, Any], Any] | None = None,
    ) -> Window:
        """Sessions of the whole stream (of the task)."""
        gap = duration_ms(session_gap, "session_window's session_gap")
        return Window("session", None, gap, initial_value, aggregator, None, value_serde, merger)


__all__ = [
    "AccumulationMode",
    "AnyTrigger",
    "CountTrigger",
    "FiringType",
    "RepeatingTrigger",
    "TimeSinceFirstMessageTrigger",
    "TimeSinceLastMessageTrigger",
    "Trigger",
    "Triggers",
    "Window",
    "WindowKey",
    "WindowPane",
    "Windows",
]
