"""Windows at the edges docs/api.md draws: a watermark one millisecond short of a window's
allowed lateness and exactly at it; two messages exactly a session gap apart; a pane with
nothing new in discarding mode; a processing-time pane whose end passed while the job was
down; a partition that lags behind the other through partition_by; every input idle; a
restart after the watermark passed a window's end with nothing to fire. Each test quotes the
sentence it proves.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_windows import (
    ACCUMULATING,
    DEFAULT,
    DISCARDING,
    EARLY,
    LATE,
    Run,
    counts,
    events,
    m,
    sessions,
)
from test_windows_time import (
    COUNT,
    KAFKA,
    Live,
    by_key_app,
    crash_after_commit,
    key_count,
)
from test_windows_time import events as events_time

from samzapy import AccumulationMode, Triggers, Windows
from samzapy.testing import ManualClock

S = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


def test_a_late_message_fires_until_the_watermark_reaches_end_plus_the_lateness() -> None:
    """docs/api.md, What fires when: LATE "a message for a window that fired, while
    ``W < end + allowed_lateness``"; none "a message for a window with ``W >= end +
    allowed_lateness``: dropped". Window [0, 10 s), lateness 10 s, accumulating: at W = 19.999 s
    the window still holds its value (the LATE pane is its whole count); at W = 20 s it is
    gone, and a message for it is dropped."""
    window = counts().with_event_time(allowed_lateness=10 * S).set_accumulation_mode(ACCUMULATING)
    times = [1_000, 19_999, 2_000, 20_000, 3_000]
    run = Run(window, [m("a", t) for t in times])
    assert run.timeline == [
        ("in", 1_000),
        ("a", 0, 1, DEFAULT),  # W = 19.999 s passed 10 s
        ("in", 19_999),
        ("in", 2_000),
        ("a", 0, 2, LATE),  # W = end + lateness - 1: late, not too late
        ("a", 10_000, 1, DEFAULT),  # W = 20 s
        ("in", 20_000),
        ("in", 3_000),  # W = end + lateness: dropped, no pane
        ("a", 20_000, 1, DEFAULT),  # end-of-stream
    ]
    assert run.late == 1


def test_messages_exactly_a_gap_apart_are_two_sessions_and_one_less_is_one() -> None:
    """docs/api.md, Windows.*: "a key's messages less than ``session_gap`` apart are one
    session, which ends ``session_gap`` after its last message"; Session windows: "the
    watermark (event time) has passed ``last + session_gap``". Gap 5 s, and an out-of-orderness
    that keeps every session open: 5 s is exactly a gap from 0 and from 10 s, and joins
    neither; 14.999 s is less than a gap from 10 s, and joins it."""
    times = [("a", 0), ("a", 10_000), ("a", 5_000), ("a", 14_999), ("b", 40_000)]
    run = Run(sessions(), [m(k, t) for k, t in times], events(20 * S))
    assert run.panes == [
        ("a", 0, [0], DEFAULT),  # at W = 20 s
        ("a", 5_000, [5_000], DEFAULT),
        ("a", 10_000, [10_000, 14_999], DEFAULT),
        ("b", 40_000, [40_000], DEFAULT),  # end-of-stream
    ]
    # Out-of-orderness 0: a session fires as the watermark reaches exactly its last + gap.
    times = [("a", 5_000), ("a", 9_999), ("b", 14_998), ("b", 14_999)]
    run = Run(sessions(), [m(k, t) for k, t in times])
    assert run.timeline == [
        ("in", 5_000),
        ("in", 9_999),
        ("in", 14_998),  # W = 14.998 s: the session of 5 s and 9.999 s is still open
        ("a", 5_000, [5_000, 9_999], DEFAULT),  # W = 14.999 s = 9.999 s + gap
        ("in", 14_999),
        ("b", 14_998, [14_998, 14_999], DEFAULT),  # end-of-stream
    ]


@pytest.mark.parametrize(
    ("mode", "a_default"),
    [(DISCARDING, []), (ACCUMULATING, [("a", 0, 4, DEFAULT)])],
)
def test_in_discarding_mode_a_key_with_nothing_new_sends_no_default_pane(
    mode: AccumulationMode, a_default: list[Any]
) -> None:
    """docs/api.md, Triggers and accumulation modes: "``AccumulationMode.DISCARDING`` (the
    default, as in Samza) what came since the pane before, and a key with nothing new sends no
    pane; ``AccumulationMode.ACCUMULATING`` the window's whole value so far." Key a's four
    messages all went out in two early panes of two: in discarding mode its DEFAULT pane has
    nothing new, and is not sent; key b's is."""
    window = counts().set_early_trigger(Triggers.repeat(Triggers.count(2)))
    window.set_accumulation_mode(mode)
    times = [("a", 1_000), ("a", 2_000), ("b", 2_500), ("a", 3_000), ("a", 4_000), ("c", 12_000)]
    run = Run(window, [m(k, t) for k, t in times])
    early = [("a", 0, 2, EARLY), ("a", 0, 2 if mode is DISCARDING else 4, EARLY)]
    defaults = sorted([*a_default, ("b", 0, 1, DEFAULT)])
    assert run.panes[:2] == early
    assert sorted(run.panes[2:-1]) == defaults
    assert run.panes[-1] == ("c", 10_000, 1, DEFAULT)


def test_a_late_trigger_with_nothing_held_sends_nothing_when_the_lateness_runs_out() -> None:
    """docs/api.md, What fires when: "With ``set_late_trigger(trigger)`` the late messages are
    kept until the trigger fires (and what the trigger still holds fires when the lateness runs
    out, or at end-of-stream)", and in discarding mode "a key with nothing new sends no pane".
    Two late messages fire the repeated count(2) trigger; the third is still held when the
    watermark passes the lateness (before end-of-stream) and fires then; a fourth never came
    for key b, whose late pane went out whole: it sends nothing more."""
    window = counts().with_event_time(allowed_lateness=10 * S)
    window.set_late_trigger(Triggers.repeat(Triggers.count(2)))
    times = [("a", 1_000), ("b", 1_500), ("a", 12_000), ("a", 2_000), ("b", 2_500)]
    times += [("a", 3_000), ("b", 3_500), ("a", 4_000), ("a", 20_000), ("a", 31_000)]
    run = Run(window, [m(k, t) for k, t in times])
    assert run.timeline[run.timeline.index(("in", 20_000)) - 2 :] == [
        ("a", 0, 1, LATE),  # 4 s: what the trigger held when the lateness ran out at 20 s
        ("a", 10_000, 1, DEFAULT),
        # b had nothing new since its LATE pane of 2.5 s and 3.5 s: no pane for b here
        ("in", 20_000),
        ("a", 20_000, 1, DEFAULT),
        ("in", 31_000),
        ("a", 30_000, 1, DEFAULT),
    ]
    assert [p for p in run.panes if p[0] == "b"] == [("b", 0, 1, DEFAULT), ("b", 0, 2, LATE)]


async def test_a_processing_time_pane_that_ended_while_down_fires_at_the_first_tick() -> None:
    """docs/api.md, State, restarts and guarantees: "A restart restores the open windows from
    the changelog, exactly as of the last checkpoint ... Processing-time panes whose end passed
    while the job was down fire at the first tick". A pane of [1,000 s, 1,010 s) of the clock
    holds two messages at a crash; the restart's clock is at 1,030 s: the first tick fires it,
    with both, before any input ends."""
    plain = KAFKA.get_input_descriptor("words", "json")
    window = lambda: Windows.keyed_tumbling_window(lambda w: w, 10 * S, **COUNT)  # noqa: E731
    seen: list[str] = []

    def build(d: Any, sink: Any) -> None:
        d.get_input_stream(plain).map(lambda w: seen.append(w) or w).window(window(), "w").sink(
            sink
        )

    first_clock = ManualClock(1_000.0)  # s since the epoch: the pane [1,000 s, 1,010 s)
    first = Live(build, {plain: 1}, clock=first_clock, **{"task.commit.ms": 20})
    first.send(plain, "a", "a")
    assert await first.wait(0, until=lambda _: len(seen) == 2)
    first_clock.advance(0.05)  # a commit (task.commit.ms: 20), long before the pane's end
    namespace = await crash_after_commit(first, "1")
    assert first.panes == [] and seen == ["a", "a"]

    clock = ManualClock(1_030.0)
    again = Live(build, {plain: 1}, namespace=namespace, clock=clock)
    again.send(plain, "b")
    assert await again.wait(0, until=lambda _: len(seen) == 3)
    clock.advance(0.1)  # the first tick (task.window.ms: 100)
    assert await again.wait(1)
    assert again.panes == [("a", 1_000_000, 2, DEFAULT)]
    await asyncio.sleep(0.1)
    await again.end()
    assert again.panes == [("a", 1_000_000, 2, DEFAULT), ("b", 1_030_000, 1, DEFAULT)]


async def test_after_partition_by_a_window_closes_on_the_minimum_of_the_writing_tasks() -> None:
    """docs/api.md, End-of-stream and watermarks through partition_by: "a task's watermark for
    an intermediate stream is the minimum over its partitions of the upstream inputs ...; it
    is sent to every partition whenever it moves forward, and a reader's watermark for a
    partition is the minimum over the tasks that write it". Input partition 0 is at 21 s and
    stays there; as partition 1 moves from 2 s to 12 s, then to exactly 20 s, the window closes
    what is below the lagging one's watermark, and nothing past it."""
    source = events()
    live = Live(
        by_key_app(key_count().with_event_time(), source),
        {source: 2},
        **{"job.intermediate.stream.partitions": 1},
    )
    live.send(source, m("a", 1_000), m("a", 11_000), m("a", 21_000))
    live.send(source, m("b", 2_000), partition=1)
    assert not await live.wait(1, within=0.5)  # partition 1 holds the window at 2 s
    live.send(source, m("b", 12_000), partition=1)
    assert await live.wait(2)
    assert not await live.wait(3, within=0.5)  # W = 12 s: [10 s, 20 s) stays open
    assert sorted(live.panes) == [("a", 0, 1, DEFAULT), ("b", 0, 1, DEFAULT)]
    live.send(source, m("b", 20_000), partition=1)  # W = 20 s: [10 s, 20 s) ends
    assert await live.wait(4)
    assert not await live.wait(5, within=0.5)  # partition 0's 21 s is not W
    assert sorted(live.panes[2:]) == [("a", 10_000, 1, DEFAULT), ("b", 10_000, 1, DEFAULT)]
    await live.end()
    assert sorted(live.panes[4:]) == [("a", 20_000, 1, DEFAULT), ("b", 20_000, 1, DEFAULT)]


async def test_when_every_input_is_idle_the_highest_watermark_closes_the_last_windows() -> None:
    """docs/api.md, Event time and watermarks: "When every input is idle, the watermark is the
    highest of theirs, so the last windows close too (a message that then comes back may be
    late, as in Flink)". Both inputs go quiet on the ManualClock, at 25 s and at 1 s: past
    their idle timeout the window's watermark is 25 s, not 1 s; the quiet one comes back with
    a message at 5 s, for a window that fired: it is dropped."""
    busy, quiet = events_time("busy", 60 * S), events_time("quiet", 60 * S)
    clock = ManualClock(0.0)
    seen: list[Any] = []

    def build(d: Any, sink: Any) -> None:
        first, second = [
            d.get_input_stream(s).map(lambda msg: seen.append(msg) or msg) for s in (busy, quiet)
        ]
        first.merge([second]).window(key_count().with_event_time(), "w").sink(sink)

    live = Live(build, {busy: 1, quiet: 1}, clock=clock)
    live.send(quiet, m("q", 1_000))
    live.send(busy, m("b", 2_000), m("b", 12_000), m("b", 25_000))
    assert await live.wait(0, until=lambda _: len(seen) == 4)
    clock.advance(0.1)  # a tick: both active
    assert not await live.wait(1, within=0.3)  # W = 1 s, the quiet one's
    clock.advance(61.0)  # both idle: W = 25 s, the highest
    assert await live.wait(3)
    assert sorted(live.panes) == [
        ("b", 0, 1, DEFAULT),
        ("b", 10_000, 1, DEFAULT),
        ("q", 0, 1, DEFAULT),
    ]
    live.send(quiet, m("q", 5_000))
    assert await live.wait(0, until=lambda _: len(seen) == 5)
    result = await live.end()
    assert live.panes[3:] == [("b", 20_000, 1, DEFAULT)]
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 1


def tumbling() -> Any:
    return key_count().with_event_time()


def session() -> Any:
    return sessions(**COUNT, merger=lambda x, y: x + y)


@pytest.mark.parametrize(
    ("window", "late"),
    [(tumbling, m("a", 15_000)), (session, m("a", 18_000))],
    ids=["tumbling", "session"],
)
async def test_a_restarted_window_keeps_the_watermark_it_had_reached(
    window: Any, late: Any
) -> None:
    """docs/api.md, State, restarts and guarantees: "A restart restores the open windows from
    the changelog, exactly as of the last checkpoint (after kill -9 too), with the watermark
    the window had reached"; Processing time and event time: "the same input gives the same
    panes however fast, late or often it is read". The x messages go no further than a filter,
    but move the watermark: to 12 s (the pane or session of a at 1 s fires), then to 25 s,
    which passes the end of [10 s, 20 s) and of a session from 18 s with nothing to fire. A
    checkpoint covers them; after a crash, a message at 15 s (at 18 s) is as late as it is
    without the crash."""
    source = events()

    def build(d: Any, sink: Any) -> None:
        stream = d.get_input_stream(source).filter(lambda message: message["k"] != "x")
        stream.window(window(), "w").sink(sink)

    first = Live(build, {source: 1}, **{"task.commit.ms": 20})
    first.send(source, m("a", 1_000), m("x", 12_000), m("x", 25_000))
    namespace = await crash_after_commit(first, "2")
    assert [p[2:] for p in first.panes] == [(1, DEFAULT)]

    again = Live(build, {source: 1}, namespace=namespace)
    again.send(source, late)
    result = await again.end()
    assert again.panes == []
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 1
