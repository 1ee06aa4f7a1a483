"""The test broker round-trips records exactly through aiokafka: what every Kafka test builds on."""

from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

PARTITIONS = 4
MESSAGES = 100


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )
    finally:
        await admin.close()


async def test_records_round_trip_in_order_per_partition(kafka_bootstrap: str) -> None:
    topic = f"broker-round-trip-{uuid.uuid4().hex[:8]}"
    await _create_topic(kafka_bootstrap, topic, PARTITIONS)
    sent: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(PARTITIONS)}
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True, acks="all"
    )
    await producer.start()
    try:
        for i in range(MESSAGES):
            key, value = f"key-{i}".encode(), f"value-{i}".encode()
            await producer.send(topic, value, key=key, partition=i % PARTITIONS)
            sent[i % PARTITIONS].append((key, value))
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, auto_offset_reset="none"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end_offsets = await consumer.end_offsets(tps)
        received: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {
            p: [] for p in range(PARTITIONS)
        }
        while sum(map(len, received.values())) < MESSAGES:
            batches = await consumer.getmany(timeout_ms=1000)
            for tp, records in batches.items():
                received[tp.partition].extend((r.offset, r.key, r.value) for r in records)
    finally:
        await consumer.stop()

    assert end_offsets == {tp: MESSAGES // PARTITIONS for tp in tps}
    assert received == {
        p: [(offset, key, value) for offset, (key, value) in enumerate(sent[p])]
        for p in range(PARTITIONS)
    }
