"""One contract test class over every system adapter (see samzapy/system/ports.py).

Each adapter plugs in through a ``SystemHarness``: it builds the adapter's factory and writes
input records behind the adapter's back, the way an upstream job would. To add an adapter,
write a harness and add it to ``HARNESSES``.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.file.factory import FileSystemFactory
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import OffsetDefault, SystemConsumer, SystemFactory

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


HARNESSES: dict[str, Callable[[Path], SystemHarness]] = {
    "memory": MemoryHarness,
    "file": FileHarness,
}


@pytest.fixture(params=sorted(HARNESSES))
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SystemHarness]:
    built = HARNESSES[request.param](tmp_path)
    yield built
    await built.close()


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
    async def test_partition_counts_leave_out_missing_streams(self, harness: SystemHarness) -> None:
        await harness.create_stream("three", 3)
        admin = harness.factory(bounded=True).get_admin()
        assert await admin.partition_counts(["three", "missing"]) == {"three": 3}

    async def test_create_stream_leaves_an_existing_stream_alone(
        self, harness: SystemHarness
    ) -> None:
        await harness.create_stream("s", 2)
        await harness.write("s", 1, [b"kept"])
        admin = harness.factory(bounded=True).get_admin()
        await admin.create_stream("s", 2)
        await admin.create_stream("s", 5)
        assert await admin.partition_counts(["s"]) == {"s": 2}
        consumer = await started_consumer(harness, {ssp("s", 1): None}, bounded=False)
        got = await read_all(consumer, [ssp("s", 1)], count=1)
        assert messages(got[ssp("s", 1)]) == [b"kept"]
        await consumer.stop()

    async def test_offsets_compare_and_follow_each_other(self, harness: SystemHarness) -> None:
        admin = harness.factory(bounded=True).get_admin()
        assert admin.offset_after("9") == "10"
        assert admin.compare_offsets("9", "10") < 0
        assert admin.compare_offsets("10", "10") == 0
        assert admin.compare_offsets("11", "10") > 0

    async def test_reads_in_offset_order_from_oldest(self, harness: SystemHarness) -> None:
        await harness.create_stream("in", 2)
        await harness.write("in", 1, [b"a", b"b", b"c", b"d", b"e"])
        await harness.write("in", 0, [b"x"])
        consumer = await started_consumer(
            harness, {ssp("in", 0): None, ssp("in", 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp("in", 0), ssp("in", 1)], count=6)
        assert offsets(got[ssp("in", 1)]) == ["0", "1", "2", "3", "4"]
        assert messages(got[ssp("in", 1)]) == [b"a", b"b", b"c", b"d", b"e"]
        assert messages(got[ssp("in", 0)]) == [b"x"]
        assert all(e.system_stream_partition == ssp("in", 1) for e in got[ssp("in", 1)])
        await consumer.stop()

    async def test_starts_at_the_registered_offset(self, harness: SystemHarness) -> None:
        await harness.create_stream("in", 1)
        await harness.write("in", 0, [b"a", b"b", b"c", b"d"])
        consumer = await started_consumer(
            harness, {ssp("in", 0): "2"}, bounded=False, default=OffsetDefault.UPCOMING
        )
        got = await read_all(consumer, [ssp("in", 0)], count=2)
        assert offsets(got[ssp("in", 0)]) == ["2", "3"]
        assert messages(got[ssp("in", 0)]) == [b"c", b"d"]
        await consumer.stop()

    async def test_upcoming_skips_what_was_written_before_start(
        self, harness: SystemHarness
    ) -> None:
        await harness.create_stream("in", 1)
        await harness.write("in", 0, [b"old-0", b"old-1", b"old-2"])
        consumer = await started_consumer(
            harness, {ssp("in", 0): None}, bounded=False, default=OffsetDefault.UPCOMING
        )
        assert await consumer.poll([ssp("in", 0)], 10, 0) == {}
        await harness.write("in", 0, [b"new-3", b"new-4"])
        got = await read_all(consumer, [ssp("in", 0)], count=2)
        assert offsets(got[ssp("in", 0)]) == ["3", "4"]
        assert messages(got[ssp("in", 0)]) == [b"new-3", b"new-4"]
        await consumer.stop()

    async def test_bounded_partition_ends_once_after_its_last_message(
        self, harness: SystemHarness
    ) -> None:
        if not harness.supports_bounded:
            pytest.skip("the adapter has no bounded partitions")
        await harness.create_stream("in", 1)
        await harness.write("in", 0, [b"a", b"b", b"c"])
        await harness.end("in", 0)
        consumer = await started_consumer(harness, {ssp("in", 0): None}, bounded=True)
        got = (await read_all(consumer, [ssp("in", 0)], count=4))[ssp("in", 0)]
        assert messages(got) == [b"a", b"b", b"c"]
        assert [e.is_end_of_stream for e in got] == [False, False, False, True]
        assert await consumer.poll([ssp("in", 0)], 10, 0) == {}
        assert await consumer.poll([ssp("in", 0)], 10, 0.01) == {}
        await consumer.stop()

    async def test_end_of_stream_counts_towards_max_messages(self, harness: SystemHarness) -> None:
        if not harness.supports_bounded:
            pytest.skip("the adapter has no bounded partitions")
        await harness.create_stream("in", 1)
        await harness.write("in", 0, [b"a", b"b"])
        await harness.end("in", 0)
        consumer = await started_consumer(harness, {ssp("in", 0): None}, bounded=True)
        first = await consumer.poll([ssp("in", 0)], 2, 1.0)
        assert messages(first[ssp("in", 0)]) == [b"a", b"b"]
        assert not any(e.is_end_of_stream for e in first[ssp("in", 0)])
        second = await consumer.poll([ssp("in", 0)], 2, 1.0)
        assert [e.is_end_of_stream for e in second[ssp("in", 0)]] == [True]
        await consumer.stop()

    async def test_empty_bounded_partition_only_ends(self, harness: SystemHarness) -> None:
        if not harness.supports_bounded:
            pytest.skip("the adapter has no bounded partitions")
        await harness.create_stream("in", 1)
        await harness.end("in", 0)
        consumer = await started_consumer(harness, {ssp("in", 0): None}, bounded=True)
        batch = await consumer.poll([ssp("in", 0)], 10, 1.0)
        assert [e.is_end_of_stream for e in batch[ssp("in", 0)]] == [True]
        await consumer.stop()

    async def test_poll_returns_at_most_max_messages_per_partition(
        self, harness: SystemHarness
    ) -> None:
        await harness.create_stream("in", 2)
        await harness.write("in", 0, [f"p0-{i}".encode() for i in range(10)])
        await harness.write("in", 1, [f"p1-{i}".encode() for i in range(7)])
        consumer = await started_consumer(
            harness, {ssp("in", 0): None, ssp("in", 1): None}, bounded=False
        )
        first = await consumer.poll([ssp("in", 0), ssp("in", 1)], 3, 1.0)
        assert first and all(len(envelopes) <= 3 for envelopes in first.values())
        rest = await read_all(
            consumer,
            [ssp("in", 0), ssp("in", 1)],
            count=17 - sum(len(v) for v in first.values()),
            max_messages=3,
        )
        for partition, total in ((0, 10), (1, 7)):
            envelopes = [*first.get(ssp("in", partition), []), *rest[ssp("in", partition)]]
            assert offsets(envelopes) == [str(i) for i in range(total)]
        await consumer.stop()

    async def test_poll_only_returns_the_partitions_asked_for(self, harness: SystemHarness) -> None:
        await harness.create_stream("in", 2)
        await harness.write("in", 0, [b"zero"])
        await harness.write("in", 1, [b"one"])
        consumer = await started_consumer(
            harness, {ssp("in", 0): None, ssp("in", 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp("in", 1)], count=1)
        assert messages(got[ssp("in", 1)]) == [b"one"]
        got = await read_all(consumer, [ssp("in", 0)], count=1)
        assert messages(got[ssp("in", 0)]) == [b"zero"]
        await consumer.stop()

    async def test_poll_times_out_empty_when_nothing_arrives(self, harness: SystemHarness) -> None:
        await harness.create_stream("in", 1)
        consumer = await started_consumer(harness, {ssp("in", 0): None}, bounded=False)
        assert await consumer.poll([ssp("in", 0)], 10, 0) == {}
        assert await consumer.poll([ssp("in", 0)], 10, 0.02) == {}
        await consumer.stop()

    async def test_waiting_poll_returns_what_is_appended(self, harness: SystemHarness) -> None:
        await harness.create_stream("in", 1)
        consumer = await started_consumer(harness, {ssp("in", 0): None}, bounded=False)
        waiting = asyncio.create_task(consumer.poll([ssp("in", 0)], 10, 30.0))
        await asyncio.sleep(0)  # let the poll find nothing and start waiting
        assert not waiting.done()
        await harness.write("in", 0, [b"late"])
        batch = await waiting
        assert messages(batch[ssp("in", 0)]) == [b"late"]
        assert offsets(batch[ssp("in", 0)]) == ["0"]
        await consumer.stop()

    async def test_producer_output_reads_back_in_order(self, harness: SystemHarness) -> None:
        await harness.create_stream("out", 2)
        producer = harness.factory(bounded=True).get_producer()
        await producer.start()
        stream = SystemStream(SYSTEM, "out")
        producer.send(stream, 1, None, b"one-a")
        producer.send(stream, 0, None, b"zero-a")
        producer.send(stream, 1, None, b"one-b")
        producer.send(stream, None, None, b"zero-b")
        await producer.flush()
        await producer.stop()
        consumer = await started_consumer(
            harness, {ssp("out", 0): None, ssp("out", 1): None}, bounded=False
        )
        got = await read_all(consumer, [ssp("out", 0), ssp("out", 1)], count=4)
        assert messages(got[ssp("out", 0)]) == [b"zero-a", b"zero-b"]
        assert messages(got[ssp("out", 1)]) == [b"one-a", b"one-b"]
        assert offsets(got[ssp("out", 1)]) == ["0", "1"]
        await consumer.stop()

    async def test_producer_rejects_a_partition_out_of_range(self, harness: SystemHarness) -> None:
        await harness.create_stream("out", 2)
        producer = harness.factory(bounded=True).get_producer()
        await producer.start()
        with pytest.raises(StreamSystemError, match=r"partition 2 .*out"):
            producer.send(SystemStream(SYSTEM, "out"), 2, None, b"x")
            await producer.flush()
