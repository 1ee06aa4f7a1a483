"""`samzapy tail`: how a record becomes a JSON line (pure), which stream a name means, reading
the memory system in-process, and the real command over the file system (partitions, offsets,
limits, --follow until Ctrl-C, a closed pipe, and the exit-2 cases)."""

from __future__ import annotations

import asyncio
import io
import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_run import HERE, ROOT, job_yaml, samzapy, write_partitions
from test_run_apps import app_yaml

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.cli.record_lines import Printer, describe, jsonable
from samzapy.cli.tail import UsageError, find_stream, reads_committed, start_offset, tail
from samzapy.config import ResolvedConfig, load_config, resolve
from samzapy.container.consumers import InputSerdes
from samzapy.control.wire import (
    EndOfStreamMessage,
    WatermarkMessage,
    encode_control,
    frame,
    frame_with_compact_origin,
    frame_with_floor,
    frame_with_origin,
    origin_prefix,
    with_event_time,
)
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import OffsetBounds
from samzapy.system.serde import JsonSerde, LongSerde, StringSerde

SSP = SystemStreamPartition("kafka", "words", 3)
PREFIX = origin_prefix(bytes(range(8)), 7)


def line_of(
    message: Any, key: Any = None, serdes: InputSerdes | None = None, **envelope: Any
) -> dict[str, Any]:
    env = IncomingMessageEnvelope(SSP, envelope.get("offset", "12"), key, message, 1000)
    return describe(env, serdes or InputSerdes(None, None))


FRAMED = InputSerdes(StringSerde(), JsonSerde(), framed=True)
PLACE = {"stream": "kafka.words", "partition": 3, "offset": 12, "timestamp": 1000}


# -- a record as a JSON line ----------------------------------------------------------------------


def test_a_framed_user_message_is_decoded_by_the_streams_serdes() -> None:
    assert line_of(frame(b'{"n":1}'), b"k", FRAMED) == PLACE | {"key": "k", "value": {"n": 1}}


def test_a_message_with_its_origin_shows_the_origin_and_its_floor() -> None:
    with_origin = frame_with_origin(PREFIX, 41, 2, b"[1]")
    origin = {"source": "0001020304050607", "epoch": 7, "offset": 41, "ordinal": 2}
    assert line_of(with_origin, None, FRAMED) == PLACE | {
        "key": None,
        "value": [1],
        "origin": origin,
    }
    with_floor = frame_with_floor(PREFIX, 41, 2, 39, b"[1]")
    assert line_of(with_floor, None, FRAMED)["origin"] == origin | {"floor": 39}
    # Type 5, what writers send: the same origin in compact form.
    compact = with_event_time(frame_with_compact_origin(PREFIX, 41, 2, b"[1]"), 5)
    assert line_of(compact, None, FRAMED) == line_of(with_origin, None, FRAMED)


def test_control_messages_are_lines_of_their_own() -> None:
    eos = encode_control(EndOfStreamMessage("Partition 0", 4))
    assert line_of(eos, None, FRAMED) == PLACE | {
        "control": "end-of-stream",
        "task": "Partition 0",
        "task_count": 4,
    }
    watermark = encode_control(WatermarkMessage("Partition 1", 2, 1_700_000_000_000))
    assert line_of(watermark, None, FRAMED) == PLACE | {
        "control": "watermark",
        "task": "Partition 1",
        "task_count": 2,
        "watermark": 1_700_000_000_000,
    }


@pytest.mark.parametrize(
    ("key", "message", "error", "data"),
    [
        (b"k", b"", "framed record: an empty record has no type byte", b""),
        (b"k", b"\x07x", "framed record: unknown type byte 7", b"\x07x"),
        (
            b"k",
            b"\x03\x00",
            "framed record: the origin of a user message is cut short",
            b"\x03\x00",
        ),
        (b"k", b"\x02{nope", "framed record: the end-of-stream message is not valid JSON", None),
        (b"k", frame(b"{nope"), "message: ", frame(b"{nope")),
        (b"\xff", frame(b"1"), "key: string serde expects UTF-8 bytes", b"\xff"),
    ],
)
def test_an_undecodable_record_is_a_line_with_its_bytes_in_hex(
    key: bytes, message: bytes, error: str, data: bytes | None
) -> None:
    line = line_of(message, key, FRAMED)
    assert line["error"].startswith(error)
    assert line["hex"] == (message if data is None else data).hex()
    assert {k: line[k] for k in PLACE} == PLACE
    assert "value" not in line
    assert ("key" in line) == error.startswith("message")


def test_without_serdes_bytes_are_text_when_utf8_else_hex_and_a_tombstone_is_null() -> None:
    assert line_of(b"caf\xc3\xa9", b"\xff\x00") == PLACE | {"key": {"hex": "ff00"}, "value": "café"}
    # A null value is a tombstone even on a framed stream: no frame to decode.
    assert line_of(None, b"k", FRAMED) == PLACE | {"key": "k", "value": None}


def test_offsets_that_are_not_numbers_and_missing_timestamps() -> None:
    env = IncomingMessageEnvelope(SSP, "abc", None, b"x", None)
    line = describe(env, InputSerdes(None, None))
    assert (line["offset"], line["timestamp"]) == ("abc", None)


def test_jsonable_makes_any_decoded_value_printable() -> None:
    class Point:
        def __str__(self) -> str:
            return "Point(1, 2)"

    value = {1: (b"a", b"\xfe"), "f": [math.nan, 1.5], "s": {True}, "p": Point()}
    assert jsonable(value) == {
        "1": ["a", {"hex": "fe"}],
        "f": ["nan", 1.5],
        "s": [True],
        "p": "Point(1, 2)",
    }
    json.dumps(jsonable(value), allow_nan=False)


def test_the_printer_stops_at_its_limit() -> None:
    out = io.StringIO()
    printer = Printer(out, 3)
    printer.print([{"n": 1}, {"n": 2}])
    assert not printer.full
    printer.print([{"n": 3}, {"n": 4}])
    assert printer.full
    printer.print([{"n": 5}])
    assert out.getvalue() == '{"n":1}\n{"n":2}\n{"n":3}\n'


# -- which stream a name means --------------------------------------------------------------------


def resolved(**extra: Any) -> ResolvedConfig:
    keys = {
        "job.name": "j",
        "task.class": "m:T",
        "task.inputs": ["kafka.views", "kafka.my.topic", "other.views"],
        "systems.kafka.samza.factory": "kafka",
        "systems.other.samza.factory": "memory",
        "streams.by-member.samza.system": "kafka",
        "streams.by-member.samza.physical.name": "views-by-member",
        "streams.by-member.samza.intermediate": True,
        "streams.counts.samza.system": "kafka",
        **extra,
    }
    return resolve(load_config(text=json.dumps(keys)))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("by-member", SystemStream("kafka", "views-by-member")),  # a stream id
        ("views-by-member", SystemStream("kafka", "views-by-member")),  # its physical name
        ("counts", SystemStream("kafka", "counts")),  # an output named under streams
        ("my.topic", SystemStream("kafka", "my.topic")),  # a dotted name: "my" is no system
        ("kafka.anything", SystemStream("kafka", "anything")),  # system.stream, even unknown
        ("other.views", SystemStream("other", "views")),
    ],
)
def test_a_stream_is_found_by_id_physical_name_or_system_stream(
    name: str, expected: SystemStream
) -> None:
    assert find_stream(resolved(), name) == expected


def test_a_name_on_two_systems_or_on_none_is_refused_naming_the_choices() -> None:
    with pytest.raises(
        UsageError, match=r"'views' is on several systems.*kafka\.views, other\.views"
    ):
        find_stream(resolved(), "views")
    with pytest.raises(
        UsageError,
        match=r"'nope' is not a stream of the job: .*\(kafka, other\).*kafka\.views-by-member",
    ):
        find_stream(resolved(), "nope")


def test_a_stream_id_without_a_system_takes_its_inputs_or_the_default_system() -> None:
    config = resolved(**{"streams.views.samza.key.serde": "string"})
    with pytest.raises(UsageError, match="stream 'views' has no system of the job"):
        find_stream(config, "views")  # kafka.views and other.views: which one?
    config = resolved(**{"streams.solo.samza.key.serde": "string", "job.default.system": "other"})
    assert find_stream(config, "solo") == SystemStream("other", "solo")


def test_the_job_reads_committed_its_intermediate_streams_and_what_exactly_once_writes() -> None:
    assert reads_committed(resolved(), SystemStream("kafka", "views-by-member"))
    assert not reads_committed(resolved(), SystemStream("kafka", "views"))
    inputs = ["kafka.views", "kafka.views-by-member", "other.views"]
    config = resolved(**{"task.inputs": inputs})
    # The container reads a system carrying an intermediate input committed, all of it.
    assert reads_committed(config, SystemStream("kafka", "views"))
    assert not reads_committed(config, SystemStream("other", "views"))
    config = resolved(
        **{"task.processing.guarantee": "exactly-once", "task.checkpoint.factory": "kafka"}
    )
    assert reads_committed(config, SystemStream("other", "out"))
    assert not reads_committed(config, SystemStream("other", "views"))


@pytest.mark.parametrize(
    ("start", "count", "expected"),
    [
        ("oldest", 3, "4"),
        ("upcoming", 3, "9"),
        ("4", 1, "4"),
        ("9", 1, "9"),
        ("3", 1, r"--from 3: memory.s#0 holds offsets 4..9"),
        ("10", 1, r"--from 10: memory.s#0 holds offsets 4..9"),
        ("5", 2, r"--from 5: an offset is of one partition.*give --partition"),
        ("x", 1, r"--from must be oldest, upcoming or an offset of memory.s#0 .*got 'x'"),
    ],
)
def test_start_offsets(start: str, count: int, expected: str) -> None:
    admin = InMemorySystemFactory("memory", {}).get_admin()
    ssp = SystemStreamPartition("memory", "s", 0)
    bounds = OffsetBounds("4", "9")
    if expected.isdigit():
        assert start_offset(admin, ssp, bounds, start, count) == expected
    else:
        with pytest.raises(UsageError, match=expected):
            start_offset(admin, ssp, bounds, start, count)
    empty = OffsetBounds(None, "9")
    assert start_offset(admin, ssp, empty, "oldest", 1) == "9"


# -- reading the memory system in-process ---------------------------------------------------------


@pytest.fixture
def memory_job(request: pytest.FixtureRequest) -> tuple[ResolvedConfig, InMemoryBroker]:
    namespace = f"tail-{request.node.name}"
    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "j",
                    "task.class": "m:T",
                    "task.inputs": ["mem.mid"],
                    "systems.mem.samza.factory": "memory",
                    "systems.mem.namespace": namespace,
                    "streams.mid.samza.system": "mem",
                    "streams.mid.samza.intermediate": True,
                    "streams.mid.samza.msg.serde": "json",
                }
            )
        )
    )
    broker = InMemoryBroker.for_namespace(namespace)
    request.addfinalizer(lambda: InMemoryBroker.drop_namespace(namespace))
    broker.create_stream("mid", 2)
    return config, broker


def printed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_tail_reads_each_partition_to_its_end_at_start(
    memory_job: tuple[ResolvedConfig, InMemoryBroker],
) -> None:
    config, broker = memory_job
    broker.append("mid", 1, None, frame(b'"b0"'))
    broker.append("mid", 0, "k", frame(b'"a0"'))
    broker.append("mid", 0, None, encode_control(EndOfStreamMessage("t", 1)))
    out = io.StringIO()

    class LateWriter(Printer):
        """A message arrives on partition 0 while tail prints its first lines."""

        def print(self, lines: Any) -> None:
            if not out.getvalue():
                broker.append("mid", 0, None, frame(b'"late"'))
            super().print(lines)

    asyncio.run(tail(config, SystemStream("mem", "mid"), LateWriter(out)))
    got = [(x["partition"], x["offset"], x.get("value"), x.get("control")) for x in printed(out)]
    assert got == [(0, 0, "a0", None), (0, 1, None, "end-of-stream"), (1, 0, "b0", None)]


def test_tail_follows_new_messages_until_every_partition_ended(
    memory_job: tuple[ResolvedConfig, InMemoryBroker],
) -> None:
    config, broker = memory_job
    broker.append("mid", 0, None, frame(b"1"))
    out = io.StringIO()

    async def main() -> None:
        target = SystemStream("mem", "mid")
        reading = asyncio.create_task(tail(config, target, Printer(out), "upcoming", None, True))
        await asyncio.sleep(0.05)
        broker.append("mid", 1, None, frame(b"2"))
        broker.append("mid", 0, None, frame(b"3"))
        broker.end_stream("mid")
        await asyncio.wait_for(reading, 5)

    asyncio.run(main())
    assert sorted(x["value"] for x in printed(out)) == [2, 3]


def test_tail_refuses_a_memory_stream_that_is_not_there(
    memory_job: tuple[ResolvedConfig, InMemoryBroker],
) -> None:
    config, _ = memory_job
    with pytest.raises(
        UsageError, match=r"stream mem\.gone does not exist on system 'mem'.*process"
    ):
        asyncio.run(tail(config, SystemStream("mem", "gone"), Printer(io.StringIO())))


# -- the real command over the file system --------------------------------------------------------


def lines_of(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture
def file_job(tmp_path: Path) -> Path:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}, {"n": 1}, {"n": 2}], 1: [{"n": 10}]})
    with open(tmp_path / "data" / "in" / "1.jsonl", "a") as partition:
        partition.write("{not json\n")
    return job_yaml(tmp_path, "Copy")


def test_tail_prints_every_partition_in_order_and_a_bad_line_as_such(file_job: Path) -> None:
    got = lines_of(samzapy("tail", str(file_job), "in"))
    common = {"stream": "files.in", "timestamp": None, "key": None}
    assert got == [
        common | {"partition": 0, "offset": 0, "value": {"n": 0}},
        common | {"partition": 0, "offset": 1, "value": {"n": 1}},
        common | {"partition": 0, "offset": 2, "value": {"n": 2}},
        common | {"partition": 1, "offset": 0, "value": {"n": 10}},
        {
            "stream": "files.in",
            "partition": 1,
            "offset": 1,
            "timestamp": None,
            "key": None,
            "error": got[4]["error"],
            "hex": b"{not json".hex(),
        },
    ]
    assert got[4]["error"].startswith("message: json serde")


def test_tail_from_an_offset_of_one_partition_with_a_limit(file_job: Path) -> None:
    got = lines_of(samzapy("tail", str(file_job), "files.in", "--partition", "0", "--from", "1"))
    assert [x["value"] for x in got] == [{"n": 1}, {"n": 2}]
    got = lines_of(samzapy("tail", str(file_job), "in", "--limit", "4", "--from", "oldest"))
    assert [(x["partition"], x["offset"]) for x in got] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert lines_of(samzapy("tail", str(file_job), "in", "--from", "upcoming")) == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["nope"], "stream 'nope' is not a stream of the job: expected a stream id"),
        (["files.gone"], "stream files.gone does not exist on system 'files'"),
        (
            ["in", "--partition", "2"],
            "partition 2 is out of range: stream files.in has partitions 0..1",
        ),
        (["in", "--from", "1"], "--from 1: an offset is of one partition"),
        (["in", "--partition", "0", "--from", "4"], "--from 4: files.in#0 holds offsets 0..3"),
        (["in", "--limit", "0"], "argument --limit: expected an integer >= 1, got '0'"),
        (["in", "--set", "task.commit.ms=soon"], "task.commit.ms must be an integer"),
    ],
)
def test_tail_exits_2_saying_what_it_cannot_read(
    file_job: Path, args: list[str], error: str
) -> None:
    proc = samzapy("tail", str(file_job), *args)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert error in proc.stderr


def test_a_missing_job_file_exits_2(tmp_path: Path) -> None:
    proc = samzapy("tail", str(tmp_path / "none.yaml"), "in")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "does not exist" in proc.stderr


def test_an_applications_streams_are_found_by_their_ids(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"k": "a"}]})
    job = app_yaml(tmp_path, "CountByKey")
    assert [x["value"] for x in lines_of(samzapy("tail", str(job), "in"))] == [{"k": "a"}]
    # Its partition_by stream is planned on a memory system: it lives in the job's process.
    proc = samzapy("tail", str(job), "clitest-1-partition_by-by-k")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert "stream mem.clitest-1-partition_by-by-k does not exist on system 'mem'" in proc.stderr


def test_tail_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    write_partitions(
        tmp_path / "data", "in", {0: [{"n": i, "pad": "x" * 100} for i in range(20000)]}
    )
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "tail", str(job), "in"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = json.loads(proc.stdout.readline())
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(60) == 0
    assert proc.stderr.read() == b""
    assert first["value"]["n"] == 0


def test_tail_follow_into_a_closed_pipe_exits_quietly_with_nothing_new(tmp_path: Path) -> None:
    """docs/deploy.md: "`samzapy tail ... | head` and Ctrl-C exit 0 quietly": with --follow
    too, once head has its lines, though the stream stays quiet (no write to fail): else
    the shell's pipeline would wait for the stream's next message."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}], 1: []})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "tail", str(job), "in", "--follow"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        assert json.loads(proc.stdout.readline())["value"] == {"n": 0}
        proc.stdout.close()  # as `| head -1` does
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr.read() == b""


@pytest.mark.parametrize(
    ("configured", "stop"),
    [(True, signal.SIGINT), (None, signal.SIGINT), (None, signal.SIGTERM)],
)
def test_tail_follow_prints_appended_lines_until_ctrl_c(
    tmp_path: Path, configured: bool | None, stop: signal.Signals
) -> None:
    """--follow follows a file system's files whether the job file has it follow them or
    not (follow: false, the default, reads them to their end). SIGTERM (``docker stop``)
    ends it as Ctrl-C does."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}], 1: []})
    extra = {} if configured is None else {"systems.files.follow": configured}
    job = job_yaml(tmp_path, "Copy", **extra)
    out = tmp_path / "tail.out"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", "tail", str(job), "in", "--follow"],
            cwd=HERE,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C as at a terminal, also when the suite itself runs as a background job
            # (whose children start with SIGINT ignored, so Python's KeyboardInterrupt is off).
            preexec_fn=_sigint_default,
        )
    try:
        deadline = time.monotonic() + 30
        while '"n":0' not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the old line never came"
            time.sleep(0.05)
        with open(tmp_path / "data" / "in" / "1.jsonl", "a") as partition:
            partition.write('{"n": 1}\n')
        while '"n":1' not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the new line never came"
            time.sleep(0.05)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err) == (0, "")
    assert [
        (x["partition"], x["value"]) for x in map(json.loads, out.read_text().splitlines())
    ] == [
        (0, {"n": 0}),
        (1, {"n": 1}),
    ]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_tail_decodes_a_store_changelog_by_the_stores_serdes(
    request: pytest.FixtureRequest,
) -> None:
    """A changelog holds the store's own bytes (its key.serde and msg.serde), not records of
    its system's default serdes: tail shows them as the store holds them."""
    namespace = f"tail-{request.node.name}"
    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "j",
                    "task.class": "m:T",
                    "task.inputs": ["mem.in"],
                    "systems.mem.samza.factory": "memory",
                    "systems.mem.namespace": namespace,
                    "systems.mem.samza.msg.serde": "json",
                    "stores.counts.factory": "inmemory",
                    "stores.counts.key.serde": "string",
                    "stores.counts.msg.serde": "long",
                    "stores.counts.changelog": "mem.counts-log",
                    "stores.raw.factory": "inmemory",
                    "stores.raw.changelog": "mem.raw-log",
                }
            )
        )
    )
    broker = InMemoryBroker.for_namespace(namespace)
    request.addfinalizer(lambda: InMemoryBroker.drop_namespace(namespace))
    broker.create_stream("counts-log", 1)
    broker.append("counts-log", 0, b"member-1", LongSerde().to_bytes(131))
    broker.append("counts-log", 0, b"member-2", None)  # a delete
    broker.create_stream("raw-log", 1)
    broker.append("raw-log", 0, b"k", b"v")
    out = io.StringIO()
    asyncio.run(tail(config, find_stream(config, "counts-log"), Printer(out)))
    asyncio.run(tail(config, find_stream(config, "mem.raw-log"), Printer(out)))
    got = [(x["stream"], x["key"], x.get("value"), x.get("error")) for x in printed(out)]
    assert got == [
        ("mem.counts-log", "member-1", 131, None),
        ("mem.counts-log", "member-2", None, None),
        ("mem.raw-log", "k", "v", None),  # a store without serdes holds bytes
    ]
