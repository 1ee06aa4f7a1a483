"""Control messages through intermediate streams on the memory system.

The memory system carries framed records exactly as Kafka does (bytes with a type byte), so
these tests exercise the wire format, the reconciliation and the checkpointed bookkeeping;
tests/integration/test_control_jobs.py runs the same stories on the real broker.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from samzapy import (
    AsyncStreamTask,
    EndOfStreamListenerTask,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SerdeError,
    StreamTask,
    SystemStream,
    TaskError,
    WatermarkListenerTask,
)
from samzapy.control import (
    USER_MESSAGE_WITH_ORIGIN,
    EndOfStreamMessage,
    WatermarkMessage,
    decode,
    encode_control,
    frame,
)
from samzapy.control.wire import with_event_time
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing import ManualClock, TestRunner, wait_all_tasks_blocked

WORDS = SystemStream("memory", "words")
COUNTS = SystemStream("memory", "counts")
LINES = {
    0: ["the quick brown fox", "jumps over the lazy dog"],
    1: ["the dog sleeps", "a fox runs", "the end"],
    2: ["quick quick quick", "lazy afternoon"],
}
EXPECTED = Counter(w for lines in LINES.values() for line in lines for w in line.split())


class Splitter(StreamTask):
    """Stage 1: split lines and repartition the words by word."""

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        for word in envelope.message.split():
            collector.send(OutgoingMessageEnvelope(WORDS, word, key=word))


class Counter2(StreamTask, EndOfStreamListenerTask):
    """Stage 2: count the words of its partitions of the intermediate stream, emit at the end."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        self.counts[envelope.message] += 1

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        for word, n in sorted(self.counts.items()):
            collector.send(OutgoingMessageEnvelope(COUNTS, [word, n], key=word))


class WordCount(Splitter, Counter2):
    """Both stages in one job: a task reads the source and the intermediate stream."""

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        if envelope.system_stream_partition.stream == "lines":
            Splitter.process(self, envelope, collector, coordinator)
        else:
            Counter2.process(self, envelope, collector, coordinator)


def counted(broker: InMemoryBroker) -> Counter[str]:
    total: Counter[str] = Counter()
    for p in range(broker.partition_count("counts") or 0):
        for _key, (word, n) in broker.records("counts", p):
            assert word not in total, f"{word} counted by two tasks"
            total[word] = n
    return total


def framed_records(broker: InMemoryBroker, stream: str, partition: int) -> list[tuple[int, Any]]:
    """The records of a framed stream, a user message as ``(0, body)`` with or without its
    origin."""
    return [_plain(decode(m)) for _k, m in broker.records(stream, partition)]


def _plain(decoded: tuple[int, Any]) -> tuple[int, Any]:
    kind, body = decoded
    return (0, body) if kind >= USER_MESSAGE_WITH_ORIGIN else decoded


UPSTREAM = {
    "streams.words.samza.system": "memory",
    "streams.words.samza.intermediate": True,
    "streams.words.samza.msg.serde": "json",
    "streams.words.partitions": 2,
}


# -- a bounded two-stage pipeline finishes by itself ---------------------------------------------


def test_two_stages_in_one_job_finish_by_themselves_with_exact_counts() -> None:
    runner = (
        TestRunner(WordCount, {"task.max.concurrency": 1})
        .add_input("lines", LINES)
        .add_intermediate("words", partitions=2)
        .add_output("counts", partitions=2)
    )
    with capture_logs() as logs:
        result = runner.run(timeout=20)
    assert counted(runner.broker) == EXPECTED
    # docs/deploy.md: each task logs end_of_stream_sent once it ended its writing to the
    # stream, and task_ended once its inputs all ended, with what it processed.
    sent = sorted((e["task"], e["stream"]) for e in logs if e["event"] == "end_of_stream_sent")
    assert sent == [(f"Partition {p}", "memory.words") for p in range(3)]
    ended = {str(e["task"]): e["processed"] for e in logs if e["event"] == "task_ended"}
    assert sorted(ended) == [f"Partition {p}" for p in range(3)]
    lines = sum(len(ls) for ls in LINES.values())
    assert sum(ended.values()) == lines + sum(EXPECTED.values())  # lines, then their words
    # Every one of the 3 tasks ended its writing to every partition of the intermediate stream,
    # after its words.
    for p in (0, 1):
        records = framed_records(runner.broker, "words", p)
        ends = [body for kind, body in records if isinstance(body, EndOfStreamMessage)]
        assert sorted(e.task_name for e in ends) == ["Partition 0", "Partition 1", "Partition 2"]
        assert {e.task_count for e in ends} == {3}
        assert isinstance(records[-1][1], EndOfStreamMessage)  # nothing after the last end
    # The checkpoint of a task records the partitions it saw end.
    assert len(result.checkpoints) == 3  # every task committed at its end


@pytest.mark.parametrize("downstream_first", [True, False])
async def test_two_jobs_started_in_either_order_finish_with_exact_counts(
    downstream_first: bool,
) -> None:
    upstream = TestRunner(Splitter, {**UPSTREAM, "job.name": "split"}).add_input("lines", LINES)
    downstream = (
        TestRunner(Counter2, {"job.name": "count"}, namespace=upstream.namespace)
        .add_intermediate("words", partitions=2)
        .add_output("counts", partitions=2)
    )
    first, second = (downstream, upstream) if downstream_first else (upstream, downstream)
    first_run = asyncio.ensure_future(first.run_async(timeout=20))
    # The first job is up, and waiting for the other, when that one starts.
    await wait_until(lambda: first.container is not None and first.container.started.is_set())
    await wait_all_tasks_blocked()
    await asyncio.gather(first_run, second.run_async(timeout=20))
    assert counted(downstream.broker) == EXPECTED


def test_a_task_without_upstream_partitions_ends_its_writing_at_once() -> None:
    # 1 source partition, 3 intermediate partitions: tasks 1 and 2 read no source partition.
    runner = (
        TestRunner(WordCount)
        .add_input("lines", {0: ["a b c d e f"]})
        .add_intermediate("words", partitions=3)
        .add_output("counts", partitions=1)
    )
    runner.run(timeout=20)
    assert counted(runner.broker) == Counter("abcdef".replace("", " ").split())


def test_an_intermediate_stream_needs_a_bytes_serde() -> None:
    runner = (
        TestRunner(WordCount, {"streams.words.samza.msg.serde": "none"})
        .add_input("lines", {0: ["a"]})
        .add_intermediate("words", partitions=1)
    )
    with pytest.raises(TaskError, match=r"memory.words is framed .* set the stream's samza.msg"):
        runner.run(timeout=20)


# -- watermarks ----------------------------------------------------------------------------------


class WatermarkRecorder(StreamTask, WatermarkListenerTask, EndOfStreamListenerTask):
    seen: ClassVar[list[tuple[str, Any]]] = []
    lock = threading.Lock()

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        with self.lock:
            self.seen.append(("message", envelope.message))

    def on_watermark(self, watermark: int, collector: Any, coordinator: Any) -> None:
        with self.lock:
            self.seen.append(("watermark", watermark))

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        with self.lock:
            self.seen.append(("end", None))


def upstream_writer(broker: InMemoryBroker, stream: str, count: int = 3) -> Any:
    """Appends records to ``stream`` as upstream tasks t0..t<count-1> would."""

    def write(partition: int, item: Any) -> None:
        if isinstance(item, tuple) and item[0] == "wm":
            _, task, ts = item
            record = encode_control(WatermarkMessage(task, count, ts))
        elif isinstance(item, tuple) and item[0] == "eos":
            record = encode_control(EndOfStreamMessage(item[1], count))
        else:
            record = frame(item)
        broker.append(stream, partition, None, record)

    return write


def test_watermarks_are_reconciled_as_the_minimum_over_upstream_tasks() -> None:
    WatermarkRecorder.seen = []
    runner = TestRunner(WatermarkRecorder, {"streams.mid.samza.msg.serde": "string"})
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    write = upstream_writer(runner.broker, "mid")
    for item in [
        ("wm", "t0", 10),
        b"m1",
        ("wm", "t1", 20),
        b"m2",
        ("wm", "t2", 30),  # all three reported: 10
        b"m3",
        ("wm", "t0", 25),  # min(25, 20, 30) = 20
        ("wm", "t0", 5),  # t0 goes back: ignored, nothing regresses
        ("wm", "t2", 30),  # duplicate: nothing new
        ("wm", "t1", 40),  # min(25, 40, 30) = 25
        b"m4",
        ("eos", "t0"),  # t0 holds nothing back: min(40, 30) = 30
        ("eos", "t0"),  # a duplicate counts once
        ("eos", "t1"),  # t2's 30 alone: nothing new
        b"m5",
        ("eos", "t2"),
    ]:
        write(0, item)
    runner.run(timeout=20)
    assert WatermarkRecorder.seen == [
        ("message", "m1"),
        ("message", "m2"),
        ("watermark", 10),
        ("message", "m3"),
        ("watermark", 20),
        ("watermark", 25),
        ("message", "m4"),
        ("watermark", 30),
        ("message", "m5"),
        ("end", None),
    ]


def test_the_input_watermark_is_the_minimum_over_partitions_and_leaves_out_plain_inputs() -> None:
    WatermarkRecorder.seen = []
    runner = TestRunner(WatermarkRecorder, {"streams.mid.samza.msg.serde": "string"})
    runner.add_input("plain", {0: ["p"]})  # no watermarks: left out of the minimum
    runner.add_intermediate("mid", partitions=2)
    runner.broker.create_stream("mid", 2)
    write = upstream_writer(runner.broker, "mid", count=1)
    # Partition 0 (task 0 reads plain#0 and mid#0); partition 1 is task 1's.
    write(0, ("wm", "t0", 100))
    write(0, ("eos", "t0"))
    write(1, ("wm", "t0", 7))
    write(1, ("eos", "t0"))
    runner.run(timeout=20)
    watermarks = [v for kind, v in WatermarkRecorder.seen if kind == "watermark"]
    assert sorted(watermarks) == [7, 100]  # one per task: the plain input held nothing back


def test_a_watermark_derived_from_timestamps_follows_the_largest_minus_lateness() -> None:
    WatermarkRecorder.seen = []
    runner = TestRunner(
        WatermarkRecorder,
        {
            "streams.events.samza.watermark.lateness.ms": 100,
            "streams.events.samza.system": "memory",
        },
    )
    runner.add_input("events", {0: []})
    runner.broker.create_stream("events", 1)
    for ts in (1000, 1500, 1200):
        runner.broker.append("events", 0, None, f"e{ts}", timestamp=ts)
    runner.broker.end_stream("events")
    runner.run(timeout=20)
    watermarks = [v for kind, v in WatermarkRecorder.seen if kind == "watermark"]
    assert watermarks and watermarks[-1] == 1400  # the largest (1500) minus the lateness
    assert watermarks == sorted(set(watermarks))  # forward only


async def test_a_manual_clock_makes_a_quiet_partition_idle_and_the_watermark_moves_on() -> None:
    """``samza.watermark.idle.ms`` reads the container's clock: moving a ManualClock past it
    makes the quiet partition idle, and the task's watermark is the busy one's alone."""
    WatermarkRecorder.seen = []
    clock = ManualClock(0.0)
    config: dict[str, Any] = {}
    for stream in ("busy", "quiet"):  # partition 0 of both: one task reads the two
        config[f"streams.{stream}.samza.system"] = "memory"
        config[f"streams.{stream}.samza.watermark.lateness.ms"] = 0
    config["streams.quiet.samza.watermark.idle.ms"] = 60_000  # a minute of the clock's time
    runner = TestRunner(WatermarkRecorder, config, clock=clock)
    for stream in ("busy", "quiet"):
        runner.add_input(stream, {0: []})
        runner.broker.create_stream(stream, 1)
    runner.broker.append("quiet", 0, None, "q", timestamp=1_000)  # then nothing, and no end
    for ts in (2_000, 12_000):
        runner.broker.append("busy", 0, None, f"b{ts}", timestamp=ts)
    job = asyncio.ensure_future(runner.run_async(timeout=20))

    def watermarks() -> list[int]:
        return [v for kind, v in WatermarkRecorder.seen if kind == "watermark"]

    async def until(done: Any) -> bool:
        for _ in range(300):  # real time for the polls (100 ms each), never the idle timeout
            if done() or job.done():
                break
            await asyncio.sleep(0.01)
        return bool(done())

    assert await until(lambda: len(WatermarkRecorder.seen) >= 4 and watermarks())
    await asyncio.sleep(0.3)  # a few polls of real time: the quiet partition stays active
    assert watermarks() == [1_000]  # the quiet partition holds it back
    clock.advance(59.0)
    await asyncio.sleep(0.3)
    assert watermarks() == [1_000]  # 59 s: not idle yet
    clock.advance(1.0)  # 60 s without a message: idle
    assert await until(lambda: 12_000 in watermarks())
    assert watermarks() == [1_000, 12_000]
    runner.broker.end_stream("busy")
    runner.broker.end_stream("quiet")
    await job


@pytest.mark.parametrize("batch", [1, 1000])
def test_a_derived_watermark_comes_before_a_message_behind_it_however_the_input_is_batched(
    batch: int,
) -> None:
    """A message whose time is below the watermark of the messages before it has that
    watermark delivered (and passed on downstream) before it, in a batch of one or of all:
    whether it is late downstream of the task never depends on the polls."""
    WatermarkRecorder.seen = []
    runner = TestRunner(
        WatermarkRecorder,
        {
            "streams.events.samza.watermark.lateness.ms": 100,
            "streams.events.samza.system": "memory",
            "systems.memory.samza.fetch.threshold": batch,
        },
    )
    runner.add_input("events", {0: []})
    runner.broker.create_stream("events", 1)
    times = (1000, 1500, 1200, 2000, 1300, 1950)
    for ts in times:
        runner.broker.append("events", 0, None, ts, timestamp=ts)
    runner.broker.end_stream("events")
    runner.run(timeout=20)
    before: dict[int, int | None] = {}
    watermark = None
    for kind, value in WatermarkRecorder.seen:
        if kind == "watermark":
            watermark = value
        elif kind == "message":
            before[value] = watermark
    # behind the largest time before it less the lateness: that watermark came first
    assert before[1200] == 1400 and before[1300] == 1900
    assert before[1950] == 1900  # not behind it: no watermark owed before it
    watermarks = [v for kind, v in WatermarkRecorder.seen if kind == "watermark"]
    assert watermarks == sorted(set(watermarks))  # forward only


class AsyncWatermarks(AsyncStreamTask, WatermarkListenerTask):
    """Calls that finish late; on_watermark must find none of them in flight."""

    in_flight = 0
    problems: ClassVar[list[str]] = []
    watermarks: ClassVar[list[int]] = []

    async def process_async(self, envelope: IncomingMessageEnvelope, c: Any, k: Any) -> None:
        AsyncWatermarks.in_flight += 1
        await asyncio.sleep(0.002)
        AsyncWatermarks.in_flight -= 1

    def on_watermark(self, watermark: int, collector: Any, coordinator: Any) -> None:
        if AsyncWatermarks.in_flight:
            AsyncWatermarks.problems.append(f"{AsyncWatermarks.in_flight} in flight at {watermark}")
        AsyncWatermarks.watermarks.append(watermark)


def test_on_watermark_runs_with_nothing_in_flight_like_window() -> None:
    AsyncWatermarks.problems, AsyncWatermarks.watermarks = [], []
    runner = TestRunner(
        AsyncWatermarks,
        {"task.max.concurrency": 8, "streams.mid.samza.msg.serde": "string"},
    )
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    write = upstream_writer(runner.broker, "mid", count=1)
    for i in range(40):
        write(0, f"m{i}".encode())
        write(0, ("wm", "t0", i))
    write(0, ("eos", "t0"))
    runner.run(timeout=20)
    assert AsyncWatermarks.problems == []
    assert AsyncWatermarks.watermarks == sorted(set(AsyncWatermarks.watermarks))
    assert AsyncWatermarks.watermarks[-1] == 39


class Forwarder(StreamTask):
    """Reads a framed source and writes every message to an intermediate stream."""

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(SystemStream("memory", "next"), envelope.message))


def test_a_job_sends_its_output_watermark_and_end_downstream_after_its_messages() -> None:
    runner = TestRunner(
        Forwarder,
        {
            "streams.src.samza.system": "memory",
            "streams.src.samza.framed": True,
            "streams.src.samza.msg.serde": "string",
            "streams.next.samza.system": "memory",
            "streams.next.samza.intermediate": True,
            "streams.next.samza.msg.serde": "string",
            "streams.next.partitions": 1,
        },
    )
    runner.add_input("src", {0: []})
    runner.broker.create_stream("src", 2)
    write = upstream_writer(runner.broker, "src", count=1)
    write(0, b"a")
    write(0, ("wm", "spark-0", 50))
    write(1, ("wm", "spark-0", 70))
    write(1, b"b")
    write(0, ("eos", "spark-0"))
    write(1, ("eos", "spark-0"))
    runner.run(timeout=20)
    records = framed_records(runner.broker, "next", 0)
    messages = [body for kind, body in records if kind == 0]
    assert sorted(messages) == [b"a", b"b"]
    controls = [body for kind, body in records if kind != 0]
    ends = [c for c in controls if isinstance(c, EndOfStreamMessage)]
    assert {(e.task_name, e.task_count) for e in ends} == {("Partition 0", 2), ("Partition 1", 2)}
    watermarks = {(c.task_name, c.timestamp) for c in controls if isinstance(c, WatermarkMessage)}
    assert watermarks == {("Partition 0", 50), ("Partition 1", 70)}
    # Each task's end comes after its message.
    position = {id(body): i for i, (_, body) in enumerate(records)}
    assert max(position[id(e)] for e in ends) == len(records) - 1


# -- restart in the middle of the control messages ----------------------------------------------


class Collecting(StreamTask, EndOfStreamListenerTask):
    messages: ClassVar[list[str]] = []
    ended: ClassVar[int] = 0

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        Collecting.messages.append(envelope.message)

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        Collecting.ended += 1


async def wait_until(condition: Any, timeout: float = 10.0) -> None:  # noqa: ASYNC109
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - the condition is the task's own state
            await asyncio.sleep(0)


async def test_a_restart_between_first_and_last_end_of_stream_neither_hangs_nor_ends_early() -> (
    None
):
    Collecting.messages, Collecting.ended = [], 0
    config = {"streams.mid.samza.msg.serde": "string"}
    first = TestRunner(Collecting, config).add_intermediate("mid", partitions=1)
    first.broker.create_stream("mid", 1)
    write = upstream_writer(first.broker, "mid")
    for item in [b"a", ("eos", "t0"), b"b", ("eos", "t1")]:
        write(0, item)
    run = asyncio.ensure_future(first.run_async(timeout=20))
    await wait_until(lambda: Collecting.messages == ["a", "b"])
    assert first.container is not None
    first.container.request_stop("test")
    await run
    assert Collecting.ended == 0
    # Upstream task t1 restarts and sends its end again; t2 has not ended yet.
    for item in [("eos", "t1"), b"c"]:
        write(0, item)
    second = TestRunner(Collecting, config, namespace=first.namespace)
    second.add_intermediate("mid", partitions=1)
    run = asyncio.ensure_future(second.run_async(timeout=20))
    await wait_until(lambda: Collecting.messages == ["a", "b", "c"])
    await wait_all_tasks_blocked()
    assert not run.done() and Collecting.ended == 0  # t0 and t1 (once) of 3: not the end
    write(0, ("eos", "t2"))
    await run
    assert Collecting.messages == ["a", "b", "c"]  # nothing lost, nothing twice
    assert Collecting.ended == 1


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (b"\x07hello", r"unknown type byte 7"),
        (b"\x02{not json", r"end-of-stream message is not valid JSON"),
        (b"\x01[1, 2]", r"watermark message must be a JSON object"),
        (b"\x03\x00\x09t\x00x.y.0", r"origin of a user message is cut short"),
        (b"\x04" + bytes(31), r"origin of a user message is cut short"),
    ],
)
def test_a_bad_framed_record_fails_the_job_naming_partition_and_offset(
    record: bytes, problem: str
) -> None:
    Collecting.messages = []
    runner = TestRunner(Collecting, {"streams.mid.samza.msg.serde": "string"})
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    runner.broker.append("mid", 0, None, frame(b"ok"))
    runner.broker.append("mid", 0, None, record)
    with pytest.raises(
        SerdeError, match=rf"the framed record at offset 1 of memory.mid#0: .*{problem}"
    ):
        runner.run(timeout=20)


def test_a_bad_framed_record_is_dropped_when_deserialization_errors_are_dropped() -> None:
    Collecting.messages = []
    runner = TestRunner(
        Collecting,
        {"streams.mid.samza.msg.serde": "string", "task.drop.deserialization.errors": True},
    )
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    write = upstream_writer(runner.broker, "mid", count=1)
    write(0, b"before")
    runner.broker.append("mid", 0, None, b"\x09???")
    write(0, b"after")
    write(0, ("eos", "t0"))
    with capture_logs() as logs:
        result = runner.run(timeout=20)
    assert Collecting.messages == ["before", "after"]
    dropped = [e for e in logs if e["event"] == "message_dropped"]
    assert dropped and dropped[0]["offset"] == "1" and "unknown type byte 9" in dropped[0]["error"]
    assert result.metrics.snapshot()["container"]["deserialization-errors"] == 1


def test_a_task_that_had_ended_is_not_ended_again_after_a_restart() -> None:
    Collecting.messages, Collecting.ended = [], 0
    config = {"streams.mid.samza.msg.serde": "string"}
    first = TestRunner(Collecting, config).add_intermediate("mid", partitions=1)
    first.broker.create_stream("mid", 1)
    write = upstream_writer(first.broker, "mid", count=1)
    write(0, b"a")
    write(0, ("eos", "t0"))
    first.run(timeout=20)
    assert (Collecting.messages, Collecting.ended) == (["a"], 1)
    # Its tasks run again elsewhere (a rebalance, a restart): the checkpoint says it ended.
    second = TestRunner(Collecting, config, namespace=first.namespace)
    second.add_intermediate("mid", partitions=1)
    second.run(timeout=20)
    assert (Collecting.messages, Collecting.ended) == (["a"], 1)


# -- framed or not: the error says which the record looks like ------------------------------


@pytest.mark.parametrize(
    "record", [frame(b'{"n": 1}'), with_event_time(frame(b'{"n": 1}'), 1_600_000_000_000)]
)
def test_a_framed_record_on_a_plain_stream_says_to_read_it_framed(record: bytes) -> None:
    """A topic samzapy.spark's write_stream (or another job's intermediate stream) wrote
    framed, read as plain: the serde fails on the type byte, and the remedy the error gives
    must not be only to drop every record."""
    Collecting.messages = []
    runner = TestRunner(Collecting, {"streams.raw.samza.msg.serde": "json"})
    runner.broker.create_stream("raw", 1)
    runner.broker.append("raw", 0, None, record)
    runner.add_input("raw", [])
    with pytest.raises(SerdeError) as caught:
        runner.run(timeout=20)
    assert "the message at offset 0 of memory.raw#0" in str(caught.value)
    assert "streams.raw.samza.framed: true" in str(caught.value)


def test_a_plain_record_on_a_framed_stream_says_it_is_plain() -> None:
    Collecting.messages = []
    runner = TestRunner(Collecting, {"streams.mid.samza.msg.serde": "json"})
    runner.add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    runner.broker.append("mid", 0, None, b'{"n": 1}')
    with pytest.raises(SerdeError) as caught:
        runner.run(timeout=20)
    assert "unknown type byte 123" in str(caught.value)
    assert "the record reads as a plain message" in str(caught.value)


def test_a_record_that_only_starts_like_a_frame_gets_no_hint() -> None:
    """A zero byte then bytes the serde cannot read either (another format's magic byte)."""
    runner = TestRunner(Collecting, {"streams.raw.samza.msg.serde": "json"})
    runner.broker.create_stream("raw", 1)
    runner.broker.append("raw", 0, None, b"\x00\x00\x00\x00\x01binary")
    runner.add_input("raw", [])
    with pytest.raises(SerdeError) as caught:
        runner.run(timeout=20)
    assert "framed" not in str(caught.value).replace("task.drop", "")
