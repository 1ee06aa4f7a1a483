"""The in-memory broker, and the memory system's errors (the contract is tested elsewhere)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.inmemory import InMemoryBroker, InMemorySystemFactory
from samzapy.system.ports import OffsetDefault


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"unit-{uuid.uuid4().hex}"
    yield name
    InMemoryBroker.drop_namespace(name)


@pytest.fixture
def broker(namespace: str) -> InMemoryBroker:
    return InMemoryBroker.for_namespace(namespace)


class TestBroker:
    def test_namespaces_are_shared_by_name(self, namespace: str) -> None:
        broker = InMemoryBroker.for_namespace(namespace)
        assert InMemoryBroker.for_namespace(namespace) is broker
        assert InMemoryBroker.for_namespace(namespace + "-other") is not broker
        InMemoryBroker.drop_namespace(namespace + "-other")

    def test_drop_namespace_forgets_streams(self, namespace: str) -> None:
        InMemoryBroker.for_namespace(namespace).create_stream("s", 1)
        InMemoryBroker.drop_namespace(namespace)
        assert InMemoryBroker.for_namespace(namespace).partition_count("s") is None

    def test_append_returns_offsets_and_records_keep_order(self, broker: InMemoryBroker) -> None:
        broker.create_stream("s", 2)
        assert broker.append("s", 1, "k1", {"v": 1}) == "0"
        assert broker.append("s", 1, None, "two", timestamp=5) == "1"
        assert broker.records("s", 1) == [("k1", {"v": 1}), (None, "two")]
        assert broker.records("s", 0) == []

    def test_create_stream_is_idempotent_for_the_same_count(self, broker: InMemoryBroker) -> None:
        broker.create_stream("s", 3)
        broker.append("s", 0, None, "kept")
        broker.create_stream("s", 3)
        assert broker.partition_count("s") == 3
        assert broker.records("s", 0) == [(None, "kept")]

    def test_create_stream_with_another_count_is_an_error(self, broker: InMemoryBroker) -> None:
        broker.create_stream("s", 3)
        with pytest.raises(
            StreamSystemError, match="already exists with 3 partitions, cannot create it with 4"
        ):
            broker.create_stream("s", 4)

    @pytest.mark.parametrize("count", [0, -1, True, "2"])
    def test_partition_count_must_be_positive(self, broker: InMemoryBroker, count: object) -> None:
        with pytest.raises(StreamSystemError, match="needs a partition count >= 1"):
            broker.create_stream("s", count)  # type: ignore[arg-type]

    def test_append_to_a_missing_stream_names_it(self, broker: InMemoryBroker) -> None:
        broker.create_stream("other", 1)
        with pytest.raises(StreamSystemError, match=r"stream 'nope' does not exist .*\['other'\]"):
            broker.append("nope", 0, None, "x")

    @pytest.mark.parametrize("partition", [2, -1])
    def test_append_out_of_range(self, broker: InMemoryBroker, partition: int) -> None:
        broker.create_stream("s", 2)
        with pytest.raises(
            StreamSystemError, match=rf"partition {partition} is out of range .*0\.\.1"
        ):
            broker.append("s", partition, None, "x")

    def test_append_after_end_is_an_error(self, broker: InMemoryBroker) -> None:
        broker.create_stream("s", 2)
        broker.end_partition("s", 0)
        broker.append("s", 1, None, "still open")
        with pytest.raises(StreamSystemError, match=r"partition 0 of stream 's' .* has ended"):
            broker.append("s", 0, None, "x")

    def test_end_stream_ends_every_partition(self, broker: InMemoryBroker) -> None:
        broker.create_stream("s", 2)
        broker.end_stream("s")
        assert broker.partition("s", 0).ended and broker.partition("s", 1).ended
        with pytest.raises(StreamSystemError, match="does not exist"):
            broker.end_stream("missing")


class TestMemorySystem:
    def test_namespace_defaults_to_the_system_name(self, namespace: str) -> None:
        assert InMemorySystemFactory(namespace, {}).broker is InMemoryBroker.for_namespace(
            namespace
        )
        factory = InMemorySystemFactory("sys", {"namespace": namespace})
        assert factory.broker is InMemoryBroker.for_namespace(namespace)
        assert factory.default_offset == OffsetDefault.OLDEST
        assert factory.default_msg_serde == "none"

    def test_bad_namespace(self) -> None:
        with pytest.raises(
            ConfigError, match=r"systems\.sys\.namespace must be a non-empty string"
        ):
            InMemorySystemFactory("sys", {"namespace": ""})

    async def test_producer_to_a_missing_stream_is_an_error(self, namespace: str) -> None:
        producer = InMemorySystemFactory(namespace, {}).get_producer()
        with pytest.raises(StreamSystemError, match="stream 'out' does not exist"):
            producer.send(SystemStream(namespace, "out"), None, None, "x")

    async def test_consumer_rejects_bad_offsets(self, namespace: str) -> None:
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        ssp = SystemStreamPartition(namespace, "s", 0)
        with pytest.raises(
            StreamSystemError, match="offset 'abc': memory offsets are integers >= 0"
        ):
            consumer.register(ssp, "abc", OffsetDefault.OLDEST)
        with pytest.raises(
            StreamSystemError, match="default offset must be 'oldest' or 'upcoming'"
        ):
            consumer.register(ssp, None, "newest")

    async def test_consumer_start_needs_the_stream(self, namespace: str) -> None:
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        consumer.register(SystemStreamPartition(namespace, "s", 0), None, OffsetDefault.OLDEST)
        with pytest.raises(StreamSystemError, match="stream 's' does not exist"):
            await consumer.start()

    async def test_consumer_lifecycle_errors(self, broker: InMemoryBroker, namespace: str) -> None:
        broker.create_stream("s", 2)
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        consumer.register(SystemStreamPartition(namespace, "s", 0), None, OffsetDefault.OLDEST)
        await consumer.start()
        with pytest.raises(StreamSystemError, match="already started"):
            consumer.register(SystemStreamPartition(namespace, "s", 1), None, "oldest")
        with pytest.raises(StreamSystemError, match=r"cannot poll .*s#1: it was not registered"):
            await consumer.poll([SystemStreamPartition(namespace, "s", 1)], 10, 0)
        with pytest.raises(StreamSystemError, match="max_messages >= 1"):
            await consumer.poll([SystemStreamPartition(namespace, "s", 0)], 0, 0)

    async def test_end_wakes_a_waiting_poll(self, broker: InMemoryBroker, namespace: str) -> None:

        broker.create_stream("s", 1)
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        ssp = SystemStreamPartition(namespace, "s", 0)
        consumer.register(ssp, None, OffsetDefault.OLDEST)
        await consumer.start()
        waiting = asyncio.create_task(consumer.poll([ssp], 10, 30.0))
        await asyncio.sleep(0)
        broker.end_partition("s", 0)
        batch = await waiting
        assert [e.is_end_of_stream for e in batch[ssp]] == [True]

    async def test_cancelled_poll_leaves_no_waiter(
        self, broker: InMemoryBroker, namespace: str
    ) -> None:

        broker.create_stream("s", 1)
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        ssp = SystemStreamPartition(namespace, "s", 0)
        consumer.register(ssp, None, OffsetDefault.OLDEST)
        await consumer.start()
        waiting = asyncio.create_task(consumer.poll([ssp], 10, 30.0))
        await asyncio.sleep(0)
        assert broker._waiters
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert broker._waiters == []

    async def test_append_from_another_thread_wakes_a_waiting_poll(
        self, broker: InMemoryBroker, namespace: str
    ) -> None:
        broker.create_stream("s", 1)
        consumer = InMemorySystemFactory(namespace, {}).get_consumer()
        ssp = SystemStreamPartition(namespace, "s", 0)
        consumer.register(ssp, None, OffsetDefault.OLDEST)
        await consumer.start()
        waiting = asyncio.create_task(consumer.poll([ssp], 10, 30.0))
        await asyncio.sleep(0)
        await asyncio.to_thread(broker.append, "s", 0, None, "from a thread")
        batch = await waiting
        assert [e.message for e in batch[ssp]] == ["from a thread"]
