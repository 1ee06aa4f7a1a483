"""Tumbling windows at and before the epoch: event times -2, -1 and 0 (Flink and Beam take
negative timestamps, and so does a window), in windows of 1 ms and larger, in event time and
in processing time (a clock before the epoch), through the aggregating window's one-method
path and the collecting one, and a trigger's stored state at a time of -1.

A pane id is the window's start, ``t - t % size``: pane -1 exists only in a 1 ms window,
which is where an internal marker of -1 would be mistaken for it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_windows import DEFAULT, App, Run, counts, events, m

from samzapy import KafkaSystemDescriptor, KVSerde, Windows
from samzapy.operators.trigger_state import Armed
from samzapy.testing import ManualClock, TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
MS = timedelta(milliseconds=1)
#: Out-of-orderness that keeps every pane of these tests open until end-of-stream.
OPEN = events(timedelta(seconds=1))


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


def expected(times: list[int], size: int) -> list[tuple[str, int, int, Any]]:
    """Key a's counts per pane, as a window of ``size`` ms must fire them."""
    found: dict[int, int] = {}
    for t in times:
        found[t - t % size] = found.get(t - t % size, 0) + 1
    return [("a", pane, n, DEFAULT) for pane, n in sorted(found.items())]


@pytest.mark.parametrize("size", [1, 2, 10])
@pytest.mark.parametrize("times", [[-1], [-1, -2, 0], [0, -1, -2], [-2, -1, 0], [-1, -1, 5]])
def test_an_event_time_window_counts_negative_times_in_their_panes(
    size: int, times: list[int]
) -> None:
    """The first message of pane -1 (a 1 ms window) used to be kept under no pane at all and
    never fired: [-1] fired nothing, [-1, -2, 0] lost the message at -1."""
    run = Run(counts(size * MS), [m("a", t) for t in times], OPEN)
    assert sorted(run.panes) == expected(times, size)
    assert run.late == 0


@pytest.mark.parametrize("size", [1, 2])
def test_a_collecting_window_keeps_negative_times(size: int) -> None:
    window = Windows.keyed_tumbling_window(lambda m: m["k"], size * MS).with_event_time()
    run = Run(window, [m("a", t) for t in (-1, -2, 0)], OPEN)
    found = {pane: times for _, pane, times, _ in run.panes}
    assert found == ({-2: [-2], -1: [-1], 0: [0]} if size == 1 else {-2: [-1, -2], 0: [0]})


@pytest.mark.parametrize("size", [1, 10])
def test_a_processing_time_window_over_a_clock_before_the_epoch(size: int) -> None:
    """Processing time reads the container's clock (here at -1 ms): the messages' event times
    (-1, -2, 0) play no part, and all three are counted in the clock's pane."""
    source = KAFKA.get_input_descriptor("events", "json").with_timestamp(lambda m: m["t"])
    window = Windows.keyed_tumbling_window(
        lambda m: m["k"], size * MS, lambda: 0, lambda m, v: v + 1
    )
    panes: list[Any] = []

    def app(d: Any) -> None:
        d.get_input_stream(source).window(window, "w").sink(
            lambda p, c, k: panes.append((p.key.key, p.key.pane_id, p.message, p.firing_type))
        )

    runner = TestRunner.of(App(app), clock=ManualClock(-0.001))
    runner.add_input_stream(source, [m("a", t) for t in (-1, -2, 0)]).run(timeout=10)
    assert panes == [("a", -1 - (-1 % size), 3, DEFAULT)]


@pytest.mark.parametrize("first", [None, -1, 0, 5])
def test_a_triggers_stored_times_come_back_as_they_were(first: int | None) -> None:
    """A trigger's state (count, first and last message's processing times) is stored for a
    restart; a time of -1 (a clock before the epoch) is a time, not "none"."""
    armed = Armed("a", -1)
    if first is not None:
        armed.count, armed.first, armed.last = 1, first, first
    loaded = Armed("a", -1)
    loaded.load(armed.to_bytes())
    assert (loaded.count, loaded.first, loaded.last) == (armed.count, first, first)


def test_negative_times_cross_a_partition_by_to_the_window() -> None:
    """An intermediate stream carries a message's event time in its frame (a signed 64-bit
    number): the window after it counts -1 and -2 in their panes."""
    panes: list[Any] = []

    def app(d: Any) -> None:
        (
            d.get_input_stream(OPEN)
            .partition_by(lambda m: m["k"], lambda m: m, KVSerde("string", "json"), "by-key")
            .map(lambda kv: kv.value)
            .window(counts(1 * MS), "w")
            .sink(lambda p, c, k: panes.append((p.key.key, p.key.pane_id, p.message, DEFAULT)))
        )

    times = [-1, -2, 0, -1]
    runner = TestRunner.of(App(app), {"job.intermediate.stream.partitions": 1})
    runner.add_input_stream(OPEN, [m("a", t) for t in times]).run(timeout=10)
    assert sorted(panes) == expected(times, 1)
