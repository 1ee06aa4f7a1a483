"""One contract test class over every system adapter (see samzapy/system/ports.py).

Each adapter plugs in through a ``SystemHarness``: it builds the adapter's factory and writes
input records behind the adapter's back, the way an upstream job would. To add an adapter,
write a harness and add it to ``HARNESSES`` (embedded adapters, built from ``tmp_path``) or
``BROKER_HARNESSES`` (adapters of a real broker, built from ``tmp_path`` and the value of a
session fixture that provides the broker, such as ``kafka_bootstrap``); ``make_harness``
builds either. Tests take stream names from ``harness.stream(...)``: on a shared broker
every test gets topics of its own.

Harnesses declare their capabilities: the end-of-stream tests run only over the harnesses
whose partitions can end (``supports_bounded``); Kafka partitions never end.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord, raw_record
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.file.factory import FileSystemFactory
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.kafka.factory import KafkaSystemFactory
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemConsumer, SystemFactory

SYSTEM = "sys"


class SystemHarness(abc.ABC):
    """Builds one adapter and writes its input records directly."""

    #: Whether the adapter has bounded partitions that end with end-of-stream.
    supports_bounded = True

    @abc.abstractmethod
    def factory(self, *, bounded: bool) -> SystemFactory:
        """A factory whose partitions end (bounded) or wait for more records (unbounded)."""

    @abc.abstractmethod
    async def write(self, stream: str, partition: int, messages: Sequence[bytes]) -> None:
        """Append raw messages to a partition, as another writer would."""

    @abc.abstractmethod
    async def end(self, stream: str, partition: int) -> None:
        """Make a bounded partition end after what has been written."""

    def stream(self, name: str) -> str:
        """The name a test uses for its stream ``name`` (unique per test where it matters)."""
        return name

    async def create_stream(self, stream: str, partitions: int) -> None:
        admin = self.factory(bounded=False).get_admin()
        await admin.start()
        await admin.create_stream(stream, partitions)
        await admin.stop()

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Remove what the harness created."""


class MemoryHarness(SystemHarness):
    def __init__(self, tmp_path: Path) -> None:
        self.namespace = f"contract-{uuid.uuid4().hex}"
        self.broker = InMemoryBroker.for_namespace(self.namespace)

    def factory(self, *, bounded: bool) -> SystemFactory:
        return InMemorySystemFactory(
            SYSTEM, {"samza.factory": "memory", "namespace": self.namespace}
        )

    async def write(self, stream: str, partition: int, messages: Sequence[bytes]) -> None:
        for message in messages:
            self.broker.append(stream, partition, None, message)

    async def end(self, stream: str, partition: int) -> None:
        self.broker.end_partition(stream, partition)

    async def close(self) -> None:
        InMemoryBroker.drop_namespace(self.namespace)


def append_lines(path: Path, messages: Sequence[bytes]) -> None:
    with open(path, "ab") as file:
        file.writelines(message + b"\n" for message in messages)


class FileHarness(SystemHarness):
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "streams"

    def factory(self, *, bounded: bool) -> SystemFactory:
        config = {
            "samza.factory": "file",
            "path": str(self.root),
            "follow": not bounded,
            "poll.interval.ms": 5,
        }
        return FileSystemFactory(SYSTEM, config)

    async def write(self, stream: str, partition: int, messages: Sequence[bytes]) -> None:
        append_lines(self.root / stream / f"{partition}.jsonl", messages)

    async def end(self, stream: str, partition: int) -> None:
        """A bounded file partition ends at the end of the file."""


class KafkaHarness(SystemHarness):
    """The kafka system over the session's broker; topics carry a suffix unique to the test."""

    supports_bounded = False

    def __init__(self, tmp_path: Path, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.suffix = uuid.uuid4().hex[:10]
        self._writer: Any = None

    def factory(self, *, bounded: bool) -> SystemFactory:
        # Kafka partitions never end: ``bounded`` has no meaning here.
        return KafkaSystemFactory(
            SYSTEM, {"samza.factory": "kafka", "bootstrap.servers": self.bootstrap}
        )

    def stream(self, name: str) -> str:
        return f"contract-{name}-{self.suffix}"

    async def write(self, stream: str, partition: int, messages: Sequence[bytes]) -> None:
        if self._writer is None:
            self._writer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
            await self._writer.start()
        for message in messages:
            await self._writer.send(stream, message, partition=partition)
        await self._writer.flush()

    async def end(self, stream: str, partition: int) -> None:
        raise AssertionError("Kafka partitions never end; bounded tests do not run on Kafka")

    async def close(self) -> None:
        if self._writer is not None:
            await self._writer.stop()


HARNESSES: dict[str, Callable[[Path], SystemHarness]] = {
    "memory": MemoryHarness,
    "file": FileHarness,
}
#: name -> (harness class, the session fixture whose value locates the broker)
BROKER_HARNESSES: dict[str, tuple[Callable[[Path, str], SystemHarness], str]] = {
    "kafka": (KafkaHarness, "kafka_bootstrap"),
}
ALL_HARNESSES = sorted(HARNESSES) + sorted(BROKER_HARNESSES)


def _supports_bounded(name: str) -> bool:
    harness_class = HARNESSES[name] if name in HARNESSES else BROKER_HARNESSES[name][0]
    return bool(harness_class.supports_bounded)


BOUNDED_HARNESSES = [name for name in ALL_HARNESSES if _supports_bounded(name)]


def make_harness(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> SystemHarness:
    """Build harness ``name``; a broker harness starts its broker (a session fixture) first."""
    if name in HARNESSES:
        return HARNESSES[name](tmp_path)
    build, broker_fixture = BROKER_HARNESSES[name]
    return build(tmp_path, request.getfixturevalue(broker_fixture))


@pytest.fixture(params=ALL_HARNESSES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SystemHarness]:
    built = make_harness(request.param, tmp_path, request)
    yield built
    await built.close()


@pytest.fixture(params=BOUNDED_HARNESSES)
async def bounded_harness(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SystemHarness]:
    built = make_harness(request.param, tmp_path, request)
    yield built
    await built.close()


@pytest.fixture
async def admin(harness: SystemHarness) -> AsyncIterator[SystemAdmin]:
    started = harness.factory(bounded=True).get_admin()
    await started.start()
    yield started
    await started.stop()


def ssp(stream: str, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(SYSTEM, stream, partition)


async def started_consumer(
    harness: SystemHarness,
    registrations: dict[SystemStreamPartition, str | None],
    *,
    bounded: bool,
    default: str = OffsetDefault.OLDEST,
) -> SystemConsumer:
    consumer = harness.factory(bounded=bounded).get_consumer()
    for partition, offset in registrations.items():
        consumer.register(partition, offset, default)
    await consumer.start()
    return consumer


async def read_all(
    consumer: SystemConsumer,
    ssps: Sequence[SystemStreamPartition],
    *,
    count: int,
    max_messages: int = 100,
) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
    """Poll until ``count`` envelopes (end-of-stream included) arrived, checking max_messages."""
    got: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {s: [] for s in ssps}
    total = 0
    for _ in range(1000):
        if total >= count:
            break
        batch = await consumer.poll(ssps, max_messages, 5.0)
        assert batch, f"poll returned nothing after {total} of {count} envelopes"
        for partition, envelopes in batch.items():
            assert partition in ssps
            assert 0 < len(envelopes) <= max_messages
            got[partition].extend(envelopes)
            total += len(envelopes)
    assert total == count
    return got


def offsets(envelopes: Sequence[IncomingMessageEnvelope]) -> list[str]:
    return [envelope.offset for envelope in envelopes]


def messages(envelopes: Sequence[IncomingMessageEnvelope]) -> list[object]:
    return [envelope.message for envelope in envelopes if not envelope.is_end_of_stream]


class TestSystemContract:
    async def test_partition_counts_leave_out_missing_streams(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        three, missing = harness.stream("three"), harness.stream("missing")
        await harness.create_stream(three, 3)
        assert await admin.partition_counts([three, missing]) == {three: 3}

    async def test_create_stream_leaves_an_existing_stream_alone(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        s = harness.stream("s")
        await harness.create_stream(s, 2)
        await harness.write(s, 1, [b"kept"])
        await admin.create_stream(s, 2)
        await admin.create_stream(s, 5)
        assert await admin.partition_counts([s]) == {s: 2}
        consumer = await started_consumer(harness, {ssp(s, 1): None}, bounded=False)
        got = await read_all(consumer, [ssp(s, 1)], count=1)
        assert messages(got[ssp(s, 1)]) == [b"kept"]
        await consumer.stop()

    async def test_offsets_compare_and_follow_each_other(self, harness: SystemHarness) -> None:
        admin = harness.factory(bounded=True).get_admin()
        assert admin.offset_after("9") == "10"
        assert admin.compare_offsets("9", "10") < 0
        assert admin.compare_offsets("10", "10") == 0
        assert admin.compare_offsets("11", "10") > 0

    async def test_reads_in_offset_order_from_oldest(self, harness: SystemHarness) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 2)
        await harness.write(s, 1, [b"a", b"b", b"c", b"d", b"e"])
        await harness.write(s, 0, [b"x"])
        consumer = await started_consumer(
            harness, {ssp(s, 0): None, ssp(s, 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp(s, 0), ssp(s, 1)], count=6)
        assert offsets(got[ssp(s, 1)]) == ["0", "1", "2", "3", "4"]
        assert messages(got[ssp(s, 1)]) == [b"a", b"b", b"c", b"d", b"e"]
        assert messages(got[ssp(s, 0)]) == [b"x"]
        assert all(e.system_stream_partition == ssp(s, 1) for e in got[ssp(s, 1)])
        await consumer.stop()

    async def test_starts_at_the_registered_offset(self, harness: SystemHarness) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        await harness.write(s, 0, [b"a", b"b", b"c", b"d"])
        consumer = await started_consumer(
            harness, {ssp(s, 0): "2"}, bounded=False, default=OffsetDefault.UPCOMING
        )
        got = await read_all(consumer, [ssp(s, 0)], count=2)
        assert offsets(got[ssp(s, 0)]) == ["2", "3"]
        assert messages(got[ssp(s, 0)]) == [b"c", b"d"]
        await consumer.stop()

    async def test_upcoming_skips_what_was_written_before_start(
        self, harness: SystemHarness
    ) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        await harness.write(s, 0, [b"old-0", b"old-1", b"old-2"])
        consumer = await started_consumer(
            harness, {ssp(s, 0): None}, bounded=False, default=OffsetDefault.UPCOMING
        )
        assert await consumer.poll([ssp(s, 0)], 10, 0) == {}
        await harness.write(s, 0, [b"new-3", b"new-4"])
        got = await read_all(consumer, [ssp(s, 0)], count=2)
        assert offsets(got[ssp(s, 0)]) == ["3", "4"]
        assert messages(got[ssp(s, 0)]) == [b"new-3", b"new-4"]
        await consumer.stop()

    async def test_bounded_partition_ends_once_after_its_last_message(
        self, bounded_harness: SystemHarness
    ) -> None:
        harness = bounded_harness
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        await harness.write(s, 0, [b"a", b"b", b"c"])
        await harness.end(s, 0)
        consumer = await started_consumer(harness, {ssp(s, 0): None}, bounded=True)
        got = (await read_all(consumer, [ssp(s, 0)], count=4))[ssp(s, 0)]
        assert messages(got) == [b"a", b"b", b"c"]
        assert [e.is_end_of_stream for e in got] == [False, False, False, True]
        assert await consumer.poll([ssp(s, 0)], 10, 0) == {}
        assert await consumer.poll([ssp(s, 0)], 10, 0.01) == {}
        await consumer.stop()

    async def test_end_of_stream_counts_towards_max_messages(
        self, bounded_harness: SystemHarness
    ) -> None:
        harness = bounded_harness
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        await harness.write(s, 0, [b"a", b"b"])
        await harness.end(s, 0)
        consumer = await started_consumer(harness, {ssp(s, 0): None}, bounded=True)
        first = await consumer.poll([ssp(s, 0)], 2, 1.0)
        assert messages(first[ssp(s, 0)]) == [b"a", b"b"]
        assert not any(e.is_end_of_stream for e in first[ssp(s, 0)])
        second = await consumer.poll([ssp(s, 0)], 2, 1.0)
        assert [e.is_end_of_stream for e in second[ssp(s, 0)]] == [True]
        await consumer.stop()

    async def test_empty_bounded_partition_only_ends(self, bounded_harness: SystemHarness) -> None:
        harness = bounded_harness
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        await harness.end(s, 0)
        consumer = await started_consumer(harness, {ssp(s, 0): None}, bounded=True)
        batch = await consumer.poll([ssp(s, 0)], 10, 1.0)
        assert [e.is_end_of_stream for e in batch[ssp(s, 0)]] == [True]
        await consumer.stop()

    async def test_poll_returns_at_most_max_messages_per_partition(
        self, harness: SystemHarness
    ) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 2)
        await harness.write(s, 0, [f"p0-{i}".encode() for i in range(10)])
        await harness.write(s, 1, [f"p1-{i}".encode() for i in range(7)])
        consumer = await started_consumer(
            harness, {ssp(s, 0): None, ssp(s, 1): None}, bounded=False
        )
        first = await consumer.poll([ssp(s, 0), ssp(s, 1)], 3, 1.0)
        assert first and all(len(envelopes) <= 3 for envelopes in first.values())
        rest = await read_all(
            consumer,
            [ssp(s, 0), ssp(s, 1)],
            count=17 - sum(len(v) for v in first.values()),
            max_messages=3,
        )
        for partition, total in ((0, 10), (1, 7)):
            envelopes = [*first.get(ssp(s, partition), []), *rest[ssp(s, partition)]]
            assert offsets(envelopes) == [str(i) for i in range(total)]
        await consumer.stop()

    async def test_poll_only_returns_the_partitions_asked_for(self, harness: SystemHarness) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 2)
        await harness.write(s, 0, [b"zero"])
        await harness.write(s, 1, [b"one"])
        consumer = await started_consumer(
            harness, {ssp(s, 0): None, ssp(s, 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp(s, 1)], count=1)
        assert messages(got[ssp(s, 1)]) == [b"one"]
        got = await read_all(consumer, [ssp(s, 0)], count=1)
        assert messages(got[ssp(s, 0)]) == [b"zero"]
        await consumer.stop()

    async def test_poll_times_out_empty_when_nothing_arrives(self, harness: SystemHarness) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        consumer = await started_consumer(harness, {ssp(s, 0): None}, bounded=False)
        assert await consumer.poll([ssp(s, 0)], 10, 0) == {}
        assert await consumer.poll([ssp(s, 0)], 10, 0.02) == {}
        await consumer.stop()

    async def test_waiting_poll_returns_what_is_appended(self, harness: SystemHarness) -> None:
        s = harness.stream("in")
        await harness.create_stream(s, 1)
        consumer = await started_consumer(harness, {ssp(s, 0): None}, bounded=False)
        waiting = asyncio.create_task(consumer.poll([ssp(s, 0)], 10, 30.0))
        await asyncio.sleep(0)  # let the poll find nothing and start waiting
        assert not waiting.done()
        await harness.write(s, 0, [b"late"])
        batch = await waiting
        assert messages(batch[ssp(s, 0)]) == [b"late"]
        assert offsets(batch[ssp(s, 0)]) == ["0"]
        await consumer.stop()

    async def test_producer_output_reads_back_in_order(self, harness: SystemHarness) -> None:
        s = harness.stream("out")
        await harness.create_stream(s, 2)
        producer = harness.factory(bounded=True).get_producer()
        await producer.start()
        stream = SystemStream(SYSTEM, s)
        producer.send(stream, 1, None, b"one-a")
        producer.send(stream, 0, None, b"zero-a")
        producer.send(stream, 1, None, b"one-b")
        producer.send(stream, None, None, b"anywhere")  # the producer picks its partition
        producer.send(stream, 0, None, b"zero-b")
        await producer.flush()
        await producer.stop()
        consumer = await started_consumer(
            harness, {ssp(s, 0): None, ssp(s, 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp(s, 0), ssp(s, 1)], count=5)
        zero, one = messages(got[ssp(s, 0)]), messages(got[ssp(s, 1)])
        assert [m for m in zero if m != b"anywhere"] == [b"zero-a", b"zero-b"]
        assert [m for m in one if m != b"anywhere"] == [b"one-a", b"one-b"]
        assert (zero + one).count(b"anywhere") == 1
        for partition in (0, 1):
            assert offsets(got[ssp(s, partition)]) == [
                str(i) for i in range(len(got[ssp(s, partition)]))
            ]
        await consumer.stop()

    async def test_producer_rejects_a_partition_out_of_range(self, harness: SystemHarness) -> None:
        s = harness.stream("out")
        await harness.create_stream(s, 2)
        producer = harness.factory(bounded=True).get_producer()
        await producer.start()
        with pytest.raises(StreamSystemError, match=r"partition 2 .*out"):
            producer.send(SystemStream(SYSTEM, s), 2, None, b"x")
            await producer.flush()
        await producer.stop()

    async def test_headers_sent_read_back_with_the_record_as_read(
        self, harness: SystemHarness
    ) -> None:
        """A dead letter's headers (task.dead.letter.stream): sent with ``send_with_headers``,
        read back in ``raw`` by a consumer asked to ``keep_raw``; a system without headers
        refuses them at once."""
        s = harness.stream("letters")
        await harness.create_stream(s, 1)
        producer = harness.factory(bounded=True).get_producer()
        await producer.start()
        stream = SystemStream(SYSTEM, s)
        headers = [("samzapy.error", b"bad"), ("trace", b"\x00\xff")]
        if isinstance(harness, FileHarness):
            with pytest.raises(StreamSystemError, match="does not keep record headers"):
                producer.send_with_headers(stream, 0, b"k", b"v", headers)
            await producer.stop()
            return
        producer.send_with_headers(stream, 0, b"k", b"v", headers)
        producer.send(stream, 0, b"k2", b"w")
        await producer.flush()
        await producer.stop()
        consumer = harness.factory(bounded=False).get_consumer()
        consumer.keep_raw()
        consumer.register(ssp(s, 0), None, OffsetDefault.OLDEST)
        await consumer.start()
        got = (await read_all(consumer, [ssp(s, 0)], count=2))[ssp(s, 0)]
        assert [raw_record(e) for e in got] == [
            RawRecord(b"k", b"v", tuple(headers)),
            RawRecord(b"k2", b"w", ()),
        ]
        await consumer.stop()
