"""The file system's own behaviour: layout, line handling, follow mode, producer errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import ConfigError, SerdeError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.file import FileSystemFactory
from samzapy.system.file.consumer import CHUNK_SIZE
from samzapy.system.file.layout import partition_count
from samzapy.system.file.producer import LINGER_S, FileSystemProducer
from samzapy.system.ports import OffsetDefault, SystemConsumer

SSP = SystemStreamPartition("files", "in", 0)


def write(path: Path, data: bytes, mode: str = "ab") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as file:
        file.write(data)


def read(path: Path) -> bytes:
    return path.read_bytes()


def names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def factory(root: Path, **config: object) -> FileSystemFactory:
    return FileSystemFactory("files", {"samza.factory": "file", "path": str(root), **config})


FOLLOW: dict[str, object] = {"follow": True, "poll.interval.ms": 1}


async def consumer_for(
    root: Path,
    offset: str | None = None,
    default: str = OffsetDefault.OLDEST,
    config: dict[str, object] | None = None,
) -> SystemConsumer:
    consumer = factory(root, **(config or {})).get_consumer()
    consumer.register(SSP, offset, default)
    await consumer.start()
    return consumer


async def drain(
    consumer: SystemConsumer, max_messages: int = 1000
) -> list[IncomingMessageEnvelope]:
    """Everything up to and including end-of-stream (bounded mode)."""
    out: list[IncomingMessageEnvelope] = []
    while not out or not out[-1].is_end_of_stream:
        batch = await consumer.poll([SSP], max_messages, 1.0)
        assert batch, "a bounded partition must not stall"
        out.extend(batch[SSP])
    return out


def lines_of(envelopes: list[IncomingMessageEnvelope]) -> list[tuple[str, bytes]]:
    return [(e.offset, e.message) for e in envelopes if not e.is_end_of_stream]


class TestLayout:
    def test_partition_files_must_not_have_a_gap(self, tmp_path: Path) -> None:
        for name in ("0.jsonl", "2.jsonl", "3.jsonl"):
            write(tmp_path / "in" / name, b"")
        with pytest.raises(
            StreamSystemError,
            match=r"in has a gap .*expected 0\.jsonl\.\.3\.jsonl, missing 1\.jsonl",
        ):
            partition_count(tmp_path, "in")

    def test_other_files_are_ignored_and_empty_directories_do_not_count(
        self, tmp_path: Path
    ) -> None:
        for name in ("0.jsonl", "1.jsonl", "01.jsonl", "notes.txt", ".0.jsonl.swp"):
            write(tmp_path / "in" / name, b"")
        (tmp_path / "empty").mkdir()
        assert partition_count(tmp_path, "in") == 2
        assert partition_count(tmp_path, "empty") is None
        assert partition_count(tmp_path, "missing") is None

    async def test_admin_creates_the_directory_and_files(self, tmp_path: Path) -> None:
        admin = factory(tmp_path / "root").get_admin()
        await admin.create_stream("out", 3)
        assert names(tmp_path / "root" / "out") == ["0.jsonl", "1.jsonl", "2.jsonl"]
        assert await admin.partition_counts(["out", "none"]) == {"out": 3}

    @pytest.mark.parametrize("stream", ["a/b", "..", ""])
    async def test_stream_names_must_be_one_path_component(
        self, tmp_path: Path, stream: str
    ) -> None:
        with pytest.raises(StreamSystemError, match="is not usable as a directory name"):
            await factory(tmp_path).get_admin().partition_counts([stream])

    async def test_a_file_in_place_of_the_stream_directory(self, tmp_path: Path) -> None:
        write(tmp_path / "in", b"")
        with pytest.raises(StreamSystemError, match="is a file, expected a directory"):
            await factory(tmp_path).get_admin().partition_counts(["in"])


class TestBoundedConsumer:
    async def test_unterminated_last_line_counts_and_empty_lines_are_skipped(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path / "in" / "0.jsonl", b'{"a":1}\n\n"b"\n\n{"c":3}')
        consumer = await consumer_for(tmp_path)
        got = await drain(consumer)
        assert lines_of(got) == [("0", b'{"a":1}'), ("2", b'"b"'), ("4", b'{"c":3}')]
        assert all(e.key is None and e.timestamp is None for e in got)
        assert got[0].size == len(b'{"a":1}')
        await consumer.stop()

    async def test_missing_file_is_an_error(self, tmp_path: Path) -> None:
        consumer = factory(tmp_path).get_consumer()
        consumer.register(SSP, None, OffsetDefault.OLDEST)
        with pytest.raises(
            StreamSystemError, match=r"files\.in#0: partition file .*0\.jsonl does not exist"
        ):
            await consumer.start()

    @pytest.mark.parametrize("offset", [1, 2, 3])
    async def test_offset_in_the_unterminated_tail(self, tmp_path: Path, offset: int) -> None:
        write(tmp_path / "in" / "0.jsonl", b"a\nb")
        consumer = await consumer_for(tmp_path, str(offset))
        assert lines_of(await drain(consumer)) == [("1", b"b")][offset - 1 :]
        await consumer.stop()

    async def test_upcoming_counts_the_unterminated_line(self, tmp_path: Path) -> None:
        write(tmp_path / "in" / "0.jsonl", b"a\nb")
        consumer = await consumer_for(tmp_path, None, OffsetDefault.UPCOMING)
        assert [e.is_end_of_stream for e in await drain(consumer)] == [True]
        await consumer.stop()

    async def test_start_deep_in_a_big_file(self, tmp_path: Path) -> None:
        count = 200_000  # several chunks
        data = b"".join(b'{"n":%d}\n' % i for i in range(count))
        assert len(data) > 3 * CHUNK_SIZE
        write(tmp_path / "in" / "0.jsonl", data)
        consumer = await consumer_for(tmp_path, "150000")
        first = await consumer.poll([SSP], 2, 1.0)
        assert lines_of(first[SSP]) == [("150000", b'{"n":150000}'), ("150001", b'{"n":150001}')]
        rest = lines_of(await drain(consumer, max_messages=7919))
        assert len(rest) == count - 150_002
        assert rest[-1] == (str(count - 1), b'{"n":%d}' % (count - 1))
        assert [int(offset) for offset, _ in rest] == list(range(150_002, count))
        await consumer.stop()

    async def test_long_lines_across_chunks(self, tmp_path: Path) -> None:
        long_line = b"x" * (CHUNK_SIZE * 2 + 17)
        write(tmp_path / "in" / "0.jsonl", b"short\n" + long_line + b"\nend\n")
        consumer = await consumer_for(tmp_path, "1")
        assert lines_of(await drain(consumer)) == [("1", long_line), ("2", b"end")]
        await consumer.stop()

    @pytest.mark.parametrize("offset", ["-1", "x"])
    async def test_bad_offsets(self, tmp_path: Path, offset: str) -> None:
        consumer = factory(tmp_path).get_consumer()
        with pytest.raises(StreamSystemError, match="file offsets are line numbers >= 0"):
            consumer.register(SSP, offset, OffsetDefault.OLDEST)

    @pytest.mark.parametrize(
        ("offset", "default", "start"),
        [(None, "oldest", 0), ("3", "oldest", 3), (None, "upcoming", 10)],
    )
    async def test_the_lag_counts_the_lines_read_and_not_processed(
        self, tmp_path: Path, offset: str | None, default: str, start: int
    ) -> None:
        """The high watermark is what the consumer has read of the file (a chunk at a time),
        the start offset where it began: a job that has taken lines and not processed them
        has a lag (it was always 0 on file inputs)."""
        write(tmp_path / "in" / "0.jsonl", b"".join(b"%d\n" % i for i in range(10)))
        consumer = await consumer_for(tmp_path, offset, default)
        assert consumer.start_offset(SSP) == start
        taken = (await consumer.poll([SSP], 2, 1.0)).get(SSP, [])
        expected_high = 10  # the whole (small) file is one chunk
        assert consumer.high_watermark(SSP) == expected_high
        assert [e.offset for e in taken if not e.is_end_of_stream] == [
            str(i) for i in range(start, min(start + 2, 10))
        ]
        await consumer.stop()


class TestFollowingConsumer:
    async def test_partial_line_waits_for_its_newline(self, tmp_path: Path) -> None:
        path = tmp_path / "in" / "0.jsonl"
        write(path, b'{"a":1}\n{"b":')
        consumer = await consumer_for(tmp_path, config=FOLLOW)
        first = await consumer.poll([SSP], 10, 1.0)
        assert lines_of(first[SSP]) == [("0", b'{"a":1}')]
        assert await consumer.poll([SSP], 10, 0.01) == {}
        write(path, b"2}\n")
        second = await consumer.poll([SSP], 10, 5.0)
        assert lines_of(second[SSP]) == [("1", b'{"b":2}')]
        assert not any(e.is_end_of_stream for e in second[SSP])
        await consumer.stop()

    async def test_upcoming_keeps_a_partial_line(self, tmp_path: Path) -> None:
        path = tmp_path / "in" / "0.jsonl"
        write(path, b"old\npart")
        consumer = await consumer_for(tmp_path, None, OffsetDefault.UPCOMING, config=FOLLOW)
        write(path, b"ial\nnew\n")
        batch = await consumer.poll([SSP], 10, 5.0)
        assert lines_of(batch[SSP]) == [("1", b"partial"), ("2", b"new")]
        await consumer.stop()

    async def test_a_file_that_appears_later(self, tmp_path: Path) -> None:
        consumer = await consumer_for(tmp_path, "1", config=FOLLOW)
        assert await consumer.poll([SSP], 10, 0.01) == {}
        write(tmp_path / "in" / "0.jsonl", b"skipped\n")
        assert await consumer.poll([SSP], 10, 0.01) == {}
        write(tmp_path / "in" / "0.jsonl", b"read\n")
        batch = await consumer.poll([SSP], 10, 5.0)
        assert lines_of(batch[SSP]) == [("1", b"read")]
        await consumer.stop()

    async def test_the_position_passes_the_empty_lines_it_skipped(self, tmp_path: Path) -> None:
        # A reader waiting for an offset (a bootstrap head) learns that the empty lines
        # before it, which are never delivered, have been read.
        path = tmp_path / "in" / "0.jsonl"
        write(path, b"a\n\nb\n\n\n")
        consumer = await consumer_for(tmp_path, "1", config=FOLLOW)
        assert await consumer.position(SSP) == "1"
        batch = await consumer.poll([SSP], 10, 1.0)
        assert lines_of(batch[SSP]) == [("2", b"b")]
        assert await consumer.poll([SSP], 10, 0.01) == {}
        assert await consumer.position(SSP) == "5"
        write(path, b"c")  # a partial line is not read yet
        assert await consumer.poll([SSP], 10, 0.01) == {}
        assert await consumer.position(SSP) == "5"
        await consumer.stop()


class TestProducer:
    async def test_first_send_creates_the_stream_without_gaps(self, tmp_path: Path) -> None:
        producer = factory(tmp_path).get_producer()
        producer.send(SystemStream("files", "out"), 2, "ignored key", b'{"v":1}')
        producer.send(SystemStream("files", "out"), 2, None, bytearray(b'{"v":2}'))
        await producer.flush()
        assert names(tmp_path / "out") == ["0.jsonl", "1.jsonl", "2.jsonl"]
        assert read(tmp_path / "out" / "2.jsonl") == b'{"v":1}\n{"v":2}\n'
        producer.send(SystemStream("files", "out"), 0, None, b"z")
        await producer.stop()
        assert read(tmp_path / "out" / "0.jsonl") == b"z\n"

    async def test_a_cut_last_line_gets_its_newline_before_the_next_line(
        self, tmp_path: Path
    ) -> None:
        """A writer killed mid-line left ``{"v":2`` at the end: the next producer ends that
        line, so the line it writes is not joined to it."""
        await factory(tmp_path).get_admin().create_stream("out", 2)
        write(tmp_path / "out" / "1.jsonl", b'{"v":1}\n{"v":2')
        write(tmp_path / "out" / "0.jsonl", b'{"v":1}\n')
        producer = factory(tmp_path).get_producer()
        with capture_logs() as logs:
            producer.send(SystemStream("files", "out"), 1, None, b'{"v":2}')
            producer.send(SystemStream("files", "out"), 0, None, b'{"v":2}')
            await producer.stop()
        assert read(tmp_path / "out" / "1.jsonl") == b'{"v":1}\n{"v":2\n{"v":2}\n'
        assert read(tmp_path / "out" / "0.jsonl") == b'{"v":1}\n{"v":2}\n'
        [ended] = logs
        assert ended["event"] == "partial_line_ended"
        assert (ended["stream"], ended["partition"], ended["partial_bytes"]) == ("out", 1, 6)
        assert ended["log_level"] == "warning"

    async def test_flush_makes_lines_visible(self, tmp_path: Path) -> None:
        producer = factory(tmp_path).get_producer()
        producer.send(SystemStream("files", "out"), None, None, b"a")
        assert read(tmp_path / "out" / "0.jsonl") == b""  # still buffered
        await producer.flush()
        assert read(tmp_path / "out" / "0.jsonl") == b"a\n"
        await producer.stop()

    async def test_sent_lines_reach_the_file_after_the_linger_without_a_flush(
        self, tmp_path: Path
    ) -> None:
        producer = FileSystemProducer(tmp_path, linger_s=0)
        producer.send(SystemStream("files", "out"), None, None, b"a")
        producer.send(SystemStream("files", "out"), None, None, b"b")
        assert read(tmp_path / "out" / "0.jsonl") == b""  # the write-out is scheduled
        for _ in range(3):
            await asyncio.sleep(0)  # let the loop run the zero-delay timer
        assert read(tmp_path / "out" / "0.jsonl") == b"a\nb\n"
        producer.send(SystemStream("files", "out"), None, None, b"c")  # schedules the next one
        for _ in range(3):
            await asyncio.sleep(0)
        assert read(tmp_path / "out" / "0.jsonl") == b"a\nb\nc\n"
        await producer.stop()

    def test_the_default_linger_keeps_tail_f_within_a_second(self) -> None:
        assert 0 < LINGER_S <= 1.0

    async def test_partition_beyond_an_existing_stream(self, tmp_path: Path) -> None:
        await factory(tmp_path).get_admin().create_stream("out", 2)
        producer = factory(tmp_path).get_producer()
        with pytest.raises(StreamSystemError, match=r"partition 2 is out of range .*'out'.*0\.\.1"):
            producer.send(SystemStream("files", "out"), 2, None, b"x")

    async def test_newline_in_a_message(self, tmp_path: Path) -> None:
        producer = factory(tmp_path).get_producer()
        with pytest.raises(SerdeError, match=r"files\.out: a message must not contain a newline"):
            producer.send(SystemStream("files", "out"), 0, None, b"a\nb")
        await producer.stop()

    async def test_message_must_be_bytes(self, tmp_path: Path) -> None:
        producer = factory(tmp_path).get_producer()
        with pytest.raises(SerdeError, match=r"files\.out: messages must be bytes, got dict"):
            producer.send(SystemStream("files", "out"), 0, None, {"not": "serialized"})
        await producer.stop()

    async def test_following_consumer_sees_flushed_lines(self, tmp_path: Path) -> None:
        # A following consumer picks up a producer's line once it is flushed.
        producer = factory(tmp_path).get_producer()
        await factory(tmp_path).get_admin().create_stream("in", 1)
        consumer = await consumer_for(tmp_path, config=FOLLOW)
        waiting = asyncio.create_task(consumer.poll([SSP], 10, 30.0))
        await asyncio.sleep(0)
        producer.send(SystemStream("files", "in"), 0, None, b'"hello"')
        await producer.flush()
        batch = await waiting
        assert lines_of(batch[SSP]) == [("0", b'"hello"')]
        await producer.stop()
        await consumer.stop()


class TestFactoryConfig:
    def test_defaults(self, tmp_path: Path) -> None:
        built = factory(tmp_path)
        assert built.root == tmp_path
        assert built.follow is False
        assert built.poll_interval_ms == 200
        assert built.default_msg_serde == "json"
        assert built.default_offset == OffsetDefault.OLDEST

    def test_string_values_are_accepted(self, tmp_path: Path) -> None:
        built = factory(tmp_path, follow="True", **{"poll.interval.ms": "50"})
        assert built.follow is True
        assert built.poll_interval_ms == 50

    @pytest.mark.parametrize(
        ("config", "message"),
        [
            ({"path": None}, r"systems\.files\.path must be set"),
            (
                {"follow": "sometimes"},
                r"systems\.files\.follow must be true or false, got 'sometimes'",
            ),
            ({"poll.interval.ms": 0}, r"systems\.files\.poll\.interval\.ms must be an integer"),
            (
                {"poll.interval.ms": "5s"},
                r"poll\.interval\.ms must be an integer number of ms >= 1, got '5s'",
            ),
        ],
    )
    def test_bad_config(self, tmp_path: Path, config: dict[str, object], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            factory(tmp_path, **config)
