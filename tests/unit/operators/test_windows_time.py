"""Windows that depend on time passing, over inputs that stay open until the test ends them:
processing-time tumbling and session windows, time triggers, an idle stream that stops holding
a window back, input partitions feeding a window through partition_by, a restart; then the
errors of windows, at run time (naming operator, partition and offset) and when described.

``Live`` runs an application while the test appends to its inputs, and sees each pane as it
fires, so a test can tell a pane that fired on time from one that waited for end-of-stream.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from samzapy import (
    AccumulationMode,
    ConfigError,
    FiringType,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    SerdeError,
    StreamApplication,
    StreamApplicationDescriptor,
    TaskError,
    Triggers,
    Window,
    Windows,
)
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.testing import ManualClock, TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
DEFAULT, EARLY, LATE = FiringType.DEFAULT, FiringType.EARLY, FiringType.LATE
MS, S = timedelta(milliseconds=1), timedelta(seconds=1)
COUNT = {"initial_value": lambda: 0, "aggregator": lambda m, v: v + 1}


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


def events(name: str = "events", idle: timedelta | None = None, lateness: int = 0) -> Any:
    descriptor = KAFKA.get_input_descriptor(name, "json").with_timestamp(lambda m: m["t"])
    return descriptor.with_watermarks(lateness * MS, idle)


def m(key: str, t: int) -> dict[str, Any]:
    return {"k": key, "t": t}


def key_count(interval: timedelta = 10 * S) -> Window:
    return Windows.keyed_tumbling_window(lambda m: m["k"], interval, **COUNT)


def pane(p: Any) -> tuple[Any, int, Any, FiringType]:
    return (p.key.key, p.key.pane_id, p.message, p.firing_type)


class App(StreamApplication):
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        self.fn(app_desc)


class Live:
    """``build(d, sink)`` over inputs (descriptor: partitions) that end when ``end`` says."""

    def __init__(
        self,
        build: Any,
        inputs: dict[Any, int],
        namespace: str | None = None,
        clock: Any = None,
        **config: Any,
    ) -> None:
        self.panes: list[Any] = []
        sink = lambda p, c, k: self.panes.append(pane(p))  # noqa: E731
        app = App(lambda d: build(d, sink))
        self.runner = TestRunner.of(app, config, namespace=namespace, clock=clock)
        self.inputs = list(inputs)
        for descriptor, partitions in inputs.items():
            self.runner.add_input_stream(descriptor, {})
            self.runner.broker.create_stream(descriptor.physical_name, partitions)
        self.job: asyncio.Future[Any] | None = None

    def send(self, descriptor: Any, *messages: Any, partition: int = 0, record_time: Any = None):
        for message in messages:
            ts = None if record_time is None else record_time(message)
            self.runner.broker.append(descriptor.physical_name, partition, None, message, ts)
        if self.job is None:
            self.job = asyncio.ensure_future(self.runner.run_async(timeout=10))

    async def wait(self, count: int, within: float = 1.5, until: Any = None) -> bool:
        """Whether ``count`` panes fired (or ``until(panes)`` held) within ``within`` s."""
        done = until or (lambda panes: len(panes) >= count)
        deadline = time.monotonic() + within
        while not done(self.panes) and time.monotonic() < deadline:
            if self.job is not None and self.job.done():
                self.job.result()  # the job failed: its error
            await asyncio.sleep(0.01)
        return bool(done(self.panes))

    async def end(self) -> Any:
        for descriptor in self.inputs:
            self.runner.broker.end_stream(descriptor.physical_name)
        assert self.job is not None
        return await self.job


def window_app(window: Window, *sources: Any) -> Any:
    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        first, *others = [d.get_input_stream(s) for s in sources]
        first.merge(others).window(window, "w").sink(sink)

    return build


# -- processing time -----------------------------------------------------------------------------


async def test_a_processing_time_window_fires_at_the_tick_after_its_end() -> None:
    plain = KAFKA.get_input_descriptor("words", "json")
    window = Windows.keyed_tumbling_window(lambda word: word, 200 * MS, **COUNT)
    live = Live(window_app(window, plain), {plain: 1})
    before = int(time.time() * 1000)
    live.send(plain, "a", "b", "a")
    # within 200 ms and a tick (task.window.ms: 100) of the end
    assert await live.wait(0, until=lambda panes: sum(n for *_, n, _ in panes) == 3)
    after = int(time.time() * 1000)
    first = list(live.panes)
    live.send(plain, "b")
    assert await live.wait(len(first) + 1)
    await live.end()
    counts: dict[str, int] = {}
    for key, _, n, _ in first:
        counts[key] = counts.get(key, 0) + n
    assert counts == {"a": 2, "b": 1}
    assert {firing for *_, firing in live.panes} == {DEFAULT}
    ids = [pane_id for _, pane_id, _, _ in live.panes]
    assert all(i % 200 == 0 and before - 200 < i <= after for i in ids[: len(first)])
    assert live.panes[len(first) :] == [("b", ids[-1], 1, DEFAULT)]
    assert ids[-1] > max(ids[: len(first)])


async def test_a_manual_clock_drives_processing_time_windows_and_time_triggers() -> None:
    plain = KAFKA.get_input_descriptor("words", "json")
    early = Triggers.time_since_first_message(5 * S)
    window = Windows.keyed_tumbling_window(lambda w: w, 10 * S, **COUNT).set_early_trigger(early)
    seen: list[str] = []
    clock = ManualClock(1_000.0)  # s since the epoch: panes of 10 s from 1 000 000 ms

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        d.get_input_stream(plain).map(lambda w: seen.append(w) or w).window(window, "w").sink(sink)

    live = Live(build, {plain: 1}, clock=clock)

    async def advance_to(seconds: float, messages: int, panes: int) -> None:
        clock.advance(seconds - clock.now())
        assert await live.wait(0, until=lambda _: len(seen) == messages)
        assert await live.wait(panes)

    live.send(plain, "a")
    await advance_to(1_000.0, 1, 0)
    await advance_to(1_004.0, 1, 0)
    await asyncio.sleep(0.2)  # real time for the tick the clock woke
    assert live.panes == []  # neither the trigger (5 s) nor the pane (10 s) is due
    await advance_to(1_006.0, 1, 1)
    assert live.panes == [("a", 1_000_000, 1, EARLY)]
    live.send(plain, "a")
    await advance_to(1_009.0, 2, 1)
    await advance_to(1_010.5, 2, 2)
    assert live.panes[1:] == [("a", 1_000_000, 1, DEFAULT)]
    live.send(plain, "a")
    await advance_to(1_012.0, 3, 2)
    await live.end()
    assert live.panes[2:] == [("a", 1_010_000, 1, DEFAULT)]


async def test_processing_time_sessions_end_a_gap_after_their_last_message() -> None:
    plain = KAFKA.get_input_descriptor("words", "json")
    live = Live(window_app(Windows.session_window(150 * MS), plain), {plain: 1})
    before = int(time.time() * 1000)
    live.send(plain, "x", "y")
    assert await live.wait(1)
    after = int(time.time() * 1000)
    live.send(plain, "z")
    await live.end()  # end-of-stream fires the open session
    (_, first, xy, f1), (_, second, z, f2) = live.panes
    assert (xy, f1, z, f2) == (["x", "y"], DEFAULT, ["z"], DEFAULT)
    assert before <= first <= after  # a session's id: its first message's time
    assert second >= first + 150  # z came after the first session had ended


async def test_time_since_first_message_fires_one_early_pane() -> None:
    source = events(lateness=3_600_000)  # the watermark stays far behind: no DEFAULT pane yet
    window = key_count().with_event_time()
    live = Live(
        window_app(window.set_early_trigger(Triggers.time_since_first_message(150 * MS)), source),
        {source: 1},
    )
    live.send(source, m("a", 1_000))
    assert await live.wait(1)
    live.send(source, m("a", 2_000))
    assert not await live.wait(2, within=0.4)  # not repeated: once a window
    await live.end()
    assert live.panes == [("a", 0, 1, EARLY), ("a", 0, 1, DEFAULT)]


async def test_a_repeated_time_since_last_message_fires_after_each_pause() -> None:
    source = events(lateness=3_600_000)
    trigger = Triggers.repeat(Triggers.time_since_last_message(300 * MS))
    window = key_count().with_event_time().set_early_trigger(trigger)
    window.set_accumulation_mode(AccumulationMode.ACCUMULATING)
    live = Live(window_app(window, source), {source: 1})
    live.send(source, m("a", 1_000), m("a", 2_000))
    assert await live.wait(1)
    live.send(source, m("a", 3_000))
    assert await live.wait(2)
    live.send(source, m("a", 4_000))
    await live.end()
    assert live.panes == [("a", 0, 2, EARLY), ("a", 0, 3, EARLY), ("a", 0, 4, DEFAULT)]


# -- watermarks of several inputs ----------------------------------------------------------------


@pytest.mark.parametrize("idle", [200 * MS, None])
async def test_an_idle_stream_stops_holding_the_window_back(idle: timedelta | None) -> None:
    busy, quiet = events("busy"), events("quiet", idle)
    live = Live(window_app(key_count().with_event_time(), busy, quiet), {busy: 1, quiet: 1})
    live.send(quiet, m("q", 1_000))  # then nothing, and no end
    live.send(busy, m("b", 2_000), m("b", 12_000), m("b", 25_000))
    fired = [("b", 0, 1, DEFAULT), ("b", 10_000, 1, DEFAULT), ("q", 0, 1, DEFAULT)]
    if idle is not None:  # idle after 200 ms: the busy stream alone makes the watermark
        assert await live.wait(3)
        assert sorted(live.panes) == fired
    else:  # the quiet stream holds the watermark at 1 s until it ends
        assert not await live.wait(1, within=0.5)
    await live.end()
    assert sorted(live.panes) == sorted([*fired, ("b", 20_000, 1, DEFAULT)])


async def test_a_manual_clock_makes_a_generated_watermark_stream_idle() -> None:
    """``with_watermarks``' idle timeout reads the container's clock: moving a ManualClock
    past it at the ticks makes the quiet stream idle, and the busy one alone closes panes."""
    busy, quiet = events("busy"), events("quiet", 60 * S)  # a minute of the clock's time
    clock = ManualClock(0.0)
    seen: list[Any] = []

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        first, second = [
            d.get_input_stream(s).map(lambda msg: seen.append(msg) or msg) for s in (busy, quiet)
        ]
        first.merge([second]).window(key_count().with_event_time(), "w").sink(sink)

    live = Live(build, {busy: 1, quiet: 1}, clock=clock)
    live.send(quiet, m("q", 1_000))  # then nothing, and no end
    live.send(busy, m("b", 2_000), m("b", 12_000), m("b", 25_000))
    assert await live.wait(0, until=lambda _: len(seen) == 4)
    clock.advance(0.1)  # a tick (task.window.ms: 100): both streams active at 0.1 s
    assert not await live.wait(1, within=0.3)  # the quiet stream holds the watermark at 1 s
    clock.advance(59.0)
    assert not await live.wait(1, within=0.3)  # 59 s: not idle yet
    clock.advance(2.0)  # the tick at 61.1 s: quiet for 61 s, idle
    assert await live.wait(3)
    fired = [("b", 0, 1, DEFAULT), ("b", 10_000, 1, DEFAULT), ("q", 0, 1, DEFAULT)]
    assert sorted(live.panes) == fired
    await live.end()
    assert sorted(live.panes) == sorted([*fired, ("b", 20_000, 1, DEFAULT)])


async def test_a_merged_stream_the_task_has_no_partition_of_does_not_hold_its_windows() -> None:
    """A window over ``merge`` of a 1-partition and a 2-partition stream: task 1 reads only
    the second's partition 1, so that one alone makes its watermark (the first's would never
    come there, and its panes would wait for end-of-stream)."""
    narrow, wide = events("narrow"), events("wide")
    live = Live(window_app(key_count().with_event_time(), narrow, wide), {narrow: 1, wide: 2})
    live.send(wide, m("w", 1_000), m("w", 12_000), m("w", 25_000), partition=1)
    assert await live.wait(2)
    assert sorted(live.panes) == [("w", 0, 1, DEFAULT), ("w", 10_000, 1, DEFAULT)]
    await live.end()
    assert live.panes[-1] == ("w", 20_000, 1, DEFAULT)


def by_key_app(window: Window, source: Any) -> Any:
    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        (
            d.get_input_stream(source)
            .partition_by(lambda m: m["k"], lambda m: m, KVSerde("string", "json"), "by-key")
            .map(lambda kv: kv.value)
            .window(window, "w")
            .sink(sink)
        )

    return build


@pytest.mark.parametrize("idle", [200 * MS, None])
async def test_an_idle_input_partition_does_not_hold_windows_after_partition_by(
    idle: timedelta | None,
) -> None:
    source = events(idle=idle)
    live = Live(
        by_key_app(key_count().with_event_time(), source),
        {source: 2},
        **{"job.intermediate.stream.partitions": 1},
    )
    live.send(source, m("b", 2_000), partition=1)  # then nothing, and no end
    live.send(source, m("a", 1_000), m("a", 11_000), m("a", 21_000))
    fired = [("a", 0, 1, DEFAULT), ("a", 10_000, 1, DEFAULT), ("b", 0, 1, DEFAULT)]
    if idle is not None:  # partition 1's task tells the intermediate stream it is idle
        assert await live.wait(3)
        assert sorted(live.panes) == fired
        live.send(source, m("b", 15_000), m("b", 35_000), partition=1)  # back, 15 s is late
        assert await live.wait(4)
        assert sorted(live.panes) == sorted([*fired, ("a", 20_000, 1, DEFAULT)])
        await live.end()
        assert live.panes[-1] == ("b", 30_000, 1, DEFAULT)
    else:  # partition 1's task holds the intermediate stream's watermark at 2 s
        assert not await live.wait(1, within=0.5)
        await live.end()
        assert sorted(live.panes) == sorted([*fired, ("a", 20_000, 1, DEFAULT)])


@pytest.mark.parametrize("idle", [200 * MS, None])
async def test_an_empty_input_partition_holds_windows_until_the_end_without_an_idle_timeout(
    idle: timedelta | None,
) -> None:
    """docs/api.md: without ``idle_timeout`` a partition that never gets a message holds back
    every window it reaches, through a ``partition_by``, until the input ends."""
    source = events(idle=idle)
    live = Live(
        by_key_app(key_count().with_event_time(), source),
        {source: 2},
        **{"job.intermediate.stream.partitions": 1},
    )
    live.send(source, m("a", 1_000), m("a", 11_000), m("a", 21_000))  # partition 1: nothing
    fired = [("a", 0, 1, DEFAULT), ("a", 10_000, 1, DEFAULT)]
    if idle is not None:
        assert await live.wait(2)
        assert sorted(live.panes) == fired
    else:
        assert not await live.wait(1, within=0.5)
    await live.end()
    assert sorted(live.panes) == sorted([*fired, ("a", 20_000, 1, DEFAULT)])


def merged_by_key_app(window: Window, first: Any, second: Any) -> Any:
    """``first`` and ``second``, each repartitioned by key (two intermediate streams),
    merged into one window."""

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        serde = KVSerde("string", "json")
        a = d.get_input_stream(first).partition_by(lambda m: m["k"], lambda m: m, serde, "pa")
        b = d.get_input_stream(second).partition_by(lambda m: m["k"], lambda m: m, serde, "pb")
        a.merge([b]).map(lambda kv: kv.value).window(window, "w").sink(sink)

    return build


@pytest.mark.parametrize("idle", [200 * MS, None])
async def test_an_idle_intermediate_stream_does_not_hold_a_window_it_reaches_beside_another(
    idle: timedelta | None,
) -> None:
    """docs/api.md: an idle input does not keep windows open, also when a whole stream is
    idle in the task (every writer of an intermediate stream), beside one that is not: the
    window leaves it out, where its watermark (its writers' last) held the window back."""
    quiet, busy = events("quiet", idle), events("busy", idle)
    live = Live(
        merged_by_key_app(key_count().with_event_time(), quiet, busy),
        {quiet: 1, busy: 1},
        **{"job.intermediate.stream.partitions": 1},
    )
    live.send(quiet, m("q", 1_000))  # then nothing, and no end
    live.send(busy, m("b", 1_000), m("b", 11_000), m("b", 21_000))
    fired = [("b", 0, 1, DEFAULT), ("b", 10_000, 1, DEFAULT), ("q", 0, 1, DEFAULT)]
    if idle is not None:
        assert await live.wait(3)
        assert sorted(live.panes) == fired
    else:  # the quiet stream holds the window at 1 s
        assert not await live.wait(1, within=0.5)
    await live.end()
    assert sorted(live.panes) == sorted([*fired, ("b", 20_000, 1, DEFAULT)])


async def test_an_input_partition_that_ended_does_not_hold_windows_after_partition_by() -> None:
    source = KAFKA.get_input_descriptor("events", "json").with_watermarks()
    live = Live(
        by_key_app(key_count().with_event_time(), source),
        {source: 2},
        **{"job.intermediate.stream.partitions": 1},
    )
    live.send(source, m("b", 2_000), partition=1, record_time=lambda m: m["t"])
    live.runner.broker.end_partition("events", 1)
    live.send(source, m("a", 1_000), m("a", 11_000), m("a", 21_000), record_time=lambda m: m["t"])
    fired = await live.wait(3)
    await live.end()
    assert fired
    assert live.panes[:3] == [("a", 0, 1, DEFAULT), ("b", 0, 1, DEFAULT), ("a", 10_000, 1, DEFAULT)]


async def test_windows_after_partition_by_close_on_the_with_timestamp_times() -> None:
    source = events()
    live = Live(by_key_app(key_count().with_event_time(), source), {source: 1})
    sent_at = lambda m: 1_700_000_000_000 + m["t"]  # noqa: E731 (a replay: records stamped now)
    live.send(source, m("a", 1_000), m("a", 11_000), record_time=sent_at)
    assert await live.wait(1)
    live.send(source, m("a", 12_000), m("a", 13_000), m("a", 25_000), record_time=sent_at)
    result = await live.end()
    assert live.panes == [
        ("a", 0, 1, DEFAULT),
        ("a", 10_000, 3, DEFAULT),
        ("a", 20_000, 1, DEFAULT),
    ]
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 0


# -- restart -------------------------------------------------------------------------------------


async def crash_after_commit(live: Live, offset: str) -> str:
    """Cancel ``live``'s job (a crash: no end-of-stream, nothing more committed) once a
    checkpoint covers ``offset``; the namespace its restart takes."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        await asyncio.sleep(0.01)
        container = live.runner.container
        found = container and InMemoryCheckpointManager.checkpoints_for(
            container.checkpoint_namespace
        )
        if found and offset in [o for cp in found.values() for o in cp.offsets.values()]:
            break
    assert live.job is not None
    live.job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await live.job
    return live.runner.namespace


async def test_a_restarted_window_keeps_its_triggers_counts() -> None:
    source = events()
    window = lambda: key_count().set_early_trigger(Triggers.repeat(Triggers.count(3)))  # noqa: E731
    config = {"task.commit.ms": 20}
    first = Live(window_app(window().with_event_time(), source), {source: 1}, **config)
    first.send(source, m("a", 1_000), m("a", 2_000), m("b", 3_000))
    namespace = await crash_after_commit(first, "2")
    assert first.panes == []

    again = Live(window_app(window().with_event_time(), source), {source: 1}, namespace=namespace)
    again.send(source, m("a", 4_000))
    assert await again.wait(1)  # the third message for a: the count went on from two
    again.send(source, m("b", 5_000), m("b", 6_000), m("a", 7_000), m("a", 15_000))
    await again.end()
    assert again.panes == [
        ("a", 0, 3, EARLY),
        ("b", 0, 3, EARLY),
        ("a", 0, 1, DEFAULT),  # discarding: what came since the early pane
        ("a", 10_000, 1, DEFAULT),
    ]


async def test_a_time_trigger_that_came_due_while_the_task_was_down_fires_at_restart() -> None:
    source = events()
    window = lambda: (  # noqa: E731
        key_count().with_event_time().set_early_trigger(Triggers.time_since_first_message(S))
    )
    first = Live(window_app(window(), source), {source: 1}, **{"task.commit.ms": 20})
    sent = time.monotonic()
    first.send(source, m("a", 1_000))
    namespace = await crash_after_commit(first, "0")
    assert first.panes == []
    await asyncio.sleep(max(0.0, sent + 1.1 - time.monotonic()))

    again = Live(window_app(window(), source), {source: 1}, namespace=namespace)
    again.send(source, m("b", 2_000))
    assert await again.wait(1)  # at the first tick, before the input ends
    await again.end()
    assert again.panes == [("a", 0, 1, EARLY), ("b", 0, 1, DEFAULT)]


async def test_a_trigger_that_does_not_repeat_has_fired_after_a_restart_too() -> None:
    source = events()
    window = lambda: (  # noqa: E731
        key_count()
        .with_event_time(allowed_lateness=60 * S)
        .set_late_trigger(Triggers.count(2))
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )
    config = {"task.commit.ms": 20}
    first = Live(window_app(window(), source), {source: 1}, **config)
    first.send(source, *[m("a", t) for t in (1_000, 12_000, 2_000, 3_000)])
    namespace = await crash_after_commit(first, "3")
    assert first.panes == [("a", 0, 1, DEFAULT), ("a", 0, 3, LATE)]

    again = Live(window_app(window(), source), {source: 1}, namespace=namespace)
    again.send(source, m("a", 4_000), m("a", 5_000))  # the late trigger fired once: too late
    result = await again.end()
    assert again.panes == [("a", 10_000, 1, DEFAULT)]
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 2


async def test_a_trigger_s_state_restored_without_its_pane_s_values_is_let_go_with_it() -> None:
    source = events()
    window = lambda: (  # noqa: E731
        key_count().with_event_time().set_early_trigger(Triggers.count(2))  # once, discarding
    )
    first = Live(window_app(window(), source), {source: 1}, **{"task.commit.ms": 20})
    first.send(source, m("a", 1_000), m("a", 2_000))
    namespace = await crash_after_commit(first, "1")
    assert first.panes == [("a", 0, 2, EARLY)]  # the pane's value went with it: none stored

    again = Live(window_app(window(), source), {source: 1}, namespace=namespace)
    again.send(source, m("b", 15_000))
    await again.end()
    assert again.panes == [("b", 10_000, 1, DEFAULT)]
    assert again.runner.container is not None
    (operator,) = again.runner.container.tasks[0]._task.graph.windows
    assert operator.armed == {}  # the trigger's state of pane 0 went (and its row) with it


async def test_an_early_trigger_that_fired_once_does_not_make_late_messages_too_late() -> None:
    source = events()
    window = (
        key_count()
        .with_event_time(allowed_lateness=60 * S)
        .set_early_trigger(Triggers.count(2))  # once, discarding: it holds nothing after
        .set_late_trigger(Triggers.count(1))
    )
    live = Live(window_app(window, source), {source: 1})
    live.send(source, *[m("a", t) for t in (1_000, 2_000, 12_000, 4_000)])
    await live.end()
    assert live.panes == [("a", 0, 2, EARLY), ("a", 0, 1, LATE), ("a", 10_000, 1, DEFAULT)]


async def test_a_restarted_window_keeps_its_open_panes_and_the_late_messages_it_held() -> None:
    source = events()
    window = lambda: (  # noqa: E731
        key_count()
        .with_event_time(allowed_lateness=60 * S)
        .set_late_trigger(Triggers.repeat(Triggers.count(10)))
    )
    config = {"task.commit.ms": 20}
    first = Live(window_app(window(), source), {source: 1}, **config)
    first.send(source, *[m("a", t) for t in (1_000, 2_000, 12_000, 5_000, 13_000)])
    namespace = await crash_after_commit(first, "4")
    assert first.panes == [("a", 0, 2, DEFAULT)]  # 5 s is held by the late trigger

    second = Live(window_app(window(), source), {source: 1}, namespace=namespace, **config)
    second.send(source, m("a", 14_000), m("a", 25_000))
    await second.end()
    assert second.panes == [
        ("a", 10_000, 3, DEFAULT),  # 12 s and 13 s came back from the store
        ("a", 0, 1, LATE),  # what the late trigger held is not lost with the trigger's count
        ("a", 20_000, 1, DEFAULT),
    ]


async def test_a_session_that_fired_is_kept_for_late_messages_across_a_restart() -> None:
    source = events()
    window = lambda: (  # noqa: E731
        Windows.keyed_session_window(lambda m: m["k"], 1 * S, **COUNT, merger=lambda x, y: x + y)
        .with_event_time(allowed_lateness=60 * S)
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )
    config = {"task.commit.ms": 20}
    first = Live(window_app(window(), source), {source: 1}, **config)
    first.send(source, *[m("a", t) for t in (0, 500, 3_000)])
    namespace = await crash_after_commit(first, "2")
    assert first.panes == [("a", 0, 2, DEFAULT)]

    second = Live(window_app(window(), source), {source: 1}, namespace=namespace, **config)
    second.send(source, m("a", 600))
    await second.end()
    assert second.panes == [("a", 0, 3, LATE), ("a", 3_000, 1, DEFAULT)]


class HighKeys:
    """A key serde whose bytes start with 0xff bytes, above any bound of 0xff bytes that a
    scan of the window's sessions could stop at."""

    def to_bytes(self, key: str) -> bytes:
        return b"\xff" * 16 + key.encode()

    def from_bytes(self, data: bytes) -> str:
        return data[16:].decode()


async def test_a_session_whose_key_bytes_start_with_0xff_is_restored_at_restart() -> None:
    source = events()
    window = lambda: Windows.keyed_session_window(  # noqa: E731
        lambda m: m["k"], 1 * S, **COUNT, key_serde=HighKeys(), merger=lambda x, y: x + y
    ).with_event_time()
    config = {"task.commit.ms": 20}
    first = Live(window_app(window(), source), {source: 1}, **config)
    first.send(source, m("a", 0), m("a", 500))
    namespace = await crash_after_commit(first, "1")
    assert first.panes == []

    second = Live(window_app(window(), source), {source: 1}, namespace=namespace, **config)
    second.send(source, m("b", 3_000))  # another key: only the restore knows of a's session
    await second.end()
    assert second.panes == [("a", 0, 2, DEFAULT), ("b", 3_000, 1, DEFAULT)]


@pytest.mark.parametrize(
    ("mode", "merged"),
    [(AccumulationMode.ACCUMULATING, 4), (AccumulationMode.DISCARDING, 2)],
)
async def test_a_late_message_that_bridges_a_fired_session_and_an_open_one_makes_a_new_window(
    mode: AccumulationMode, merged: int
) -> None:
    """As in Beam: the merged session's end is ahead of the watermark, so it is on time, and
    fires its DEFAULT pane under the fired session's pane id (docs/api.md)."""
    source = events()
    window = (
        Windows.keyed_session_window(lambda m: m["k"], 10 * S, **COUNT, merger=lambda x, y: x + y)
        .with_event_time(allowed_lateness=20 * S)
        .set_accumulation_mode(mode)
    )
    live = Live(window_app(window, source), {source: 1})
    # [0, 15 s) fires at the watermark 16 s; 14 s is behind it, within the lateness, and less
    # than a gap from both sessions: one session [0, 26 s), closed by 100 s.
    live.send(source, *[m("a", t) for t in (0, 5_000, 16_000, 14_000, 100_000)])
    await live.end()
    assert live.panes == [
        ("a", 0, 2, DEFAULT),
        ("a", 0, merged, DEFAULT),
        ("a", 100_000, 1, DEFAULT),
    ]


# -- errors --------------------------------------------------------------------------------------


def run(window: Window, source: Any, messages: Any, build: Any = None) -> Any:
    app = (build or window_app)(window, source)
    runner = TestRunner.of(App(lambda d: app(d, lambda p, c, k: None)))
    return runner.add_input_stream(source, messages).run(timeout=10)


@pytest.mark.parametrize(
    ("bad", "operator", "cause", "match"),
    [
        ({"k": "b"}, "events", KeyError, r"timestamp function of operator 'events' \(input\)"),
        ({"k": "b", "t": "soon"}, "events", TypeError, r"must return ms since the epoch .* 'soon'"),
        ({"k": "b", "t": True}, "events", TypeError, r"\(a number\), got True"),
        ({"k": "b", "t": float("nan")}, "events", ValueError, r"between .* got nan"),
        ({"k": "b", "t": float("-inf")}, "events", ValueError, r"between .* got -inf"),
        ({"k": "b", "t": 10**20}, "events", ValueError, r"between .* got 100000000000000000000"),
        ({"k": "b", "t": 1e20}, "events", ValueError, r"between .* got 1e\+20"),
    ],
)
def test_a_timestamp_function_that_fails_fails_the_task_naming_where(
    bad: Any, operator: str, cause: type, match: str
) -> None:
    with pytest.raises(TaskError, match=match) as info:
        run(key_count().with_event_time(), events(), {0: [m("a", 1)], 1: [m("a", 1), bad]})
    error = info.value
    assert (error.operator, str(error.ssp), error.offset) == (operator, "kafka.events#1", "1")
    assert isinstance(error.__cause__, cause)


def test_a_serde_of_the_jobs_own_that_makes_no_bytes_is_named_in_the_error() -> None:
    class Text:  # to_bytes gives str
        def to_bytes(self, obj: Any) -> Any:
            return str(obj)

        def from_bytes(self, data: Any) -> Any:
            return data

    for settings in ({"value_serde": Text()}, {"key_serde": Text()}):
        window = Windows.keyed_tumbling_window(lambda m: m["k"], 10 * S, **COUNT, **settings)
        with pytest.raises(
            TaskError, match=r"Text.to_bytes returned a str, expected bytes"
        ) as info:
            run(window.with_event_time(), events(), {0: [m("a", 1)]})
        assert info.value.operator == "w"


def test_a_value_its_store_cannot_serialize_fails_the_task_naming_the_window() -> None:
    window = Windows.keyed_tumbling_window(
        lambda m: m["k"], 10 * S, lambda: "x", lambda m, acc: acc + "y", value_serde="long"
    )
    with pytest.raises(TaskError, match=r"the processing of operator 'w' \(window\)") as info:
        run(window.with_event_time(), events(), {0: [m("a", 1)]})
    assert (info.value.operator, info.value.offset) == ("w", "0")
    assert isinstance(info.value.__cause__, SerdeError)


@pytest.mark.parametrize("kind", ["tumbling", "session"])
@pytest.mark.parametrize(
    ("initial", "aggregator", "failed"),
    [
        (lambda: 1 / 0, lambda m, n: n + 1, "initial_value"),
        (lambda: 0, lambda m, n: 1 / 0, "aggregator"),
    ],
)
def test_an_aggregating_function_that_fails_is_named(
    kind: str, initial: Any, aggregator: Any, failed: str
) -> None:
    if kind == "tumbling":
        window = Windows.keyed_tumbling_window(lambda m: m["k"], 10 * S, initial, aggregator)
    else:
        window = Windows.keyed_session_window(
            lambda m: m["k"], 10 * S, initial, aggregator, merger=lambda a, b: a + b
        )
    with pytest.raises(TaskError, match=rf"the {failed} of operator 'w' \(window\) failed"):
        run(window.with_event_time(), events(), {0: [m("a", 1)]})


def test_a_message_without_an_event_time_fails_the_window() -> None:
    source = KAFKA.get_input_descriptor("events", "json")  # records with no timestamp
    with pytest.raises(TaskError, match=r"operator 'w' \(window\).*with_timestamp\(fn\)") as info:
        run(key_count().with_event_time(), source, [m("a", 1)])
    assert (info.value.operator, info.value.offset) == ("w", "0")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: key_count(timedelta(0)),
            r"keyed_tumbling_window's interval must be more than zero",
        ),
        (lambda: Windows.tumbling_window(-S), r"tumbling_window's interval must be more than zero"),
        (lambda: Windows.tumbling_window(10), r"interval must be a datetime.timedelta, got 10"),
        (
            lambda: Windows.session_window(0.5 * MS),
            r"session_gap must be a whole number of milliseconds",
        ),
        (lambda: key_count().with_event_time(-S), r"allowed_lateness must be zero or more"),
        (lambda: Windows.tumbling_window(S, lambda: 0), r"both initial_value and aggregator"),
        (lambda: Triggers.count(0), r"Triggers.count takes a count of 1 or more, got 0"),
        (lambda: Triggers.count(True), r"count of 1 or more, got True"),
        (lambda: Triggers.time_since_last_message(timedelta(0)), r"more than zero"),
        (lambda: Triggers.any(), r"Triggers.any takes one or more triggers"),
        (lambda: Triggers.any(Triggers.count(1), 5), r"Triggers.any takes a trigger .* got 5"),
        (lambda: Triggers.repeat("count(2)"), r"Triggers.repeat takes a trigger"),
        (lambda: key_count().set_early_trigger(2), r"set_early_trigger takes a trigger"),
        (lambda: key_count().set_late_trigger(None), r"set_late_trigger takes a trigger"),
        (lambda: key_count().set_accumulation_mode("discarding"), r"AccumulationMode"),
        (lambda: key_count().with_store("redis"), r"with_store takes rocksdb or inmemory"),
        (lambda: events(idle=timedelta(0)), r"'events': idle_timeout must be more than zero"),
        (lambda: KAFKA.get_input_descriptor("e").with_timestamp("t"), r"takes a function"),
    ],
)
def test_a_bad_window_trigger_or_duration_is_a_config_error(make: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


@pytest.mark.parametrize(
    ("window", "match"),
    [
        (
            Windows.session_window(S).set_early_trigger(Triggers.count(2)),
            r"window 'w': early and late triggers are not supported on session windows",
        ),
        (
            Windows.keyed_session_window(lambda m: m["k"], S, **COUNT).with_event_time(),
            r"window 'w': a session window in event time .* needs merger=fn",
        ),
        (
            Windows.keyed_tumbling_window(lambda m: m["k"], S, key_serde="strng"),
            r"window 'w': its key serde: unknown serde 'strng'",
        ),
        (
            Windows.tumbling_window(S, value_serde="jsn"),
            r"window 'w': its value serde: unknown serde 'jsn'",
        ),
        (
            Windows.tumbling_window(S, value_serde=object()),
            r"window 'w': its value serde: a serde needs to_bytes and from_bytes methods",
        ),
    ],
)
def test_a_window_the_plan_refuses_is_a_config_error_before_anything_runs(
    window: Window, match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        run(window, events(), [m("a", 1)])


def test_a_window_takes_a_window_and_its_late_output_an_output_stream() -> None:
    def late_to_an_input(window: Window, source: Any) -> Any:
        def build(d: StreamApplicationDescriptor, sink: Any) -> None:
            stream = d.get_input_stream(source)
            with pytest.raises(ConfigError, match=r"window 'w' takes a Window made by"):
                stream.window("tumbling", "w")
            stream.window(window.with_late_output(stream), "w")

        return build

    with pytest.raises(ConfigError, match=r"window 'w': with_late_output takes an OutputStream"):
        run(key_count().with_event_time(), events(), [m("a", 1)], late_to_an_input)


async def test_an_ended_stream_does_not_make_an_idle_one_late_for_ever() -> None:
    """docs/api.md: "When every input is idle, the watermark is the highest of theirs"; an
    input that ended holds nothing back, and is no idle input: the highest is the idle one's,
    as the watermarks through partition_by take it (``TaskControl``). Stream ``done`` ends,
    ``quiet`` goes idle at 1 s and comes back at 31 s with times after it: on time. The ended
    stream's end of time, taken for the highest, closed every window for ever: the quiet
    stream's later messages were all dropped as late."""
    done, quiet = events("done"), events("quiet", 60 * S)
    clock = ManualClock(0.0)
    seen: list[Any] = []

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        first, second = [
            d.get_input_stream(s).map(lambda msg: seen.append(msg) or msg) for s in (done, quiet)
        ]
        first.merge([second]).window(key_count().with_event_time(), "w").sink(sink)

    live = Live(build, {done: 1, quiet: 1}, clock=clock)
    live.send(done, m("d", 2_000))
    live.runner.broker.end_partition("done", 0)
    live.send(quiet, m("q", 1_000))
    assert await live.wait(0, until=lambda _: len(seen) == 2)
    clock.advance(0.1)  # a tick: both streams active; done ended, quiet's 1 s holds it
    assert not await live.wait(1, within=0.3)
    clock.advance(61.0)  # quiet is idle: the highest of the idle inputs is its 1 s
    assert not await live.wait(1, within=0.3)
    live.send(quiet, m("q", 31_000), m("q", 32_000), m("q", 45_000))
    result = await live.end()
    assert live.panes == [
        ("d", 0, 1, DEFAULT),
        ("q", 0, 1, DEFAULT),
        ("q", 30_000, 2, DEFAULT),
        ("q", 40_000, 1, DEFAULT),
    ]
    assert result.metrics.snapshot()["task.Partition 0"]["w-late-messages"] == 0


class _Echo:
    """A remote table's read function: every key's record is the key."""

    async def get_async(self, key: str) -> Any:
        return key


class _Joined:
    def get_message_key(self, message: Any) -> Any:
        return message["k"]

    def get_record_key(self, record: Any) -> Any:
        return record.key

    def apply(self, message: Any, record: Any) -> Any:
        return message


async def test_windows_after_a_remote_table_join_fire_as_the_watermark_passes() -> None:
    """docs/api.md: in an asynchronous graph a ``with_watermarks`` watermark "moves at the
    tick (``task.window.ms``)"; a remote table's look-ups make the graph asynchronous as a
    flat_map_async does, so the planner gives it the tick. It gave it to a graph with a
    flat_map_async only: after a remote join, no tick ever moved the watermark, and the panes
    waited for the end of the input (for ever on one that does not end)."""
    source = events()

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        table = d.get_table(RemoteTableDescriptor("profiles").with_read_function(_Echo()))
        window = key_count().with_event_time()
        d.get_input_stream(source).join(table, _Joined()).window(window, "w").sink(sink)

    live = Live(build, {source: 1})
    live.send(source, m("a", 1_000), m("a", 11_000), m("a", 21_000))
    assert await live.wait(2)  # before the end
    await live.end()
    assert live.panes == [
        ("a", 0, 1, DEFAULT),
        ("a", 10_000, 1, DEFAULT),
        ("a", 20_000, 1, DEFAULT),
    ]
