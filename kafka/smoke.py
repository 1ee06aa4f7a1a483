"""Checks that aiokafka can use every broker feature samzapy needs, against a running broker.

Run it after `scripts/kafka.sh up` whenever kafka/pom.xml changes Kafka's version:

    .venv/bin/python kafka/smoke.py [bootstrap]      # default 127.0.0.1:9092

Each step prints `ok <step>`; the first failure raises with aiokafka's own error, which is what to
quote in kafka/pom.xml when falling back to an older Kafka. Topics get a random suffix, so reruns
against the same broker do not collide.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

PARTITIONS = 8


def ok(step: str) -> None:
    print(f"ok {step}", flush=True)


async def create_topics(bootstrap: str, plain: str, compacted: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(plain, num_partitions=PARTITIONS, replication_factor=1),
                NewTopic(
                    compacted,
                    num_partitions=1,
                    replication_factor=1,
                    topic_configs={"cleanup.policy": "compact"},
                ),
            ]
        )
        described = await admin.describe_topics([plain])
        found = len(described[0]["partitions"])
        assert found == PARTITIONS, f"{plain}: expected {PARTITIONS} partitions, found {found}"
        [response] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, compacted, None)]
        )
        configs = {name: value for name, value, *_ in response.resources[0][4]}
        assert configs["cleanup.policy"] == "compact", configs["cleanup.policy"]
    finally:
        await admin.close()
    ok("admin create_topics (8 partitions + compacted), describe_topics, describe_configs")


async def produce(bootstrap: str, plain: str, compacted: str) -> dict[int, list[bytes]]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    await producer.start()
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        for i in range(16):
            value = f"single-{i}".encode()
            await producer.send_and_wait(plain, value, key=b"k", partition=i % PARTITIONS)
            sent[i % PARTITIONS].append(value)
        ok("idempotent send_and_wait")

        futures = []
        for i in range(400):
            value = f"batch-{i}".encode()
            futures.append(await producer.send(plain, value, partition=i % PARTITIONS))
            sent[i % PARTITIONS].append(value)
        for meta in await asyncio.gather(*futures):
            assert meta.offset >= 0
        ok("idempotent send (400 pipelined)")

        batch = producer.create_batch()
        for i in range(10):
            value = f"explicit-{i}".encode()
            assert batch.append(key=None, value=value, timestamp=None) is not None
            sent[3].append(value)
        await (await producer.send_batch(batch, plain, partition=3))
        ok("send_batch")

        updates: list[tuple[bytes, bytes | None]] = [
            (b"a", b"1"),
            (b"b", b"1"),
            (b"a", b"2"),
            (b"b", None),
        ]
        for key, update in updates:
            await producer.send_and_wait(compacted, update, key=key)
        ok("produce to compacted topic (with a tombstone)")
    finally:
        await producer.stop()
    return sent


async def read_assigned(bootstrap: str, plain: str, sent: dict[int, list[bytes]]) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="none"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(plain, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        begin = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        for tp in tps:
            assert begin[tp] == 0 and end[tp] == len(sent[tp.partition]), (tp, begin, end)
        ok("beginning_offsets / end_offsets")

        await consumer.seek_to_beginning(*tps)
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        paused = tps[0]
        consumer.pause(paused)
        while sum(map(len, got.values())) < sum(map(len, sent.values())) - len(sent[0]):
            for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                assert tp != paused, "paused partition returned records"
                got[tp.partition].extend(r.value for r in records if r.value is not None)
        assert got[0] == []
        consumer.resume(paused)
        while len(got[0]) < len(sent[0]):
            for tp, records in (await consumer.getmany(paused, timeout_ms=1000)).items():
                got[tp.partition].extend(r.value for r in records if r.value is not None)
        assert got == sent, "read-back differs from what was produced"
        ok("assign + seek_to_beginning + getmany + pause/resume, exact equality")

        consumer.seek(tps[1], 5)
        records = (await consumer.getmany(tps[1], timeout_ms=2000, max_records=1))[tps[1]]
        assert records[0].offset == 5 and records[0].value == sent[1][5], records[0]
        ok("seek to an offset")

        future_ms = int(time.time() * 1000) + 60_000
        found = await consumer.offsets_for_times({tps[2]: 0, tps[4]: future_ms})
        assert found[tps[2]] is not None and found[tps[2]].offset == 0, found
        assert found[tps[4]] is None, found
        ok("offsets_for_times")
    finally:
        await consumer.stop()


async def read_compacted(bootstrap: str, compacted: str) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(compacted, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        seen: list[tuple[bytes | None, bytes | None]] = []
        while len(seen) < 4:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                seen.extend((r.key, r.value) for r in records)
        assert seen == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"b", None)], seen
    finally:
        await consumer.stop()
    ok("read compacted topic back (tombstone kept as value None)")


async def group(bootstrap: str, plain: str) -> None:
    group_id = f"smoke-{uuid.uuid4().hex[:8]}"
    consumer = AIOKafkaConsumer(
        plain,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        records = await consumer.getmany(timeout_ms=10_000)
        while not records:
            records = await consumer.getmany(timeout_ms=1000)
        assigned = consumer.assignment()
        assert len(assigned) == PARTITIONS, assigned
        await consumer.commit({tp: 1 for tp in assigned})
        for tp in assigned:
            assert await consumer.committed(tp) == 1
    finally:
        await consumer.stop()
    ok("group subscribe, join, commit, committed")


async def main(bootstrap: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    plain, compacted = f"smoke-{suffix}", f"smoke-compacted-{suffix}"
    await create_topics(bootstrap, plain, compacted)
    sent = await produce(bootstrap, plain, compacted)
    await read_assigned(bootstrap, plain, sent)
    await read_compacted(bootstrap, compacted)
    await group(bootstrap, plain)
    print("all aiokafka checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:9092"))
