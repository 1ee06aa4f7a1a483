"""The kafka system against the real broker: offsets, retention, batching, partitioning, failures.

The behaviour every system shares is in tests/contract; these tests cover what only Kafka
does. Every test works on topics of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.records_to_delete import RecordsToDelete
from leases import SwitchedLease
from structlog.testing import capture_logs
from test_kafka_jobs import delete_topic

from samzapy.api.errors import SendFailedError, StreamSystemError, TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.entries import EntryBatch
from samzapy.system.kafka import (
    KafkaSystemAdmin,
    KafkaSystemConsumer,
    KafkaSystemFactory,
    KafkaSystemProducer,
    fetched,
)
from samzapy.system.ports import OffsetBounds, OffsetDefault
from samzapy.system.reader import read_entries

SYSTEM = "kafka"


def topic_name(base: str) -> str:
    return f"{base}-{uuid.uuid4().hex[:10]}"


def ssp(topic: str, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(SYSTEM, topic, partition)


def factory(bootstrap: str, **config: Any) -> KafkaSystemFactory:
    return KafkaSystemFactory(SYSTEM, {"bootstrap.servers": bootstrap, **config})


@pytest.fixture
async def admin(kafka_bootstrap: str) -> AsyncIterator[KafkaSystemAdmin]:
    started = KafkaSystemAdmin(factory(kafka_bootstrap).settings)
    await started.start()
    yield started
    await started.stop()


async def produce(bootstrap: str, topic: str, partition: int, messages: list[bytes]) -> None:
    producer = factory(bootstrap).get_producer()
    await producer.start()
    for message in messages:
        producer.send(SystemStream(SYSTEM, topic), partition, None, message)
    await producer.stop()


async def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    """What retention does: the partition's records before ``offset`` are gone."""
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await client.start()
    try:
        low = await client.delete_records(
            {TopicPartition(topic, partition): RecordsToDelete(before_offset=offset)}
        )
        assert low == {TopicPartition(topic, partition): offset}
    finally:
        await client.close()


async def read(
    consumer: KafkaSystemConsumer, ssps: list[SystemStreamPartition], count: int
) -> dict[SystemStreamPartition, list[tuple[str, Any, Any]]]:
    got: dict[SystemStreamPartition, list[tuple[str, Any, Any]]] = {s: [] for s in ssps}
    total = 0
    while total < count:
        batch = await consumer.poll(ssps, 10_000, 5.0)
        assert batch, f"nothing arrived after {total} of {count} messages"
        for partition, envelopes in batch.items():
            got[partition].extend((e.offset, e.key, e.message) for e in envelopes)
            total += len(envelopes)
    assert total == count
    return got


class TestOffsetBounds:
    async def test_bounds_follow_writes_and_deletions(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("bounds")
        await admin.create_stream(topic, 2)
        await produce(kafka_bootstrap, topic, 1, [b"m%d" % i for i in range(10)])
        assert await admin.offset_bounds([ssp(topic, 0), ssp(topic, 1)]) == {
            ssp(topic, 0): OffsetBounds(None, "0"),
            ssp(topic, 1): OffsetBounds("0", "10"),
        }
        await delete_before(kafka_bootstrap, topic, 1, 4)
        assert await admin.offset_bounds([ssp(topic, 1)]) == {
            ssp(topic, 1): OffsetBounds("4", "10")
        }
        await delete_before(kafka_bootstrap, topic, 1, 10)
        assert await admin.offset_bounds([ssp(topic, 1)]) == {
            ssp(topic, 1): OffsetBounds(None, "10")
        }

    async def test_a_new_clients_look_up_does_not_wait_for_unknown_metadata(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin, caplog: pytest.LogCaptureFixture
    ) -> None:
        # aiokafka looks up a partition its metadata does not cover after a retry backoff
        # (100 ms): at every start, for each new consumer. The admin has it covered first.
        topic = topic_name("fresh")
        await admin.create_stream(topic, 3)
        fresh = KafkaSystemAdmin(factory(kafka_bootstrap).settings)
        await fresh.start()
        try:
            with caplog.at_level(logging.DEBUG, logger="aiokafka.consumer.fetcher"):
                bounds = await fresh.offset_bounds([ssp(topic, p) for p in range(3)])
                await fresh.offsets_for_time([ssp(topic, 0)], 0)
        finally:
            await fresh.stop()
        assert bounds == {ssp(topic, p): OffsetBounds(None, "0") for p in range(3)}
        waits = [r.getMessage() for r in caplog.records if "wait for metadata" in r.getMessage()]
        assert waits == []

    async def test_a_missing_topic_or_partition_is_an_error_naming_it(
        self, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("absent")
        with pytest.raises(
            StreamSystemError, match=rf"kafka\.{topic}#0: Kafka topic '{topic}' does"
        ):
            await admin.offset_bounds([ssp(topic, 0)])
        await admin.create_stream(topic, 2)
        with pytest.raises(
            StreamSystemError, match=r"partition 2 is out of range for .*partitions 0\.\.1"
        ):
            await admin.offset_bounds([ssp(topic, 2)])

    async def test_create_stream_takes_replicas_and_topic_config(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        compacted, default = topic_name("compacted"), topic_name("default-replicas")
        await admin.create_stream(compacted, 1, config={"cleanup.policy": "compact"})
        await admin.create_stream(default, 3, replication_factor=-1)
        assert await admin.partition_counts([compacted, default]) == {compacted: 1, default: 3}
        with pytest.raises(
            StreamSystemError,
            match=r"cannot create Kafka topic 'three-replicas-.*' with 1 partitions and "
            r"replication factor 3: InvalidReplicationFactorError",
        ):
            await admin.create_stream(topic_name("three-replicas"), 1, replication_factor=3)


class TestUnavailableOffsets:
    async def test_an_offset_deleted_by_retention_starts_at_the_default(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("retention")
        await admin.create_stream(topic, 2)
        for partition in (0, 1):
            await produce(kafka_bootstrap, topic, partition, [b"m%d" % i for i in range(10)])
            await delete_before(kafka_bootstrap, topic, partition, 6)
        consumer = factory(kafka_bootstrap).get_consumer()
        consumer.register(ssp(topic, 0), "2", OffsetDefault.OLDEST)
        consumer.register(ssp(topic, 1), "2", OffsetDefault.UPCOMING)
        with capture_logs() as logs:
            await consumer.start()
        try:
            warnings = sorted(
                (e for e in logs if e["event"] == "checkpoint_offset_unavailable"),
                key=lambda e: str(e["ssp"]),
            )
            assert [{k: e[k] for k in ("ssp", "offset", "oldest", "upcoming", "resolution")}
                    for e in warnings] == [
                {"ssp": f"kafka.{topic}#0", "offset": "2", "oldest": "6", "upcoming": "10",
                 "resolution": "oldest"},
                {"ssp": f"kafka.{topic}#1", "offset": "2", "oldest": "6", "upcoming": "10",
                 "resolution": "upcoming"},
            ]  # fmt: skip
            assert all(e["log_level"] == "warning" for e in warnings)
            got = await read(consumer, [ssp(topic, 0)], 4)
            assert [offset for offset, _, _ in got[ssp(topic, 0)]] == ["6", "7", "8", "9"]
            await produce(kafka_bootstrap, topic, 1, [b"after"])
            got = await read(consumer, [ssp(topic, 1)], 1)
            assert got[ssp(topic, 1)] == [("10", None, b"after")]
        finally:
            await consumer.stop()

    async def test_an_offset_beyond_the_end_starts_at_the_default(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("recreated")
        await admin.create_stream(topic, 1)
        await produce(kafka_bootstrap, topic, 0, [b"a", b"b"])
        consumer = factory(kafka_bootstrap).get_consumer()
        consumer.register(ssp(topic, 0), "7", OffsetDefault.OLDEST)
        with capture_logs() as logs:
            await consumer.start()
        try:
            [warning] = [e for e in logs if e["event"] == "checkpoint_offset_unavailable"]
            assert (warning["offset"], warning["upcoming"], warning["resolution"]) == (
                "7",
                "2",
                "oldest",
            )
            got = await read(consumer, [ssp(topic, 0)], 2)
            assert [message for _, _, message in got[ssp(topic, 0)]] == [b"a", b"b"]
        finally:
            await consumer.stop()

    async def test_retention_overtaking_a_running_reader_resets_it(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("overtaken")
        await admin.create_stream(topic, 2)
        consumer = factory(kafka_bootstrap).get_consumer()
        consumer.register(ssp(topic, 0), "0", OffsetDefault.UPCOMING)
        consumer.register(ssp(topic, 1), None, OffsetDefault.UPCOMING)
        await consumer.start()
        try:
            # Pause partition 0, then see a message of partition 1 arrive: aiokafka has one
            # fetch in flight per broker, so none that includes partition 0 is left.
            assert await consumer.poll([ssp(topic, 1)], 10, 0) == {}
            await produce(kafka_bootstrap, topic, 1, [b"one"])
            assert (await read(consumer, [ssp(topic, 1)], 1))[ssp(topic, 1)][0][2] == b"one"
            await produce(kafka_bootstrap, topic, 0, [b"m%d" % i for i in range(5)])
            await delete_before(kafka_bootstrap, topic, 0, 5)
            with capture_logs() as logs:
                while not logs:
                    assert await consumer.poll([ssp(topic, 0)], 10, 1.0) == {}
            assert [
                {k: e[k] for k in ("event", "ssp", "offset", "oldest", "upcoming", "resolution")}
                for e in logs
            ] == [
                {
                    "event": "checkpoint_offset_unavailable",
                    "ssp": f"kafka.{topic}#0",
                    "offset": "0",
                    "oldest": None,
                    "upcoming": "5",
                    "resolution": "upcoming",
                }
            ]
            await produce(kafka_bootstrap, topic, 0, [b"after"])
            got = await read(consumer, [ssp(topic, 0)], 1)
            assert got[ssp(topic, 0)] == [("5", None, b"after")]
        finally:
            await consumer.stop()


class TestConsumer:
    async def test_the_high_watermark_is_known_before_the_first_fetch(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        # The lag metric reads it: before the first fetch it is the partition's end as read
        # at start, not unknown (which the lag shows as 0: caught up), then the fetches'.
        topic = topic_name("high")
        await admin.create_stream(topic, 2)
        await produce(kafka_bootstrap, topic, 0, [b"m%d" % i for i in range(7)])
        consumer = factory(kafka_bootstrap).get_consumer()
        consumer.register(ssp(topic, 0), None, OffsetDefault.OLDEST)
        consumer.register(ssp(topic, 1), None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            assert consumer.high_watermark(ssp(topic, 0)) == 7
            assert consumer.high_watermark(ssp(topic, 1)) == 0
            assert consumer.high_watermark(ssp(topic, 9)) is None  # not read here
            await produce(kafka_bootstrap, topic, 0, [b"later"])
            await read(consumer, [ssp(topic, 0)], 8)
            assert consumer.high_watermark(ssp(topic, 0)) == 8
        finally:
            await consumer.stop()

    async def test_envelopes_are_built_from_the_fetched_records_directly(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # aiokafka builds a ConsumerRecord per message; the consumer's fetcher builds the
        # envelope instead, one object per message (with the installed aiokafka).
        from aiokafka.consumer import fetcher

        built: list[Any] = []
        record_class = fetcher.ConsumerRecord
        monkeypatch.setattr(
            fetcher, "ConsumerRecord", lambda *a: built.append(a) or record_class(*a)
        )
        topic = topic_name("direct")
        await admin.create_stream(topic, 2)
        for p in range(2):
            await produce(kafka_bootstrap, topic, p, [b"m%d-%d" % (p, i) for i in range(500)])
        consumer = factory(kafka_bootstrap).get_consumer()
        ssps = [ssp(topic, p) for p in range(2)]
        for partition in ssps:
            consumer.register(partition, None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            got = await read(consumer, ssps, 1000)
            batch = await consumer.poll(ssps, 10, 0.0)
        finally:
            await consumer.stop()
        assert batch == {}
        for p in range(2):
            assert got[ssp(topic, p)] == [(str(i), None, b"m%d-%d" % (p, i)) for i in range(500)]
        assert built == [], "no ConsumerRecord was built"

    @pytest.mark.parametrize("fetcher_as_expected", [True, False], ids=["direct", "copied"])
    async def test_a_changelog_reader_gets_entries(
        self,
        kafka_bootstrap: str,
        admin: KafkaSystemAdmin,
        monkeypatch: pytest.MonkeyPatch,
        fetcher_as_expected: bool,
    ) -> None:
        """``read_entries``: keys, values (None: a delete) and offsets, read committed, cut
        at the end; built from the record batches, or copied from aiokafka's records when
        its fetcher's results are not as ``fetched.py`` expects."""
        if not fetcher_as_expected:
            monkeypatch.setattr(fetched, "_RECORDS_FIELDS", (*fetched._RECORDS_FIELDS, "_gone"))
        topic = topic_name("entries")
        await admin.create_stream(topic, 1)
        records = [(b"k%d" % (i % 7), None if i % 5 == 4 else b"v%d" % i) for i in range(300)]
        producer = factory(kafka_bootstrap).get_producer()
        await producer.start()
        for key, value in records:
            producer.send(SystemStream(SYSTEM, topic), 0, key, value)
        await producer.stop()
        kafka = factory(kafka_bootstrap)
        got: list[tuple[str, bytes, bytes | None]] = []
        async for batch in read_entries(kafka, kafka.get_admin(), ssp(topic, 0), "10", "250"):
            assert type(batch) is EntryBatch
            got += [(o, k, v) for o, (k, v) in zip(batch.offsets, batch.entries, strict=True)]
        assert got == [(str(i), *records[i]) for i in range(10, 250)]

    async def test_a_topic_deleted_while_read_fails_the_poll_naming_it(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """A deleted input is not a lost broker: the brokers answer, the topic is gone. The
        poll fails at the next idle-time check, naming the topic, not after
        ``connect.timeout.ms`` as "lost Kafka" (which sends the operator to the network)."""
        topic = topic_name("deleted")
        await admin.create_stream(topic, 2)
        await produce(kafka_bootstrap, topic, 0, [b"m0", b"m1"])
        consumer = factory(kafka_bootstrap, **{"connect.timeout.ms": 6000}).get_consumer()
        ssps = [ssp(topic, 0), ssp(topic, 1)]
        for partition in ssps:
            consumer.register(partition, None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            await read(consumer, ssps, 2)
            # Gone from the broker's metadata too: the deletion is applied there after the
            # call returns, and a write racing it could still be taken.
            await delete_topic(kafka_bootstrap, topic)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 5.5  # within connect.timeout.ms, which "lost Kafka" waits
            with pytest.raises(StreamSystemError) as failed:
                while loop.time() < deadline:
                    assert await consumer.poll(ssps, 10, 0.2) == {}
            assert str(failed.value) == (
                f"the Kafka consumer of system 'kafka' failed: UnknownTopicOrPartitionError: "
                f"Kafka topic {topic!r} no longer exists at {kafka_bootstrap} (deleted while "
                "it was read?): its partitions 0, 1 cannot be read"
            )
        finally:
            await consumer.stop()

    async def test_the_idle_probe_uses_the_topic_watch_s_check(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """The idle-time probe asks the brokers for the topics through the topic watch: its
        check in progress, or the last if it is less than an interval old, or one it runs
        (which counts as the watch's). Before, each probe made a metadata request of its
        own besides the watch's: an idle consumer checked its topics twice per interval."""
        topic = topic_name("idle")
        await admin.create_stream(topic, 1)
        await produce(kafka_bootstrap, topic, 0, [b"m0"])
        consumer = factory(kafka_bootstrap, **{"connect.timeout.ms": 30000}).get_consumer()
        consumer.register(ssp(topic, 0), None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            await read(consumer, [ssp(topic, 0)], 1)
            client = consumer._consumer._client  # type: ignore[attr-defined]
            asked: list[int] = []
            update = client.force_metadata_update

            def counted() -> Any:
                asked.append(1)
                return update()

            client.force_metadata_update = counted
            for _ in range(3):  # three probes within the interval (5 s): one check
                await consumer._probe()  # type: ignore[attr-defined]
            assert len(asked) == 1
            consumer._topics.check(asyncio.get_running_loop().time())  # type: ignore[attr-defined]
            assert len(asked) == 1  # nor is the watch's own due yet
        finally:
            await consumer.stop()

    async def test_a_codec_not_installed_fails_the_poll_saying_what_to_install(
        self, kafka_bootstrap: str
    ) -> None:
        """Java producers often compress with lz4, snappy or zstd (or the topic's
        ``compression.type`` does), whose codecs need the cramjam package, not installed
        with samzapy: the failure says so, not only that a library is missing."""
        topic = topic_name("zstd")
        client = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await client.start()
        try:
            await client.create_topics(
                [NewTopic(topic, 1, 1, topic_configs={"compression.type": "zstd"})]
            )
        finally:
            await client.close()
        await produce(kafka_bootstrap, topic, 0, [b"m0", b"m1"])  # the broker compresses
        consumer = factory(kafka_bootstrap).get_consumer()
        consumer.register(ssp(topic, 0), None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            with pytest.raises(
                StreamSystemError,
                match=rf"^cannot read kafka\.{topic}#0 from Kafka at {kafka_bootstrap}: "
                r"UnsupportedCodecError: Libraries for zstd compression codec not found \(the "
                r"records are compressed with zstd: pip install 'aiokafka\[zstd\]', which "
                r"installs the cramjam package\)$",
            ):
                await consumer.poll([ssp(topic, 0)], 10, 5.0)
        finally:
            await consumer.stop()


class TestProducer:
    async def test_50000_messages_over_8_partitions_keep_their_order(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("batching")
        await admin.create_stream(topic, 8)
        producer = factory(kafka_bootstrap).get_producer()
        assert isinstance(producer, KafkaSystemProducer)
        await producer.start()
        stream = SystemStream(SYSTEM, topic)
        sent: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(8)}
        for i in range(50_000):
            key, value = b"k%d" % (i % 97), b"value-%d-" % i + b"x" * (i % 50)
            producer.send(stream, i % 8, key, value)
            sent[i % 8].append((key, value))
        await producer.flush()
        assert producer.failed_sends == 0
        await producer.stop()

        consumer = factory(kafka_bootstrap).get_consumer()
        ssps = [ssp(topic, p) for p in range(8)]
        for partition in ssps:
            consumer.register(partition, None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            got = await read(consumer, ssps, 50_000)
        finally:
            await consumer.stop()
        for p in range(8):
            assert got[ssp(topic, p)] == [
                (str(offset), key, value) for offset, (key, value) in enumerate(sent[p])
            ]

    @staticmethod
    async def leased(
        bootstrap: str, admin: KafkaSystemAdmin, what: str
    ) -> tuple[KafkaSystemProducer, SwitchedLease, SystemStream]:
        """A started producer under a lease the test switches, and a new one-partition stream."""
        topic = topic_name(what)
        await admin.create_stream(topic, 1)
        producer = factory(bootstrap).get_producer()
        assert isinstance(producer, KafkaSystemProducer)
        lease = SwitchedLease()
        producer.fence_with(lease)
        await producer.start()
        return producer, lease, SystemStream(SYSTEM, topic)

    @staticmethod
    async def delivered(bootstrap: str, stream: SystemStream, count: int) -> list[bytes]:
        """The first ``count`` messages of ``stream``'s partition 0; none may follow."""
        consumer = factory(bootstrap).get_consumer()
        partition = ssp(stream.stream, 0)
        consumer.register(partition, None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            got = await read(consumer, [partition], count)
            assert not await consumer.poll([partition], 10, 1.0), "nothing after them"
            return [m for _, _, m in got[partition]]
        finally:
            await consumer.stop()

    async def test_a_producer_fenced_by_its_lease_gives_the_client_nothing_more(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """Once the container's lease breaks, no batch reaches the Kafka client, not even one
        handed over before but still waiting for its partition's sender; the flush that
        waits for it fails as fenced (a transaction must not commit without it)."""
        producer, lease, stream = await self.leased(kafka_bootstrap, admin, "fenced")
        producer.send(stream, 0, None, b"before")
        await producer.flush()
        producer.send(stream, 0, None, b"handed over, then the lease broke")
        flushed = asyncio.ensure_future(producer.flush())  # hands the batch over at once
        await asyncio.sleep(0)
        assert producer._queues, "queued for its sender, not yet given to the client"
        lease.break_()
        with pytest.raises(TaskFencedError, match="may have lost its tasks"):
            await flushed
        producer.send(stream, 0, None, b"after")
        with pytest.raises(TaskFencedError):
            await producer.flush()
        await producer._close()
        assert await self.delivered(kafka_bootstrap, stream, 1) == [b"before"]

    async def test_a_producer_under_a_held_lease_hands_over_once_it_resumes(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """While the lease is held a queued batch waits (the flush with it) and reaches the
        client once the lease resumes (the tasks are held back meanwhile by their router)."""
        producer, lease, stream = await self.leased(kafka_bootstrap, admin, "held")
        lease.hold()
        await self.held_until_resumed(kafka_bootstrap, producer, lease, stream, b"sent held")

    async def held_until_resumed(
        self,
        bootstrap: str,
        producer: KafkaSystemProducer,
        lease: SwitchedLease,
        stream: SystemStream,
        message: bytes,
    ) -> None:
        """``message``, sent under ``lease``, waits with its flush, not handed over to the
        client, until the lease resumes; then it is delivered."""
        producer.send(stream, 0, None, message)
        flushed = asyncio.ensure_future(producer.flush())
        await asyncio.sleep(0.5)
        assert not flushed.done() and producer._queues[(stream.stream, 0)], "handed over"
        lease.resume()
        await asyncio.wait_for(flushed, 10)
        await producer._close()
        assert await self.delivered(bootstrap, stream, 1) == [message]

    async def test_a_lease_held_during_a_metadata_look_up_is_checked_again(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """The first batch for a topic waits for its metadata: a lease held meanwhile keeps
        the batch from the client until it resumes."""
        producer, lease, stream = await self.leased(kafka_bootstrap, admin, "looked-up")
        checked = lease.valid

        def valid_then_held() -> bool:  # valid when checked, held by the time it is looked up
            ok = checked()
            lease.valid = checked  # type: ignore[method-assign]
            lease.hold()
            return ok

        lease.valid = valid_then_held  # type: ignore[method-assign]
        await self.held_until_resumed(kafka_bootstrap, producer, lease, stream, b"looked up")

    @staticmethod
    @contextlib.asynccontextmanager
    async def limited(
        bootstrap: str, admin: KafkaSystemAdmin, partitions: int
    ) -> AsyncIterator[tuple[KafkaSystemProducer, SystemStream]]:
        """A producer held back from four undelivered batches, and a new stream."""
        topic = topic_name("backpressure")
        await admin.create_stream(topic, partitions)
        producer = KafkaSystemProducer(factory(bootstrap).settings, max_unsettled_batches=4)
        await producer.start()
        try:
            yield producer, SystemStream(SYSTEM, topic)
            await producer.flush()
            assert producer.failed_sends == 0
        finally:
            await producer.stop()

    async def test_backpressure_holds_until_half_the_batches_are_delivered(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        async with self.limited(kafka_bootstrap, admin, 4) as (producer, stream):
            assert producer.backpressure() is None
            # ~1,500 messages of 100 bytes per partition fill several 16 KiB batches each,
            # handed over as they fill: more than the limit of four, before any is delivered.
            for i in range(6_000):
                producer.send(stream, i % 4, None, b"x" * 100)
            held = producer.backpressure()
            assert held is not None and not held.done()
            await asyncio.wait_for(held, 30)
            # Released once at most half the limit is still on its way.
            assert producer.backpressure() is None

    async def test_backpressure_leaves_two_batches_per_partition_written(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        async with self.limited(kafka_bootstrap, admin, 8) as (producer, stream):
            # 200 messages of 100 bytes per partition: one full 16 KiB batch each handed
            # over, eight in all, more than the limit of four but two per partition written.
            for i in range(1_600):
                producer.send(stream, i % 8, None, b"x" * 100)
            assert producer.backpressure() is None
            # Four times as many: more than two per partition.
            for i in range(4_800):
                producer.send(stream, i % 8, None, b"x" * 100)
            held = producer.backpressure()
            assert held is not None and not held.done()
            await asyncio.wait_for(held, 30)

    async def test_keyless_messages_stick_to_a_partition_per_batch(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("sticky")
        await admin.create_stream(topic, 3)
        # Batches close only when full (1 KiB: a few messages each), never on linger.
        producer = factory(
            kafka_bootstrap, **{"producer.linger.ms": 600_000, "producer.batch.size": 1024}
        ).get_producer()
        await producer.start()
        for i in range(200):
            producer.send(SystemStream(SYSTEM, topic), None, None, b"%04d-" % i + b"x" * 95)
        await producer.flush()
        await producer.stop()

        consumer = factory(kafka_bootstrap).get_consumer()
        ssps = [ssp(topic, p) for p in range(3)]
        for partition in ssps:
            consumer.register(partition, None, OffsetDefault.OLDEST)
        await consumer.start()
        try:
            got = await read(consumer, ssps, 200)
        finally:
            await consumer.stop()
        partition_of = {
            int(message[:4]): p for p in range(3) for _, _, message in got[ssp(topic, p)]
        }
        runs: list[tuple[int, int]] = []  # (partition, length), in send order
        for i in range(200):
            if runs and runs[-1][0] == partition_of[i]:
                runs[-1] = (partition_of[i], runs[-1][1] + 1)
            else:
                runs.append((partition_of[i], 1))
        full = runs[0][1]
        assert 1 < full < 20
        assert all(length == full for _, length in runs[:-1])  # whole batches
        assert [p for p, _ in runs] == [(runs[0][0] + i) % 3 for i in range(len(runs))]

    async def test_a_missing_topic_fails_the_flush_naming_it(self, kafka_bootstrap: str) -> None:
        topic = topic_name("missing")
        producer = factory(kafka_bootstrap, **{"producer.request.timeout.ms": 1500}).get_producer()
        await producer.start()
        try:
            producer.send(SystemStream(SYSTEM, topic), 0, None, b"lost")
            producer.send(SystemStream(SYSTEM, topic), None, None, b"lost too")
            with pytest.raises(
                StreamSystemError,
                match=rf"partition 0 of Kafka topic '{topic}' .*UnknownTopicOrPartition|"
                rf"Kafka topic '{topic}' .*UnknownTopicOrPartition",
            ):
                await producer.flush()
            assert isinstance(producer, KafkaSystemProducer)
            assert producer.failed_sends == 2
            await producer.flush()  # reported once
        finally:
            await producer.stop()

    async def test_a_record_above_max_request_size_fails_alone_and_is_not_sent(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """``producer.max.request.size`` bounds each record, as in Kafka's Java producer: a
        larger one is refused before it reaches the broker, the flush names it, and the
        records beside it are written (the broker would refuse their whole batch)."""
        topic = topic_name("max-request")
        await admin.create_stream(topic, 2)
        options = {"producer.max.request.size": 2000, "producer.batch.size": 65536}
        producer = factory(kafka_bootstrap, **options).get_producer()
        assert isinstance(producer, KafkaSystemProducer)
        stream = SystemStream(SYSTEM, topic)
        await producer.start()
        try:
            producer.send(stream, 0, None, b"before")
            producer.send(stream, 0, b"k", b"x" * 5000)
            producer.send(stream, 0, b"k" * 3000, None)  # a key counts too
            producer.send(stream, 0, None, b"after")
            producer.send(stream, 0, None, b"y" * 1900)  # fits, overhead and all
            with pytest.raises(
                SendFailedError,
                match=rf"^cannot write to partition 0 of Kafka topic '{topic}': a record of "
                r"5087 bytes \(key, value and headers, serialized\) is larger than "
                r"systems\.kafka\.producer\.max\.request\.size \(2000\); not sent "
                r"\(2 failed batches in all\); 2 messages failed since the start$",
            ) as failed:
                await producer.flush()
            assert failed.value.messages == 2
            assert producer.failed_sends == 2
            await producer.flush()  # reported once
        finally:
            await producer.stop()
        assert await self.delivered(kafka_bootstrap, stream, 3) == [
            b"before",
            b"after",
            b"y" * 1900,
        ]

    async def test_with_batches_below_the_limit_a_larger_record_is_caught_opening_its_batch(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """With batch.size below max.request.size (the defaults' shape), only a batch's first
        record can exceed the limit, so only that one is checked: a record too large for the
        open batch opens a new one, where it is refused."""
        topic = topic_name("max-request-first")
        await admin.create_stream(topic, 1)
        options = {"producer.max.request.size": 20000, "producer.batch.size": 16384}
        producer = factory(kafka_bootstrap, **options).get_producer()
        stream = SystemStream(SYSTEM, topic)
        await producer.start()
        try:
            producer.send(stream, 0, None, b"before")  # opens the batch
            producer.send(stream, 0, None, b"x" * 30000)  # too large for it: a batch of its own
            producer.send(stream, 0, None, b"after")
            with pytest.raises(SendFailedError, match=r"a record of 300\d\d bytes .* \(20000\)"):
                await producer.flush()
        finally:
            await producer.stop()
        assert await self.delivered(kafka_bootstrap, stream, 2) == [b"before", b"after"]

    async def test_a_topic_deleted_while_written_fails_the_flush_saying_so(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        """An output topic deleted under the job: the flush fails naming the topic as gone,
        not only with the broker's last answer to the retries (NotLeaderForPartition, "the
        client's metadata is out of date"), which sends the operator to the brokers."""
        topic = topic_name("deleted-out")
        await admin.create_stream(topic, 1)
        options = {"producer.request.timeout.ms": 3000}
        producer = factory(kafka_bootstrap, **options).get_producer()
        stream = SystemStream(SYSTEM, topic)
        await producer.start()
        try:
            producer.send(stream, 0, None, b"written")
            await producer.flush()
            # Gone from the broker's metadata too: the deletion is applied there after the
            # call returns, and a write racing it could still be taken.
            await delete_topic(kafka_bootstrap, topic)
            producer.send(stream, 0, None, b"lost")
            with pytest.raises(
                SendFailedError,
                match=rf"^cannot write to partition 0 of Kafka topic '{topic}' at "
                rf"{kafka_bootstrap}: .*; Kafka topic '{topic}' does not exist \(deleted while "
                r"the job ran\?\); 1 messages failed since the start$",
            ):
                await producer.flush()
        finally:
            await producer.stop()

    async def test_a_partition_out_of_range_fails_at_send_once_the_topic_is_known(
        self, kafka_bootstrap: str, admin: KafkaSystemAdmin
    ) -> None:
        topic = topic_name("range")
        await admin.create_stream(topic, 2)
        producer = factory(kafka_bootstrap).get_producer()
        await producer.start()
        try:
            producer.send(SystemStream(SYSTEM, topic), 1, None, b"fine")
            await producer.flush()
            with pytest.raises(
                StreamSystemError,
                match=rf"^partition 5 is out of range for Kafka topic '{topic}': it has "
                r"partitions 0\.\.1$",
            ):
                producer.send(SystemStream(SYSTEM, topic), 5, None, b"x")
        finally:
            await producer.stop()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class TestUnreachableBroker:
    @pytest.mark.parametrize("part", ["admin", "consumer", "producer"])
    async def test_start_gives_up_after_connect_timeout_naming_the_servers(self, part: str) -> None:
        servers = f"127.0.0.1:{closed_port()}"
        built = factory(servers, **{"connect.timeout.ms": 1500})
        client: Any
        if part == "admin":
            client = built.get_admin()
        elif part == "consumer":
            client = built.get_consumer()
            client.register(ssp("t", 0), None, OffsetDefault.OLDEST)
        else:
            client = built.get_producer()
        with (
            capture_logs() as logs,
            pytest.raises(
                StreamSystemError,
                match=rf"^cannot reach Kafka at {servers} after 3 attempts over 1\.[5-9] s: "
                r"KafkaConnectionError: .*connect\.timeout\.ms, now 1500\)$",
            ),
        ):
            await client.start()
        await client.stop()
        # One line for the outage, not one per attempt; the failure says the rest.
        events = [e for e in logs if e["event"].startswith("broker_")]
        assert [(e["event"], e["bootstrap_servers"], e["log_level"]) for e in events] == [
            ("broker_unreachable", servers, "warning")
        ]


async def test_plain_aiokafka_reads_what_the_adapter_wrote(
    kafka_bootstrap: str, admin: KafkaSystemAdmin
) -> None:
    """Interoperability: records written by samzapy are ordinary Kafka records."""
    topic = topic_name("interop")
    await admin.create_stream(topic, 1)
    producer = factory(kafka_bootstrap).get_producer()
    await producer.start()
    producer.send(SystemStream(SYSTEM, topic), 0, b"key", b"value")
    producer.send(SystemStream(SYSTEM, topic), 0, b"gone", None)  # a tombstone
    await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        records: list[Any] = []
        while len(records) < 2:
            records.extend((await consumer.getmany(tp, timeout_ms=5000)).get(tp, []))
    finally:
        await consumer.stop()
    assert [(r.offset, r.key, r.value) for r in records] == [
        (0, b"key", b"value"),
        (1, b"gone", None),
    ]
