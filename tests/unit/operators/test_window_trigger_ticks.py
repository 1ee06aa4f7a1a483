"""What a window's tick costs with many keys: the tick (``task.window.ms``, every 100 ms by
default) checks the time triggers, and a window whose triggers are all counts has none to
check. Walking each key's trigger state at every tick anyway took 165 ms for 200,000 keys:
more than the tick's interval, a barrier during which the task processes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from samzapy import Triggers, Window, Windows
from samzapy.operators.event_time import EventClock
from samzapy.operators.tumbling import TumblingWindowOperator, _Armed

S = timedelta(seconds=1)


class Walked(dict):  # type: ignore[type-arg]
    """The window's trigger states, counting the walks over them."""

    walks = 0

    def items(self) -> Any:
        self.walks += 1
        return super().items()


def operator(window: Window, keys: int) -> tuple[TumblingWindowOperator, Walked]:
    functions = {"key_fn": window.key_fn, "initial_value": None, "aggregator": None}
    op = TumblingWindowOperator("w", window, functions, EventClock(), None, [])
    armed = Walked()
    for i in range(keys):
        state = armed[b"T" + i.to_bytes(8, "big")] = _Armed(f"k{i}", 0)
        state.count, state.first, state.last = 1, 0, 0
    op.armed = armed
    op.now_ms = lambda: 1  # a millisecond after each key's message
    return op, armed


def keyed() -> Window:
    return Windows.keyed_tumbling_window(lambda m: m["k"], 10 * S).with_event_time(S)


@pytest.mark.parametrize(
    "window",
    [
        keyed().set_early_trigger(Triggers.repeat(Triggers.count(100))),
        keyed().set_late_trigger(Triggers.count(2)),
        keyed().set_early_trigger(Triggers.any(Triggers.count(5), Triggers.count(7))),
    ],
    ids=["early count", "late count", "any of counts"],
)
def test_the_tick_leaves_the_states_of_count_triggers_alone(window: Window) -> None:
    op, armed = operator(window, 1_000)
    op.timed_triggers()
    assert armed.walks == 0


def test_the_tick_still_checks_a_time_trigger_beside_a_count() -> None:
    trigger = Triggers.any(Triggers.count(100), Triggers.time_since_first_message(S))
    op, armed = operator(keyed().set_early_trigger(trigger), 3)
    op.timed_triggers()  # a millisecond in: nothing due
    assert armed.walks == 1
