"""Messages a task cannot process: task.drop.process.errors and task.dead.letter.stream, in
each kind of slot, for deserialization drops and for an application's operators."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import (
    KV,
    AsyncStreamTask,
    InMemorySystemDescriptor,
    SerdeError,
    StreamApplication,
    StreamApplicationDescriptor,
    StreamTask,
    TaskError,
    TaskFencedError,
    Windows,
)
from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.container.drops import DEAD_LETTER_HEADERS, DROP_LOG_INTERVAL_S, DropLog, Drops
from samzapy.control import USER_MESSAGE, USER_MESSAGE_WITH_ORIGIN, decode
from samzapy.control.wire import frame, frame_with_origin, origin_prefix, source_id
from samzapy.system.ports import SystemProducer
from samzapy.testing import TestRunner

SENT: list[Any] = []


def _poisoned(message: Any) -> None:
    if message == "poison":
        raise ValueError(f"cannot take {message}")


class Forward(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        _poisoned(envelope.message)
        SENT.append(envelope.message)


class ForwardAsync(AsyncStreamTask):
    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        await asyncio.sleep(0)
        _poisoned(envelope.message)
        SENT.append(envelope.message)


def _inputs(partitions: int) -> dict[int, list[Any]]:
    return {
        p: [f"m{p}-0", "poison", f"m{p}-2", f"m{p}-3", "poison", f"m{p}-5"]
        for p in range(partitions)
    }


def _headers(runner: TestRunner, stream: str, offset: int) -> dict[str, bytes]:
    return dict(runner.broker.headers(stream, 0, str(offset)))


SLOTS = [
    pytest.param(Forward, {}, 1, id="inline-one-partition"),
    pytest.param(Forward, {}, 3, id="inline-round-robin"),
    pytest.param(Forward, {"job.container.thread.pool.size": 2}, 2, id="pool"),
    pytest.param(ForwardAsync, {"task.max.concurrency": 4}, 2, id="async"),
]
DROP = {"task.drop.process.errors": True, "task.dead.letter.stream": "memory.dlq"}


@pytest.mark.parametrize(("task", "config", "partitions"), SLOTS)
def test_a_failed_message_is_dropped_and_the_task_goes_on(
    task: type, config: dict[str, Any], partitions: int
) -> None:
    SENT.clear()
    runner = TestRunner(task, {**config, **DROP}).add_input("in", _inputs(partitions))
    with capture_logs() as logs:
        result = runner.run(timeout=10)
    assert sorted(SENT) == sorted(
        m for ms in _inputs(partitions).values() for m in ms if m != "poison"
    )
    assert result.metrics.snapshot()["container"]["process-errors"] == 2 * partitions
    # the checkpoint moved past every message, dropped ones included
    for offsets in result.checkpoints.values():
        assert set(offsets.values()) == {"5"}
    dropped = [e for e in logs if e["event"] == "message_dropped"]
    # at most once per partition per minute
    assert sorted(e["ssp"] for e in dropped) == [f"memory.in#{p}" for p in range(partitions)]
    assert {e["offset"] for e in dropped} == {"1"}
    assert all(e["error"] == "ValueError('cannot take poison')" for e in dropped)
    assert all(e["not_logged"] == 0 for e in dropped)  # the first line of each partition
    # each poison message in the dead-letter stream, as read
    letters = runner.broker.records("dlq", 0)
    assert letters == [(None, "poison")] * (2 * partitions)
    seen = set()
    for offset in range(len(letters)):
        headers = _headers(runner, "dlq", offset)
        assert headers["samzapy.error"] == b"cannot take poison"
        assert headers["samzapy.error.type"] == b"ValueError"
        assert headers["samzapy.dropped.by"] == b"task.drop.process.errors"
        assert headers["samzapy.stream"] == b"memory.in"
        assert int(headers["samzapy.time"]) > 0
        seen.add((headers["samzapy.task"], headers["samzapy.partition"], headers["samzapy.offset"]))
    assert seen == {
        (f"Partition {p}".encode(), str(p).encode(), o)
        for p in range(partitions)
        for o in (b"1", b"4")
    }


@pytest.mark.parametrize(("task", "config", "partitions"), SLOTS)
def test_without_the_policy_a_failed_message_fails_the_job(
    task: type, config: dict[str, Any], partitions: int
) -> None:
    SENT.clear()
    runner = TestRunner(task, config).add_input("in", _inputs(partitions))
    with pytest.raises(TaskError, match=r"at offset 1: ValueError\('cannot take poison'\)"):
        runner.run(timeout=10)


def test_a_broadcast_message_dropped_by_every_task_has_a_dead_letter_from_each() -> None:
    """configuration.md: a broadcast input's message dropped by several tasks has a dead
    letter from each (each task reads it and drops it on its own), and every task's
    checkpoint moves past it."""
    SENT.clear()
    config = {**DROP, "task.broadcast.inputs": ["memory.side#0"]}
    runner = TestRunner(Forward, config).add_input("in", {p: [f"m{p}"] for p in range(3)})
    runner.add_input("side", ["s0", "poison", "s2"])
    result = runner.run(timeout=10)
    assert sorted(SENT) == sorted(["m0", "m1", "m2"] + ["s0", "s2"] * 3)
    letters = runner.broker.records("dlq", 0)
    assert letters == [(None, "poison")] * 3
    tasks = sorted(_headers(runner, "dlq", offset)["samzapy.task"] for offset in range(3))
    assert tasks == [f"Partition {p}".encode() for p in range(3)]
    side = SystemStreamPartition("memory", "side", 0)
    assert {offsets[side] for offsets in result.checkpoints.values()} == {"2"}


def test_the_dead_letter_keeps_the_records_bytes_key_and_headers() -> None:
    """A deserialization drop (bytes the json serde refuses) and a process drop: each dead
    letter is the record as read, its key and headers first, then the error's headers."""
    SENT.clear()
    runner = TestRunner(
        Forward,
        {
            "task.drop.process.errors": True,
            "task.drop.deserialization.errors": True,
            "task.dead.letter.stream": "memory.dlq",
            "streams.in.samza.msg.serde": "json",
            "streams.in.samza.key.serde": "string",
        },
    )
    broker = runner.broker
    broker.create_stream("in", 1)
    broker.append("in", 0, b"k0", b'"a"')
    broker.append("in", 0, b"k1", b"{not json", headers=(("trace", b"\x00\x01"),))
    broker.append("in", 0, b"k2", b'"poison"', headers=(("trace", b"t2"),))
    broker.append("in", 0, b"k3", b'"b"')
    broker.end_stream("in")
    with capture_logs() as logs:
        result = runner.add_input("in", []).run(timeout=10)
    assert SENT == ["a", "b"]
    assert broker.records("dlq", 0) == [(b"k1", b"{not json"), (b"k2", b'"poison"')]
    first, second = (broker.headers("dlq", 0, str(o)) for o in (0, 1))
    assert first[0] == ("trace", b"\x00\x01") and second[0] == ("trace", b"t2")
    assert [name for name, _ in first[1:]] == list(DEAD_LETTER_HEADERS[:-1])
    assert dict(first)["samzapy.dropped.by"] == b"task.drop.deserialization.errors"
    assert dict(first)["samzapy.error.type"] == b"samzapy.api.errors.SerdeError"
    assert dict(first)["samzapy.offset"] == b"1"
    assert dict(second)["samzapy.dropped.by"] == b"task.drop.process.errors"
    assert dict(second)["samzapy.offset"] == b"2"
    assert result.checkpoints[TaskName("Partition 0")] == {
        SystemStreamPartition("memory", "in", 0): "3"
    }
    snapshot = result.metrics.snapshot()["container"]
    assert snapshot["process-errors"] == 1 and snapshot["deserialization-errors"] == 1
    assert [e["offset"] for e in logs if e["event"] == "message_dropped"] == ["1", "2"]


@pytest.mark.parametrize(
    "inputs",
    [[b'"a"', b"{bad", b'"b"'], [b'"a"', b'"b"', b"{bad"]],
    ids=["in-the-middle", "last"],
)
def test_a_deserialization_drop_without_a_dead_letter_stream_is_only_dropped(
    inputs: list[bytes],
) -> None:
    """The checkpoint moves past it, the partition's last record too (a restart would drop
    and count it again)."""
    SENT.clear()
    runner = TestRunner(
        Forward,
        {"task.drop.deserialization.errors": True, "streams.in.samza.msg.serde": "json"},
    ).add_input("in", inputs)
    result = runner.run(timeout=10)
    assert SENT == ["a", "b"]
    assert runner.broker.partition_count("dlq") is None
    assert set(next(iter(result.checkpoints.values())).values()) == {"2"}


MEMORY = InMemorySystemDescriptor("memory")
LINES = MEMORY.get_input_descriptor("lines")
OUT = MEMORY.get_output_descriptor("out")


class Inverse(StreamApplication):
    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.get_input_stream(LINES).map(lambda m: 1 / m).send_to(
            app_desc.get_output_stream(OUT)
        )


def test_an_application_drops_what_its_operator_fails_on_and_names_the_operator() -> None:
    runner = TestRunner.of(Inverse, DROP).add_input_stream(LINES, [1, 0, 4])
    runner.add_output_stream(OUT)
    with capture_logs() as logs:
        result = runner.run(timeout=10)
    assert result.outputs(OUT) == {0: [1.0, 0.25]}
    (dropped,) = [e for e in logs if e["event"] == "message_dropped"]
    assert dropped["operator"] == "map-1" and "ZeroDivisionError" in dropped["error"]
    assert runner.broker.records("dlq", 0) == [(None, 0)]
    headers = dict(runner.broker.headers("dlq", 0, "0"))
    assert headers["samzapy.operator"] == b"map-1"
    assert headers["samzapy.error.type"] == b"ZeroDivisionError"


# -- the policy on its own ------------------------------------------------------------------


class Refusing(SystemProducer):
    def send(self, system_stream: Any, partition: Any, key: Any, message: Any) -> None:
        raise AssertionError("not used")

    async def flush(self) -> None:
        return None


def _failure(cause: BaseException, env: IncomingMessageEnvelope) -> TaskError:
    error = TaskError("process() failed", task_name=TaskName("Partition 0"), offset=env.offset)
    error.__cause__ = cause
    return error


async def test_a_dead_letter_that_cannot_be_sent_fails_the_task() -> None:
    drops = Drops(
        TaskName("Partition 0"),
        drop_process_errors=True,
        dead_letter=SystemStream("files", "dlq"),
        producer=Refusing(),
    )
    env = IncomingMessageEnvelope(SystemStreamPartition("memory", "in", 0), "7", None, "x")
    env.raw = RawRecord(None, b"x")
    error = drops.process_failed(_failure(ValueError("bad"), env), env)
    assert isinstance(error, TaskError)
    assert str(error).startswith(
        "task 'Partition 0' cannot write the dead letter of memory.in#0 at offset 7 to files.dlq "
        "(task.dead.letter.stream): cannot send to files.dlq: system 'files' does not keep "
        "record headers"
    )


async def test_a_fenced_task_is_never_dropped() -> None:
    drops = Drops(TaskName("Partition 0"), drop_process_errors=True)
    env = IncomingMessageEnvelope(SystemStreamPartition("memory", "in", 0), "7", None, "x")
    failure = _failure(TaskFencedError("fenced"), env)
    assert drops.process_failed(failure, env) is failure
    assert drops.process_failed(_failure(ValueError("bad"), env), env) is None


def test_keyed_inputs_keep_their_keys_in_the_dead_letter() -> None:
    SENT.clear()
    runner = TestRunner(Forward, DROP).add_input("in", [KV("a", "x"), KV("b", "poison")])
    runner.run(timeout=10)
    assert runner.broker.records("dlq", 0) == [("b", "poison")]


class Exits(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message == "stop":
            raise SystemExit(3)
        SENT.append(envelope.message)


class ExitsAsync(AsyncStreamTask):
    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        await asyncio.sleep(0)
        if envelope.message == "stop":
            raise KeyboardInterrupt
        SENT.append(envelope.message)


@pytest.mark.parametrize(
    ("task", "config"),
    [
        pytest.param(Exits, {}, id="inline"),
        pytest.param(Exits, {"job.container.thread.pool.size": 2}, id="pool"),
        pytest.param(ExitsAsync, {"task.max.concurrency": 2}, id="async"),
    ],
)
def test_a_system_exit_or_interrupt_is_never_dropped(task: type, config: dict[str, Any]) -> None:
    """A SystemExit or KeyboardInterrupt from process asks the process to stop: it fails the
    job as without the policy, and nothing is dead-lettered."""
    SENT.clear()
    runner = TestRunner(task, {**config, **DROP}).add_input("in", ["a", "stop", "b"])
    with pytest.raises(TaskError, match="at offset 1"):
        runner.run(timeout=10)
    assert runner.broker.records("dlq", 0) == []


async def test_a_cancelled_error_of_the_task_s_own_is_dropped() -> None:
    drops = Drops(TaskName("Partition 0"), drop_process_errors=True)
    env = IncomingMessageEnvelope(SystemStreamPartition("memory", "in", 0), "7", None, "x")
    assert drops.process_failed(_failure(asyncio.CancelledError(), env), env) is None
    for cause in (SystemExit(1), KeyboardInterrupt(), GeneratorExit()):
        failure = _failure(cause, env)
        assert drops.process_failed(failure, env) is failure


EVENTS = (
    InMemorySystemDescriptor("memory")
    .get_input_descriptor("events")
    .with_timestamp(lambda m: m["t"])
    .with_watermarks(timedelta(0))
)


class FailingPane(StreamApplication):
    """Counts per 10 s event-time window; the map after the window fails on the first pane,
    which fires as the message at 15 s moves the watermark past 10 s."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        window = Windows.tumbling_window(
            timedelta(seconds=10), lambda: 0, lambda m, n: n + 1
        ).with_event_time()
        app_desc.get_input_stream(EVENTS).window(window, "w").map(self.check).send_to(
            app_desc.get_output_stream(OUT)
        )

    @staticmethod
    def check(pane: Any) -> Any:
        if pane.key.pane_id == 0:
            raise ValueError("cannot take pane 0")
        return pane.message


def test_a_pane_a_message_s_watermark_fired_fails_the_job_not_the_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure is the pane's: the message that moved the watermark is not dropped (nor
    dead-lettered with the pane's error, its own count lost), the job fails naming it."""
    monkeypatch.chdir(tmp_path)  # the window's store
    times = [1_000, 2_000, 15_000, 16_000]
    runner = TestRunner.of(FailingPane, DROP).add_input_stream(EVENTS, [{"t": t} for t in times])
    runner.add_output_stream(OUT)
    with pytest.raises(TaskError, match=r"at offset 2: .*'map-1'.* moved the watermark"):
        runner.run(timeout=10)
    assert runner.broker.records("dlq", 0) == []


async def test_a_drop_line_counts_the_drops_not_logged_since_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(asyncio.get_running_loop(), "time", lambda: now[0])
    drop_log = DropLog()
    a, b = SystemStreamPartition("memory", "in", 0), SystemStreamPartition("memory", "in", 1)
    assert drop_log.due(a) == 0
    assert [drop_log.due(a), drop_log.due(a)] == [None, None]  # within the interval
    assert drop_log.due(b) == 0  # per partition
    now[0] += DROP_LOG_INTERVAL_S
    assert drop_log.due(a) == 2
    assert drop_log.due(a) is None
    now[0] += DROP_LOG_INTERVAL_S
    assert [drop_log.due(a), drop_log.due(b)] == [1, 0]


class ForwardUntilStop(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message == "stop":
            coordinator.shutdown()
            return
        Forward.process(self, envelope, collector, coordinator)  # type: ignore[arg-type]


@pytest.mark.parametrize("with_origin", [True, False], ids=["origin", "no-origin"])
def test_a_dead_letter_written_back_is_dropped_only_when_its_record_carries_an_origin(
    with_origin: bool,
) -> None:
    """docs/configuration.md: a dead letter of a framed stream keeps its frame; written back to
    the partition it was read from, its reader drops it as a record it applied when the frame
    carries an origin (type 3), and processes it again when it carries none (type 0)."""
    prefix = origin_prefix(source_id("writer/Partition 0", "memory.lines.0"), 0)

    def framed(offset: int, word: str) -> bytes:
        body = json.dumps(word).encode()
        return frame_with_origin(prefix, offset, 0, body) if with_origin else frame(body)

    SENT.clear()
    config = {
        **DROP,
        "streams.words.samza.system": "memory",
        "streams.words.samza.framed": True,
        "streams.words.samza.msg.serde": "json",
    }
    first = TestRunner(ForwardUntilStop, config)
    broker = first.broker
    broker.create_stream("words", 1)
    for offset, word in enumerate(["a", "poison", "b", "stop"]):
        broker.append("words", 0, None, framed(offset, word))
    first.add_input("words", []).run(timeout=10)
    assert SENT == ["a", "b"]
    [(key, letter)] = broker.records("dlq", 0)
    assert decode(letter)[0] == (USER_MESSAGE_WITH_ORIGIN if with_origin else USER_MESSAGE)
    broker.append("words", 0, key, letter)  # the dead letter, written back
    broker.append("words", 0, None, framed(4, "stop"))
    again = TestRunner(ForwardUntilStop, config, namespace=first.namespace)
    result = again.add_input("words", []).run(timeout=10)
    assert SENT == ["a", "b"]
    metrics = result.metrics.snapshot()
    assert metrics["container"]["process-errors"] == (0 if with_origin else 1)
    assert metrics["task.Partition 0"]["duplicates-dropped"] == (1 if with_origin else 0)
    assert len(broker.records("dlq", 0)) == (1 if with_origin else 2)


def test_without_the_policy_an_undecodable_message_fails_naming_its_partition_and_offset() -> None:
    """task_failed's ssp and offset (what `jq '{task, ssp, offset}'` reads) for a message
    that cannot be deserialized, as for a task's failure."""
    SENT.clear()
    runner = TestRunner(Forward, {"streams.in.samza.msg.serde": "json"})
    runner.add_input("in", [b'"a"', b"{bad", b'"b"'])
    with capture_logs() as logs, pytest.raises(SerdeError, match="at offset 1 of "):
        runner.run(timeout=10)
    (failed,) = [e for e in logs if e["event"] == "task_failed"]
    assert (failed["ssp"], failed["offset"]) == ("memory.in#0", "1")
    assert failed["task"] == "Partition 0"
