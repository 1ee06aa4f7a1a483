"""A window's failures as its panes fire: what the panes before the failure started (a
``flat_map_async`` after the window) runs to its end first, on every path a pane fires on (a
hook: the tick, a watermark, end-of-stream; a message), and nothing is left never awaited nor
to another message's processing; the window's own failure names the window."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import (
    AccumulationMode,
    KafkaSystemDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
    TaskError,
    Window,
    Windows,
)
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
S = timedelta(seconds=1)
COUNT = {"initial_value": lambda: 0, "aggregator": lambda m, v: v + 1}


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


@pytest.fixture
def never_awaited() -> Iterator[Callable[[], list[str]]]:
    """What the test left never awaited so far: its "coroutine ... was never awaited"
    warnings, once the garbage collector ran."""
    gc.collect()  # what earlier tests left is not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def found() -> list[str]:
            gc.collect()
            return [str(w.message) for w in caught if "never awaited" in str(w.message)]

        yield found


def events(name: str = "events") -> Any:
    descriptor = KAFKA.get_input_descriptor(name, "json").with_timestamp(lambda m: m["t"])
    return descriptor.with_watermarks(timedelta(0))


def m(key: str, t: int, **more: Any) -> dict[str, Any]:
    return {"k": key, "t": t, **more}


class App(StreamApplication):
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        self.fn(app_desc)


class Refusing:
    """A window, then a ``flat_map_async`` whose function refuses key "b"'s pane before it
    returns an awaitable; the call of every other pane sleeps, then notes its key."""

    def __init__(self, window: Window, source: Any) -> None:
        self.done: list[Any] = []

        async def note(p: Any) -> list[Any]:
            await asyncio.sleep(0.01)
            self.done.append(p.key.key)
            return []

        def refuses(p: Any) -> Any:
            if p.key.key == "b":
                raise ValueError("cannot take b")
            return note(p)

        def app(d: StreamApplicationDescriptor) -> None:
            stream = d.get_input_stream(source).window(window, "w").flat_map_async(refuses)
            stream.sink(lambda p, c, k: None)

        self.app = App(app)


def failed_on_b(error: TaskError, hook: str) -> None:
    assert str(error).startswith(f"{hook}() of task 'Partition 0' failed: the function of")
    assert error.operator == "flat_map_async-1"
    assert isinstance(error.__cause__, ValueError)


@pytest.mark.parametrize("hook", ["on_stream_watermark", "on_end_of_stream"])
def test_a_pane_that_fails_as_a_hook_fires_leaves_no_earlier_pane_s_call_unawaited(
    hook: str, never_awaited: Callable[[], list[str]]
) -> None:
    """Keys a and b in one pane: a's pane went on (its call started) before b's failed. The
    end watermark fires an event-time window, end-of-stream a processing-time one (over an
    input without watermarks: one with them ends the window at its end watermark)."""
    if hook == "on_stream_watermark":
        window = Windows.keyed_tumbling_window(lambda m: m["k"], 10 * S, **COUNT)
        window = window.with_event_time()
        source = events()
    else:
        window = Windows.keyed_tumbling_window(lambda m: m["k"], 1_000 * S, **COUNT)
        source = KAFKA.get_input_descriptor("events", "json")
    app = Refusing(window, source)
    runner = TestRunner.of(app.app).add_input_stream(source, [m("a", 1_000), m("b", 2_000)])
    with pytest.raises(TaskError) as info:
        runner.run(timeout=10)
    failed_on_b(info.value, hook)
    assert app.done == ["a"]  # a's call ran to its end before the failure counted
    assert never_awaited() == []


async def test_a_pane_that_fails_at_the_tick_leaves_no_earlier_pane_s_call_unawaited(
    never_awaited: Callable[[], list[str]],
) -> None:
    """In a graph with a flat_map_async the messages' watermark moves at the tick."""
    source = events()
    app = Refusing(
        Windows.keyed_tumbling_window(lambda m: m["k"], 10 * S, **COUNT).with_event_time(),
        source,
    )
    runner = TestRunner.of(app.app, {"task.window.ms": 10}).add_input_stream(source, {})
    runner.broker.create_stream(source.physical_name, 1)
    for message in (m("a", 1_000), m("b", 2_000), m("a", 12_000)):
        runner.broker.append(source.physical_name, 0, None, message, None)
    with pytest.raises(TaskError) as info:  # no end-of-stream: the tick fired the pane
        await runner.run_async(timeout=10)
    failed_on_b(info.value, "window")
    assert app.done == ["a"]
    assert never_awaited() == []


class FullStore:
    """A window's store that refuses to write an entry holding a poison message (as a
    store whose disk is full would): the rest passes."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def put(self, key: bytes, value: bytes) -> None:
        if b"poison" in value:
            raise OSError("no space left on device")
        self.store.put(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_message_that_fails_after_its_late_pane_went_on_awaits_that_pane_s_call(
    never_awaited: Callable[[], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A late message joins a session that fired: its LATE pane goes on to the
    flat_map_async, then the window's store refuses the session's value. Under
    task.drop.process.errors the message is dropped once the pane's call ran to its end,
    before the next message comes in (not as part of its processing)."""
    from samzapy.operators.sessions import SessionWindowOperator

    opened = SessionWindowOperator.open

    def refusing(operator: Any, context: Any) -> None:
        opened(operator, context)
        operator.store = FullStore(operator.store)

    monkeypatch.setattr(SessionWindowOperator, "open", refusing)
    source, timeline, noted = events(), [], asyncio.Event()

    async def note(p: Any) -> list[Any]:
        await asyncio.sleep(0)
        timeline.append((p.firing_type.value, [x["t"] for x in p.message]))
        noted.set()
        return []

    window = (
        Windows.keyed_session_window(
            lambda m: m["k"],
            1 * S,
            initial_value=list,
            aggregator=lambda message, value: [*value, message],
            merger=lambda a, b: a + b,
        )
        .with_event_time(allowed_lateness=60 * S)
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )

    def app(d: StreamApplicationDescriptor) -> None:
        stream = d.get_input_stream(source).map(lambda x: timeline.append(("in", x["t"])) or x)
        stream.window(window, "w").flat_map_async(note).sink(lambda p, c, k: None)

    config = {"task.drop.process.errors": True, "task.window.ms": 10}
    runner = TestRunner.of(App(app), config).add_input_stream(source, {})
    broker, stream = runner.broker, source.physical_name
    broker.create_stream(stream, 1)
    for message in (m("a", 0), m("a", 3_000)):
        broker.append(stream, 0, None, message, None)
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await asyncio.wait_for(noted.wait(), 5)  # the tick moved the watermark: [0, 1 s) fired
    for message in (m("a", 600, poison=True), m("b", 3_500)):
        broker.append(stream, 0, None, message, None)
    broker.end_stream(stream)
    await job
    assert timeline == [
        ("in", 0),
        ("in", 3_000),
        ("default", [0]),
        ("in", 600),
        ("late", [0, 600]),
        ("in", 3_500),
        ("default", [3_000]),
        ("default", [3_500]),
    ]
    assert never_awaited() == []


class Unreadable:
    """A window's value serde that cannot read back what it wrote."""

    def to_bytes(self, value: int) -> bytes:
        return str(value).encode()

    def from_bytes(self, data: bytes) -> int:
        raise ValueError(f"cannot read {data!r}")


#: How the task's error begins, by what fired the pane.
FAILED = {
    "a message": "process() of task 'Partition 0' failed on kafka.events#0 at offset 1: ",
    "the end watermark": "on_stream_watermark() of task 'Partition 0' failed: ",
    "end-of-stream": "on_end_of_stream() of task 'Partition 0' failed: ",
}


@pytest.mark.parametrize("fired_by", list(FAILED))
def test_a_window_whose_own_work_fails_as_it_fires_is_the_operator_named(fired_by: str) -> None:
    """Its serde fails reading a pane's value back: the error names the window ("counts"),
    whether a message moved the watermark (b's, which fires a's pane), the end watermark
    fired it or end-of-stream (a processing-time window, over an input without watermarks)."""
    window = Windows.keyed_tumbling_window(
        lambda m: m["k"], 1_000 * S, **COUNT, value_serde=Unreadable()
    )
    if fired_by != "end-of-stream":
        window = window.with_event_time()
        source = events()
    else:
        source = KAFKA.get_input_descriptor("events", "json")
    messages = [m("a", 1_000), m("b", 1_200_000)] if fired_by == "a message" else [m("a", 1_000)]

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(source).window(window, "counts").sink(lambda p, c, k: None)

    runner = TestRunner.of(App(app)).add_input_stream(source, messages)
    with capture_logs() as logs, pytest.raises(TaskError) as info:
        runner.run(timeout=10)
    error = info.value
    failed = FAILED[fired_by]
    assert str(error).startswith(f"{failed}the firing of operator 'counts' (window) failed")
    assert error.operator == "counts"
    assert isinstance(error.__cause__, ValueError)
    assert [e["operator"] for e in logs if e["event"] == "task_failed"] == ["counts"]
