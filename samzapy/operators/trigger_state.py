"""A tumbling window's trigger state for one pane and key (``tumbling.py``): the messages
counted and their first and last processing times since the pane last fired, whether a
trigger that does not repeat has fired, as kept in memory and in the window's store; and
when a trigger is due for such a state, or the clock can make it so.
"""

from __future__ import annotations

import struct
from typing import Any

from samzapy.api.windows import (
    AnyTrigger,
    CountTrigger,
    RepeatingTrigger,
    TimeSinceFirstMessageTrigger,
    TimeSinceLastMessageTrigger,
    Trigger,
)

#: A trigger's state in the store: count, first and last time (ms; 0 when the count is, which
#: is when they are none: any time, before the epoch too, is one), done.
ARMED_STATE = struct.Struct(">qqq?")


class Armed:
    """A trigger's state for one pane and key: messages and times since the last pane."""

    __slots__ = ("count", "done", "first", "key", "last", "pane", "scheduled")

    def __init__(self, key: Any, pane: int) -> None:
        self.key = key
        self.pane = pane
        self.count = 0
        self.first: int | None = None
        self.last: int | None = None
        self.done = False
        #: When its entry in the window's timers is (None: it has none).
        self.scheduled: int | None = None

    def to_bytes(self) -> bytes:
        first = 0 if self.first is None else self.first
        last = 0 if self.last is None else self.last
        return ARMED_STATE.pack(self.count, first, last, self.done)

    def load(self, data: bytes) -> None:
        # The times are set with the first message counted and cleared with the count
        # (the window's ``_count``, ``_trigger_fire``); a store written when none was -1 reads
        # the same.
        count, first, last, self.done = ARMED_STATE.unpack(data)
        self.count = count
        self.first = first if count else None
        self.last = last if count else None


def trigger_due(trigger: Trigger, armed: Armed, now: int) -> bool:
    if isinstance(trigger, CountTrigger):
        return armed.count >= trigger.count
    if isinstance(trigger, TimeSinceFirstMessageTrigger):
        return armed.first is not None and now - armed.first >= trigger.ms
    if isinstance(trigger, TimeSinceLastMessageTrigger):
        return armed.last is not None and now - armed.last >= trigger.ms
    if isinstance(trigger, AnyTrigger):
        return any(trigger_due(t, armed, now) for t in trigger.triggers)
    if isinstance(trigger, RepeatingTrigger):
        return trigger_due(trigger.trigger, armed, now)
    raise AssertionError(f"unknown trigger {trigger!r}")


def next_time(trigger: Trigger, armed: Armed) -> int | None:
    """The earliest time the clock can make ``trigger`` due for ``armed`` (None: the clock
    cannot, a count's). Messages only move it later (the first and last times only grow),
    so a timer set for it is never late."""
    if isinstance(trigger, TimeSinceFirstMessageTrigger):
        return None if armed.first is None else armed.first + trigger.ms
    if isinstance(trigger, TimeSinceLastMessageTrigger):
        return None if armed.last is None else armed.last + trigger.ms
    if isinstance(trigger, AnyTrigger):
        times = [t for t in (next_time(x, armed) for x in trigger.triggers) if t is not None]
        return min(times, default=None)
    if isinstance(trigger, RepeatingTrigger):
        return next_time(trigger.trigger, armed)
    return None


__all__ = ["ARMED_STATE", "Armed", "next_time", "trigger_due"]
