"""A window without an aggregator holds its panes' lists between write-backs
(``operators/held_values.py``): what is held, what is stored and what fires agree with what
the task reported of each message, when a write-back fails and when an operator after the
window changes a pane it received."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_window_lists import times
from test_windows_time import MS, Live, S, events, m, window_app

from samzapy import AccumulationMode, FiringType, TaskError, Triggers, Windows
from samzapy.checkpoint.memory import InMemoryCheckpointManager

DEFAULT, EARLY, LATE = FiringType.DEFAULT, FiringType.EARLY, FiringType.LATE


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


class AtMost:
    """A value serde (JSON of the messages' keys and times) refusing a list of more than
    ``most`` messages: a pane too large to keep."""

    def __init__(self, most: int) -> None:
        self.most = most

    def to_bytes(self, value: list[Any]) -> bytes:
        if len(value) > self.most:
            raise ValueError(f"a pane of {len(value)} messages is too large")
        return json.dumps([[message["k"], message["t"]] for message in value]).encode()

    def from_bytes(self, data: bytes) -> list[Any]:
        return [{"k": k, "t": t} for k, t in json.loads(data)]


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_message_whose_write_back_the_serde_refuses_is_dropped_from_its_pane(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write-back every WRITE_BACK_EVERY messages (2 here) fails on the fourth message,
    which makes the pane too large: dropped (``task.drop.process.errors``), it is in no
    pane, and the pane of the other three fires."""
    monkeypatch.setattr("samzapy.operators.windows.WRITE_BACK_EVERY", 2)
    source, serde = events(), AtMost(3)
    if kind == "tumbling":
        window = Windows.tumbling_window(10 * S, value_serde=serde)
    else:
        window = Windows.session_window(10 * S, value_serde=serde)
    live = Live(
        window_app(window.with_event_time(), source),
        {source: 1},
        **{"task.drop.process.errors": True},
    )
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000, 4_000)])
    result = await live.end()
    first = 0 if kind == "tumbling" else 1_000
    assert times(live.panes) == [(None, first, [1_000, 2_000, 3_000], DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


async def test_a_message_whose_early_pane_the_serde_refuses_is_dropped_from_its_pane() -> None:
    """The early trigger fires on the third message, whose pane the serde refuses to keep:
    dropped, it is in no pane, and the two before it are still in theirs."""
    source = events()
    window = (
        Windows.tumbling_window(10 * S, value_serde=AtMost(2))
        .with_event_time()
        .set_early_trigger(Triggers.count(3))
    )
    live = Live(window_app(window, source), {source: 1}, **{"task.drop.process.errors": True})
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000)])
    result = await live.end()
    assert times(live.panes) == [(None, 0, [1_000, 2_000], DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


def late_sessions(aggregated: bool) -> Any:
    functions: dict[str, Any] = {}
    if aggregated:
        functions = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
        functions["merger"] = lambda a, b: a + b
    return (
        Windows.keyed_session_window(lambda x: x["k"], 1 * S, **functions)
        .with_event_time(allowed_lateness=60 * S)
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )


@pytest.mark.parametrize("aggregated", [False, True])
@pytest.mark.parametrize("kind", ["session", "tumbling late", "tumbling early"])
async def test_a_pane_changed_in_place_downstream_leaves_what_the_window_keeps_as_it_was(
    kind: str, aggregated: bool
) -> None:
    """An operator after the window appends to each pane it receives: the next pane of the
    same window (an accumulating LATE or EARLY pane, the DEFAULT pane) has none of it."""
    source = events()
    functions: dict[str, Any] = {}
    if aggregated:
        functions = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
    if kind == "session":
        window = late_sessions(aggregated)
        first, late = [0, 5_000], [500, 700]
    elif kind == "tumbling late":
        window = Windows.tumbling_window(1 * S, **functions).with_event_time(60 * S)
        first, late = [0, 5_000], [500, 700]
    else:
        window = Windows.tumbling_window(10 * S, **functions).with_event_time()
        window = window.set_early_trigger(Triggers.repeat(Triggers.count(1)))
        first, late = [], [500, 700]
    window = window.set_accumulation_mode(AccumulationMode.ACCUMULATING)
    seen: list[Any] = []

    def edit(pane: Any) -> Any:
        seen.append(([x["t"] for x in pane.message], pane.firing_type))
        pane.message.append(m("edit", -1))
        return pane

    def build(d: Any, sink: Any) -> None:
        d.get_input_stream(source).window(window, "w").map(edit).sink(sink)

    live = Live(build, {source: 1})
    if first:
        live.send(source, *[m("a", t) for t in first])
        assert await live.wait(1)  # the watermark passed the first window: it fired
    live.send(source, *[m("a", t) for t in late])
    await live.end()
    if kind == "tumbling early":
        assert seen == [([500], EARLY), ([500, 700], EARLY), ([500, 700], DEFAULT)]
    else:
        assert seen[:3] == [([0], DEFAULT), ([0, 500], LATE), ([0, 500, 700], LATE)]


async def test_a_late_session_pane_the_serde_refuses_leaves_the_key_s_sessions_as_they_were() -> (
    None
):
    """A late message that joins a fired session makes its LATE pane too large: dropped, it
    is in no pane (none went on), and the key's open session, held, keeps its messages."""
    source = events()
    window = Windows.keyed_session_window(lambda x: x["k"], 1 * S, value_serde=AtMost(2))
    window = window.with_event_time(allowed_lateness=60 * S)
    window = window.set_accumulation_mode(AccumulationMode.ACCUMULATING)
    live = Live(window_app(window, source), {source: 1}, **{"task.drop.process.errors": True})
    live.send(source, m("a", 0), m("a", 500), m("a", 5_000))
    assert await live.wait(1)  # the watermark passed [0, 1.5 s): it fired
    live.send(source, m("a", 5_500), m("a", 700))
    result = await live.end()
    assert times(live.panes) == [
        ("a", 0, [0, 500], DEFAULT),
        ("a", 5_000, [5_000, 5_500], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("aggregated", [False, True])
async def test_a_late_tumbling_pane_dropped_downstream_leaves_the_pane_as_it_was(
    aggregated: bool,
) -> None:
    """A late message fires its window's accumulating LATE pane at once, then fails in an
    operator after the window (``task.drop.process.errors`` drops it): the pane is as before
    it, as a session is."""
    source = events()
    functions: dict[str, Any] = {}
    if aggregated:
        functions = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
    window = (
        Windows.tumbling_window(1 * S, **functions)
        .with_event_time(allowed_lateness=60 * S)
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )

    def refuse_poison(pane: Any) -> Any:
        if pane.message[-1].get("poison"):
            raise ValueError("downstream refuses poison")
        return pane

    def build(d: Any, sink: Any) -> None:
        d.get_input_stream(source).window(window, "w").map(refuse_poison).sink(sink)

    live = Live(build, {source: 1}, **{"task.drop.process.errors": True})
    live.send(source, m("a", 0), m("a", 5_000))  # the watermark passes [0, 1 s): it fires
    assert await live.wait(1)
    live.send(source, {**m("a", 500), "poison": True}, m("a", 700))
    result = await live.end()
    assert times(live.panes) == [
        (None, 0, [0], DEFAULT),
        (None, 0, [0, 700], LATE),  # not the dropped 500
        (None, 5_000, [5_000], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("aggregated", [False, True])
@pytest.mark.parametrize("mode", [AccumulationMode.DISCARDING, AccumulationMode.ACCUMULATING])
@pytest.mark.parametrize("firing", [EARLY, LATE])
async def test_a_triggered_pane_dropped_downstream_leaves_the_pane_and_its_trigger_as_they_were(
    firing: FiringType, mode: AccumulationMode, aggregated: bool
) -> None:
    """A message makes a count trigger fire, then its pane fails in an operator after the
    window (``task.drop.process.errors`` drops it): the pane and the trigger's count are as
    before it, so the next pane neither has it nor fires a message early."""
    source = events()
    functions: dict[str, Any] = {}
    if aggregated:
        functions = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
    trigger = Triggers.repeat(Triggers.count(2))
    if firing is EARLY:
        window = Windows.tumbling_window(10 * S, **functions).with_event_time()
        window = window.set_early_trigger(trigger)
        first, base = [], []
    else:
        window = Windows.tumbling_window(1 * S, **functions).with_event_time(60 * S)
        window = window.set_late_trigger(trigger)
        first, base = [0, 5_000], [0] if mode is AccumulationMode.ACCUMULATING else []
    window = window.set_accumulation_mode(mode)

    def refuse_poison(pane: Any) -> Any:
        if pane.message[-1].get("poison"):
            raise ValueError("downstream refuses poison")
        return pane

    def build(d: Any, sink: Any) -> None:
        d.get_input_stream(source).window(window, "w").map(refuse_poison).sink(sink)

    live = Live(build, {source: 1}, **{"task.drop.process.errors": True})
    if first:
        live.send(source, *[m("a", t) for t in first])
        assert await live.wait(1)  # the watermark passed [0, 1 s): it fired
    live.send(source, m("a", 100), {**m("a", 200), "poison": True}, m("a", 300), m("a", 400))
    result = await live.end()
    fired = [(value, kind) for _, pane, value, kind in times(live.panes) if pane == 0]
    last = [*base, 100, 300, 400] if mode is AccumulationMode.ACCUMULATING else [400]
    assert fired[-2:] == [([*base, 100, 300], firing), (last, LATE if first else DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


def too_small_window(kind: str, most: int) -> Any:
    """An event-time window whose value serde keeps panes of at most ``most`` messages."""
    if kind == "tumbling":
        return Windows.tumbling_window(10 * S, value_serde=AtMost(most)).with_event_time()
    return Windows.session_window(10 * S, value_serde=AtMost(most)).with_event_time()


def checkpointed(live: Live, offset: str) -> bool:
    container = live.runner.container
    found = container and InMemoryCheckpointManager.checkpoints_for(container.checkpoint_namespace)
    return bool(found) and offset in [o for cp in found.values() for o in cp.offsets.values()]


async def until_checkpointed(live: Live, offset: str) -> bool:
    """Whether a checkpoint covers ``offset`` within 2 s (the job's error if it failed)."""
    deadline = time.monotonic() + 2
    while not checkpointed(live, offset) and time.monotonic() < deadline:
        if live.job is not None and live.job.done():
            live.job.result()
        await asyncio.sleep(0.01)
    return checkpointed(live, offset)


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_held_pane_the_serde_refuses_at_a_commit_loses_its_last_messages(
    kind: str,
) -> None:
    """Three messages held in one pane, which the serde keeps two of: the commit's write-back
    drops the third (``task.drop.process.errors``) instead of failing the task, and the
    checkpoint moves past it."""
    source = events()
    config = {"task.drop.process.errors": True, "task.commit.ms": 20}
    live = Live(window_app(too_small_window(kind, 2), source), {source: 1}, **config)
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000)])
    assert await until_checkpointed(live, "2")
    result = await live.end()
    first = 0 if kind == "tumbling" else 1_000
    assert times(live.panes) == [(None, first, [1_000, 2_000], DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_held_pane_the_serde_refuses_at_end_of_stream_fires_with_what_it_keeps(
    kind: str,
) -> None:
    """End-of-stream fires a held pane the serde keeps two of three messages of: the pane
    fires with the first two, the third is dropped, and the task ends."""
    source = events()
    config = {"task.drop.process.errors": True}
    live = Live(window_app(too_small_window(kind, 2), source), {source: 1}, **config)
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000)])
    result = await live.end()
    first = 0 if kind == "tumbling" else 1_000
    assert times(live.panes) == [(None, first, [1_000, 2_000], DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


async def test_a_pane_refused_beside_the_one_written_back_drops_its_own_messages_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The write-back every WRITE_BACK_EVERY messages (4 here) comes with b's message and
    finds a's pane too large: a's third message is dropped, not b's messages."""
    monkeypatch.setattr("samzapy.operators.windows.WRITE_BACK_EVERY", 4)
    source = events()
    window = Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, value_serde=AtMost(2))
    config = {"task.drop.process.errors": True}
    live = Live(window_app(window.with_event_time(), source), {source: 1}, **config)
    sent = [("a", 1_000), ("a", 2_000), ("a", 3_000), ("b", 4_000), ("b", 5_000)]
    live.send(source, *[m(k, t) for k, t in sent])
    result = await live.end()
    assert sorted(times(live.panes)) == [
        ("a", 0, [1_000, 2_000], DEFAULT),
        ("b", 0, [4_000, 5_000], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_held_pane_the_serde_refuses_fails_the_task_without_the_drop_key(
    kind: str,
) -> None:
    source = events()
    live = Live(window_app(too_small_window(kind, 2), source), {source: 1})
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000)])
    with pytest.raises(TaskError) as failed:
        await live.end()
    cause = failed.value.__cause__
    text = f"{failed.value} {cause!r} {getattr(cause, '__notes__', [])}"
    assert "'w' (window)" in text and "AtMost" in text and "too large" in text


async def test_a_held_pane_the_serde_refuses_as_a_time_trigger_fires_loses_its_last_messages() -> (
    None
):
    """A time trigger fires at the tick a held pane the serde keeps two of three messages of:
    the EARLY pane has the first two, the third is dropped, and the task goes on."""
    source = events(lateness=3_600_000)  # the watermark stays far behind: no DEFAULT pane yet
    window = Windows.tumbling_window(10 * S, value_serde=AtMost(2)).with_event_time()
    window = window.set_early_trigger(Triggers.time_since_first_message(100 * MS))
    live = Live(window_app(window, source), {source: 1}, **{"task.drop.process.errors": True})
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000)])
    assert await live.wait(1)
    live.send(source, m("a", 4_000))
    result = await live.end()
    assert times(live.panes) == [(None, 0, [1_000, 2_000], EARLY), (None, 0, [4_000], DEFAULT)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
