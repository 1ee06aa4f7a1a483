"""Windows without an aggregator hold each pane's messages as a list between write-backs
(``operators/held_values.py``): a pane of n messages is serialized about n / 4096 times, not
n times, and the store still holds exactly what each checkpoint covers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from test_windows_time import Live, S, crash_after_commit, events, m, window_app

from samzapy import AccumulationMode, FiringType, TaskError, Triggers, Windows
from samzapy.operators.held_values import WRITE_BACK_EVERY

DEFAULT, EARLY, LATE = FiringType.DEFAULT, FiringType.EARLY, FiringType.LATE


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


class Counting:
    """A value serde (JSON of the messages' times) counting the messages it serialized."""

    def __init__(self) -> None:
        self.serialized = 0

    def to_bytes(self, value: list[Any]) -> bytes:
        self.serialized += len(value)
        if any(message.get("poison") for message in value):
            raise ValueError("cannot keep poison")
        return json.dumps([[message["k"], message["t"]] for message in value]).encode()

    def from_bytes(self, data: bytes) -> list[Any]:
        return [{"k": k, "t": t} for k, t in json.loads(data)]


def times(panes: list[Any]) -> list[tuple[Any, int, list[int], FiringType]]:
    return [(key, pane, [x["t"] for x in value], firing) for key, pane, value, firing in panes]


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_of_n_messages_is_serialized_a_few_times_not_n(kind: str) -> None:
    n = 3 * WRITE_BACK_EVERY + 7
    source, serde = events(), Counting()
    if kind == "tumbling":
        window = Windows.tumbling_window(1000 * S, value_serde=serde)
    else:
        window = Windows.session_window(1000 * S, value_serde=serde)
    live = Live(window_app(window.with_event_time(), source), {source: 1})
    live.send(source, *[m("a", t) for t in range(n)])
    await live.end()
    assert times(live.panes) == [(None, 0, list(range(n)), DEFAULT)]
    # Each message is checked once as it comes (a list of one); the pane is written back
    # three times (every WRITE_BACK_EVERY messages), each write holding all it has so far.
    # Written back per message, it was n * (n + 1) / 2 = 75 million.
    assert serde.serialized <= n + 4 * n


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_restart_after_a_crash_finds_the_pane_as_the_checkpoint_left_it(kind: str) -> None:
    source = events()

    def window() -> Any:
        if kind == "tumbling":
            return Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S).with_event_time()
        return Windows.keyed_session_window(lambda x: x["k"], 10 * S).with_event_time()

    first = Live(window_app(window(), source), {source: 1}, **{"task.commit.ms": 20})
    first.send(source, m("a", 1_000), m("b", 1_500), m("a", 2_000))
    namespace = await crash_after_commit(first, "2")
    assert first.panes == []

    again = Live(window_app(window(), source), {source: 1}, namespace=namespace)
    again.send(source, m("a", 3_000), m("b", 3_500))
    await again.end()
    assert sorted(times(again.panes)) == [
        ("a", 1_000 if kind == "session" else 0, [1_000, 2_000, 3_000], DEFAULT),
        ("b", 1_500 if kind == "session" else 0, [1_500, 3_500], DEFAULT),
    ]


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_message_the_value_serde_refuses_is_dropped_alone(kind: str) -> None:
    """Under ``task.drop.process.errors`` the message fails as it comes, and the pane keeps
    the others (held, it would otherwise fail the job at the next write-back)."""
    source, serde = events(), Counting()
    if kind == "tumbling":
        window = Windows.tumbling_window(10 * S, value_serde=serde)
    else:
        window = Windows.session_window(10 * S, value_serde=serde)
    live = Live(
        window_app(window.with_event_time(), source),
        {source: 1},
        **{"task.drop.process.errors": True},
    )
    live.send(source, m("a", 1_000), {**m("a", 2_000), "poison": True}, m("a", 3_000))
    result = await live.end()
    assert times(live.panes) == [
        (None, 0 if kind == "tumbling" else 1_000, [1_000, 3_000], DEFAULT)
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_message_too_late_for_its_window_is_dropped_as_late_not_checked_by_the_serde(
    kind: str,
) -> None:
    """A message the watermark passed (with its lateness) is dropped as late, counted, and
    never kept: the value serde's check of a message it takes is not made of it."""
    source, serde = events(), Counting()
    if kind == "tumbling":
        window = Windows.tumbling_window(1 * S, value_serde=serde)
    else:
        window = Windows.session_window(1 * S, value_serde=serde)
    live = Live(window_app(window.with_event_time(), source), {source: 1})
    live.send(source, m("a", 0), m("a", 10_000), {**m("a", 100), "poison": True})
    result = await live.end()
    assert times(live.panes) == [(None, 0, [0], DEFAULT), (None, 10_000, [10_000], DEFAULT)]
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 1


async def test_a_refused_message_fails_the_job_as_it_comes_without_the_drop_setting() -> None:
    source, serde = events(), Counting()
    window = Windows.tumbling_window(10 * S, value_serde=serde).with_event_time()
    live = Live(window_app(window, source), {source: 1})
    live.send(source, m("a", 1_000), {**m("a", 2_000), "poison": True})
    with pytest.raises(TaskError, match="cannot keep poison") as raised:
        await live.end()
    assert raised.value.offset == "1"


@pytest.mark.parametrize("mode", [AccumulationMode.DISCARDING, AccumulationMode.ACCUMULATING])
async def test_early_panes_of_a_held_pane_are_not_changed_by_later_messages(mode: Any) -> None:
    source = events()
    window = (
        Windows.tumbling_window(10 * S)
        .with_event_time()
        .set_early_trigger(Triggers.repeat(Triggers.count(2)))
        .set_accumulation_mode(mode)
    )
    live = Live(window_app(window, source), {source: 1})
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 3_000, 4_000, 5_000)])
    await live.end()
    if mode is AccumulationMode.ACCUMULATING:
        expected = [
            [1_000, 2_000],
            [1_000, 2_000, 3_000, 4_000],
            [1_000, 2_000, 3_000, 4_000, 5_000],
        ]
    else:
        expected = [[1_000, 2_000], [3_000, 4_000], [5_000]]
    assert [t for _, _, t, _ in times(live.panes)] == expected
    assert [firing for *_, firing in live.panes] == [EARLY, EARLY, DEFAULT]


async def test_a_late_session_pane_is_not_changed_by_the_messages_that_join_it_later() -> None:
    source = events()
    window = (
        Windows.keyed_session_window(lambda x: x["k"], 1 * S)
        .with_event_time(allowed_lateness=60 * S)
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )
    live = Live(window_app(window, source), {source: 1})
    live.send(source, m("a", 0), m("a", 5_000))  # the watermark passes [0, 1 s): it fires
    assert await live.wait(1)
    live.send(source, m("a", 500), m("a", 700))  # late: each fires the session, accumulated
    await asyncio.sleep(0)
    await live.end()
    assert times(live.panes) == [
        ("a", 0, [0], DEFAULT),
        ("a", 0, [0, 500], LATE),
        ("a", 0, [0, 500, 700], LATE),
        ("a", 5_000, [5_000], DEFAULT),
    ]


@pytest.mark.parametrize("aggregated", [False, True])
async def test_a_late_session_pane_dropped_downstream_leaves_the_session_as_it_was(
    aggregated: bool,
) -> None:
    """A late message that fires a session's LATE pane, then fails in an operator after the
    window (``task.drop.process.errors`` drops it): the session is as before it, held or not
    (a message that opened another session of the key since the last write-back holds it)."""
    source = events()
    as_list: dict[str, Any] = {}
    if aggregated:
        as_list = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
        as_list["merger"] = lambda a, b: a + b
    window = (
        Windows.keyed_session_window(lambda x: x["k"], 1 * S, **as_list)
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
    live.send(source, m("a", 5_500), {**m("a", 500), "poison": True}, m("a", 700))
    result = await live.end()
    assert times(live.panes) == [
        ("a", 0, [0], DEFAULT),
        ("a", 0, [0, 700], LATE),  # not the dropped 500
        ("a", 5_000, [5_000, 5_500], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("aggregated", [False, True])
@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_message_changed_in_place_after_the_window_took_it_is_in_its_pane_as_taken(
    kind: str, aggregated: bool
) -> None:
    """An operator beside the window (a fan-out) that changes each message in place after
    the window took it: the pane has the messages as they were taken, held or not."""
    source = events()
    as_list: dict[str, Any] = {}
    if aggregated:
        as_list = {"initial_value": list, "aggregator": lambda x, acc: [*acc, x]}
    if kind == "tumbling":
        window = Windows.tumbling_window(10 * S, **as_list)
    else:
        merger = {"merger": lambda a, b: a + b} if aggregated else {}
        window = Windows.session_window(10 * S, **as_list, **merger)

    def stamp(message: Any) -> Any:
        message["stamped"] = True
        return message

    def build(d: Any, sink: Any) -> None:
        stream = d.get_input_stream(source)
        stream.window(window.with_event_time(), "w").sink(sink)
        stream.map(stamp).sink(lambda *_: None)

    live = Live(build, {source: 1})
    live.send(source, m("a", 1_000), m("a", 2_000))
    await live.end()
    assert [value for _, _, value, _ in live.panes] == [[m("a", 1_000), m("a", 2_000)]]


async def test_merged_sessions_keep_every_message_in_the_order_they_came() -> None:
    source = events(lateness=10_000)
    window = Windows.keyed_session_window(lambda x: x["k"], 1 * S).with_event_time()
    live = Live(window_app(window, source), {source: 1})
    live.send(source, m("a", 0), m("a", 1_500), m("a", 800), m("a", 900), m("a", 50_000))
    await live.end()
    assert times(live.panes) == [
        ("a", 0, [0, 1_500, 800, 900], DEFAULT),
        ("a", 50_000, [50_000], DEFAULT),
    ]


class CountingReads:
    """A store's ``range`` counting the entries its iterators give (the rest passes)."""

    def __init__(self, store: Any) -> None:
        self.store, self.read = store, 0

    def range(self, start: bytes, end: bytes) -> Any:
        counter = self

        class Counted:
            def __init__(self, entries: Any) -> None:
                self.entries = entries

            def __enter__(self) -> Counted:
                self.entries.__enter__()
                return self

            def __exit__(self, *exc: Any) -> None:
                self.entries.__exit__(*exc)

            def __iter__(self) -> Counted:
                return self

            def __next__(self) -> Any:
                entry = next(self.entries)
                counter.read += 1
                return entry

        return Counted(self.store.range(start, end))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_restart_finds_the_open_panes_with_a_seek_each_not_a_read_of_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from samzapy.operators.tumbling import TumblingWindowOperator

    source = events(lateness=60_000)  # both panes stay open
    counts = {"initial_value": lambda: 0, "aggregator": lambda message, count: count + 1}

    def window() -> Any:
        return Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, **counts).with_event_time()

    first = Live(window_app(window(), source), {source: 1}, **{"task.commit.ms": 20})
    keys = [f"k{i}" for i in range(500)]
    first.send(source, *[m(k, 1_000) for k in keys], *[m(k, 11_000) for k in keys])
    namespace = await crash_after_commit(first, str(2 * len(keys) - 1))

    reads: list[int] = []
    restore = TumblingWindowOperator.restore

    def counted(operator: Any) -> None:
        store = operator.store
        operator.store = CountingReads(store)
        try:
            restore(operator)
        finally:
            reads.append(operator.store.read)
            operator.store = store

    monkeypatch.setattr(TumblingWindowOperator, "restore", counted)
    again = Live(window_app(window(), source), {source: 1}, namespace=namespace)
    again.send(source, m("k0", 12_000))
    await again.end()
    assert reads == [2]  # the first key of each of the two panes
    assert sorted((key, pane, count) for key, pane, count, _ in again.panes) == sorted(
        [(k, 0, 1) for k in keys] + [(k, 10_000, 2 if k == "k0" else 1) for k in keys]
    )
