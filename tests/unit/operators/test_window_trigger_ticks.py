"""What a window's tick costs with many keys: the tick (``task.window.ms``, every 100 ms by
default) fires the time triggers that came due, and looks at no other key's trigger state. A
window whose triggers are all counts has none to look at; one with a time trigger looks at
the keys whose time came. Walking each key's state at every tick took 165 ms for 200,000
keys: more than the tick's interval, a barrier during which the task processes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from samzapy import AccumulationMode, Triggers, Window, Windows
from samzapy.api.windows import Trigger
from samzapy.operators import tumbling
from samzapy.operators.event_time import EventClock
from samzapy.operators.state_serdes import StateSerde
from samzapy.operators.tumbling import TumblingWindowOperator

S = timedelta(seconds=1)


class Store:
    """A window store's few methods that messages and triggers use, over a dict."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self.data[key] = value

    def delete(self, key: bytes) -> None:
        self.data.pop(key, None)


class Counting:
    """A keyed tumbling count of 10 s in event time, run by one operator on a clock the test
    moves (ms), its panes in ``panes``; ``looked`` counts the trigger states checked."""

    def __init__(self, early: Trigger, keys: int, monkeypatch: pytest.MonkeyPatch) -> None:
        window: Window = Windows.keyed_tumbling_window(
            lambda m: m, 10 * S, lambda: 0, lambda m, n: n + 1
        ).with_event_time()
        window.set_early_trigger(early).set_accumulation_mode(AccumulationMode.ACCUMULATING)
        functions = {"key_fn": window.key_fn, "initial_value": window.initial_value}
        functions["aggregator"] = window.aggregator
        op = self.op = TumblingWindowOperator("w", window, functions, EventClock(), None, [])
        op.store = Store()
        op.kserde = op.vserde = StateSerde()
        self.now = 0
        op.now_ms = lambda: self.now
        self.panes: list[Any] = []
        op.emit = lambda pane: self.panes.append((pane.key.key, pane.message))
        self.looked = 0
        due = tumbling.trigger_due

        def counted(trigger: Trigger, *args: Any) -> bool:
            self.looked += trigger is early  # the window's trigger, not the ones inside it
            return due(trigger, *args)

        monkeypatch.setattr(tumbling, "trigger_due", counted)
        for key in range(keys):
            op.message(key, key, 1_000)
        self.looked = 0

    def tick(self, now: int) -> None:
        self.now = now
        self.op.timed_triggers()


@pytest.mark.parametrize(
    "early",
    [
        Triggers.repeat(Triggers.count(100)),
        Triggers.any(Triggers.count(5), Triggers.count(7)),
    ],
    ids=["count", "any of counts"],
)
def test_the_tick_looks_at_no_state_of_count_triggers(
    early: Trigger, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = Counting(early, 1_000, monkeypatch)
    window.tick(60_000)
    assert window.looked == 0


def test_the_tick_looks_only_at_the_time_triggers_whose_time_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trigger = Triggers.repeat(
        Triggers.any(Triggers.count(100), Triggers.time_since_last_message(S))
    )
    window = Counting(trigger, 1_000, monkeypatch)  # each key's first message at 0 ms
    window.now = 500
    window.op.message(7, 7, 2_000)  # key 7's second message, half a second later
    window.looked = 0
    window.tick(999)
    assert (window.looked, window.panes) == (0, [])  # none due: none looked at
    window.tick(1_000)
    assert window.looked == 1_000  # every key but 7 is due, and 7 was looked at again
    assert len(window.panes) == 999 and (7, 2) not in window.panes
    window.looked = 0
    window.tick(1_499)
    assert (window.looked, len(window.panes)) == (0, 999)
    window.tick(1_500)  # a second after key 7's last message
    assert window.looked == 1 and window.panes[-1] == (7, 2)
    window.tick(60_000)  # every state fired: repeated, it waits for its next message
    assert window.looked == 1
