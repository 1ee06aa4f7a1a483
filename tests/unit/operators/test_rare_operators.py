"""The less used operators at their edges, run through ``TestRunner``: ``broadcast``,
``merge``, ``flat_map_async``, ``sink`` and ``send_to`` given odd values, and the event
time they carry."""

from __future__ import annotations

import asyncio
import concurrent.futures
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    TaskError,
    Windows,
)
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
PANES = KAFKA.get_output_descriptor("panes", "json")
LINES = KAFKA.get_input_descriptor("lines", "string")
WORDS = KAFKA.get_output_descriptor("words", "json")


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


@pytest.mark.parametrize("through", ["broadcast", "partition_by"])
def test_an_intermediate_stream_carries_with_timestamps_event_time(through: str) -> None:
    """A message keeps its event time through a ``broadcast`` as through a ``partition_by``:
    the window after it puts it in the pane of its ``with_timestamp`` time."""
    views = KAFKA.get_input_descriptor("views", "json").with_timestamp(lambda ms: ms)
    views = views.with_watermarks()

    class TenSecondCounts(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            stream = app_desc.get_input_stream(views)
            if through == "broadcast":
                stream = stream.broadcast("json", "all")
            else:
                stream = stream.partition_by(lambda ms: "k", lambda ms: ms, "json", "by-k")
            window = Windows.tumbling_window(
                timedelta(seconds=10), lambda: 0, lambda ms, n: n + 1
            ).with_event_time()
            stream.window(window, "per-10s").map(
                lambda pane: [pane.key.pane_id, pane.message]
            ).send_to(app_desc.get_output_stream(PANES))

    result = (
        TestRunner.of(TenSecondCounts)
        .add_input_stream(views, [1_000, 2_000, 12_000, 25_000])
        .add_output_stream(PANES)
        .run(timeout=10)
    )
    assert result.outputs(PANES) == {0: [[0, 2], [10_000, 1], [20_000, 1]]}


async def _gives(result: Any) -> Any:
    await asyncio.sleep(0)
    return result


@pytest.mark.parametrize("asynchronous", [False, True], ids=["flat_map", "flat_map_async"])
@pytest.mark.parametrize(
    ("result", "got"),
    [
        (None, "NoneType None"),
        (7, "int 7"),
        ("a b", "str 'a b'"),
        (b"ab", "bytes b'ab'"),
        ({"word": "a"}, "dict {'word': 'a'}"),
    ],
)
def test_a_flat_map_result_that_is_no_iterable_of_messages_fails_saying_what_it_was(
    asynchronous: bool, result: Any, got: str
) -> None:
    """None (an ``async def`` without ``return``), a number, a string, which would go on as
    its characters, or a dict, as its keys (one message given alone; Samza's FlatMapFunction
    returns a Collection, which a Map is not): the task fails naming the operator and what
    its function gave."""

    class Split(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            lines = app_desc.get_input_stream(LINES)
            if asynchronous:
                words = lines.flat_map_async(lambda line: _gives(result))
            else:
                words = lines.flat_map(lambda line: result)
            words.send_to(app_desc.get_output_stream(WORDS))

    runner = TestRunner.of(Split).add_input_stream(LINES, ["a b"]).add_output_stream(WORDS)
    with pytest.raises(TaskError) as failed:
        runner.run(timeout=10)
    kind = "flat_map_async" if asynchronous else "flat_map"
    assert failed.value.operator == f"{kind}-1"
    assert isinstance(failed.value.__cause__, TypeError)
    assert str(failed.value.__cause__).endswith(
        f"must be an iterable of messages (a list; [] for none), got {got}"
    )


def test_a_flat_map_s_generator_and_tuple_go_on_and_a_generator_s_own_error_is_its_own() -> None:
    def words(line: str) -> Any:
        for word in line.split():
            if word == "boom":
                raise TypeError("the generator's own")
            yield word

    class Split(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            lines = app_desc.get_input_stream(LINES)
            lines.flat_map(words).merge(
                [lines.flat_map_async(lambda line: _gives(("t",)))]
            ).send_to(app_desc.get_output_stream(WORDS))

    result = (
        TestRunner.of(Split)
        .add_input_stream(LINES, ["a b"])
        .add_output_stream(WORDS)
        .run(timeout=10)
    )
    assert result.outputs(WORDS) == {0: ["a", "b", "t"]}
    runner = TestRunner.of(Split).add_input_stream(LINES, ["boom"]).add_output_stream(WORDS)
    with pytest.raises(TaskError, match="the generator's own"):
        runner.run(timeout=10)


async def _allowed(line: str) -> bool:
    return False


@pytest.mark.parametrize("count", [3, 1100])
def test_a_filter_whose_function_gives_an_awaitable_fails_instead_of_keeping_all(
    count: int,
) -> None:
    """A coroutine is true: the filter would keep every message, its check never run. Of
    1,100 messages, the 1,024th, the one awaited, takes the sampled (timed) path."""
    bad = min(count, 1024) - 1

    class Allowed(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(LINES).filter(
                lambda line: _allowed(line) if line == f"m{bad}" else True
            ).send_to(app_desc.get_output_stream(WORDS))

    messages = [f"m{i}" for i in range(count)]
    runner = TestRunner.of(Allowed).add_input_stream(LINES, messages).add_output_stream(WORDS)
    with pytest.raises(TaskError) as failed:
        runner.run(timeout=10)
    assert (failed.value.operator, failed.value.offset) == ("filter-1", str(bad))
    assert isinstance(failed.value.__cause__, TypeError)
    assert "filter's function returned coroutine, an awaitable it does not await" in str(
        failed.value.__cause__
    )


def test_a_sink_whose_function_gives_an_awaitable_fails_instead_of_dropping_its_work() -> None:
    written: list[str] = []

    async def write(line: str) -> None:
        written.append(line)

    class Writes(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(LINES).sink(lambda line, collector, coordinator: write(line))

    runner = TestRunner.of(Writes).add_input_stream(LINES, ["a", "b"])
    with pytest.raises(TaskError) as failed:
        runner.run(timeout=10)
    assert (failed.value.operator, failed.value.offset) == ("sink-1", "0")
    assert "sink's function returned coroutine, an awaitable it does not await" in str(
        failed.value.__cause__
    )
    assert written == []


def test_a_keyed_stream_broadcast_with_a_kvserde_reaches_every_task_as_its_kvs() -> None:
    """As Samza's broadcast takes a KVSerde: each task reads the stream's ``KV``s as they
    were sent (a ``KV`` through a plain ``json`` serde would come back a list)."""
    clicks = KAFKA.get_input_descriptor("clicks", KVSerde("string", "json"))
    seen = KAFKA.get_output_descriptor("seen", "json")

    class Tagged:
        def init(self, context: Any) -> None:
            self.task = str(context.task_name)

        def apply(self, kv: Any) -> Any:
            assert type(kv) is KV, kv
            return [self.task, kv.key, kv.value]

    class EveryTask(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(clicks).broadcast(
                KVSerde("string", "json"), "all-clicks"
            ).map(Tagged()).send_to(app_desc.get_output_stream(seen))

    result = (
        TestRunner.of(EveryTask)
        .add_input_stream(clicks, {0: [KV("ann", {"page": "/a"})], 1: [KV("bob", {"page": "/b"})]})
        .add_output_stream(seen)
        .run(timeout=10)
    )
    assert sorted(result.outputs(seen)[0]) == [
        [f"Partition {p}", key, {"page": page}]
        for p in (0, 1)
        for key, page in (("ann", "/a"), ("bob", "/b"))
    ]


def test_flat_map_async_takes_a_concurrent_future_as_a_tasks_process_async_does() -> None:
    """``executor.submit(...)``: a ``concurrent.futures.Future``, as ``process_async`` may
    return (Samza's AsyncFlatMapFunction returns a CompletionStage)."""
    pool = concurrent.futures.ThreadPoolExecutor(2)

    class Pooled(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(LINES).flat_map_async(
                lambda line: pool.submit(str.split, line)
            ).send_to(app_desc.get_output_stream(WORDS))

    try:
        result = (
            TestRunner.of(Pooled)
            .add_input_stream(LINES, ["a b", "c"])
            .add_output_stream(WORDS)
            .add_config("task.max.concurrency", 2)
            .run(timeout=10)
        )
    finally:
        pool.shutdown()
    assert sorted(result.outputs(WORDS)[0]) == ["a", "b", "c"]


def test_a_stream_merged_with_itself_gives_each_message_once_as_samzas_merge() -> None:
    """Samza registers the merge once after each stream (a set of next operators): a stream
    given twice is merged once, where Flink's union of a stream with itself gives each
    element twice. A stream made from it is another stream."""

    class Twice(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            lines = app_desc.get_input_stream(LINES)
            lines.merge([lines, lines.map(str.upper)]).send_to(app_desc.get_output_stream(WORDS))

    result = (
        TestRunner.of(Twice)
        .add_input_stream(LINES, ["a", "b"])
        .add_output_stream(WORDS)
        .run(timeout=10)
    )
    assert sorted(result.outputs(WORDS)[0]) == ["A", "B", "a", "b"]


def test_a_sink_that_starts_a_task_of_its_own_is_left_to_it() -> None:
    """A future a sink's function returns was scheduled (fire and forget, the user's choice):
    only a coroutine, which would never run, fails the task."""
    done: list[str] = []

    async def write(line: str) -> None:
        done.append(line)

    class Detached(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            app_desc.get_input_stream(LINES).sink(
                lambda line, collector, coordinator: asyncio.ensure_future(write(line))
            )

    TestRunner.of(Detached).add_input_stream(LINES, ["a", "b"]).run(timeout=10)
    assert done == ["a", "b"]
