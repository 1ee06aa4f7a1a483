"""The kafka system when its broker goes away: a restart goes unnoticed, a lasting outage fails.

These tests stop and start a broker of their own (``own_kafka_broker``), never the session's.
The script runs in a worker thread so the event loop, and aiokafka's reconnecting, go on.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from structlog.testing import capture_logs

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.kafka import KafkaSystemFactory
from samzapy.system.kafka.connection import OUTAGES, keep_bootstrap, started, stop_client
from samzapy.system.ports import OffsetDefault

if TYPE_CHECKING:
    from conftest import ScriptBroker

SYSTEM = "kafka"


def factory(bootstrap: str, connect_timeout_ms: int) -> KafkaSystemFactory:
    return KafkaSystemFactory(
        SYSTEM, {"bootstrap.servers": bootstrap, "connect.timeout.ms": connect_timeout_ms}
    )


async def new_topic(built: KafkaSystemFactory) -> str:
    topic = f"outage-{uuid.uuid4().hex[:10]}"
    admin = built.get_admin()
    await admin.start()
    await admin.create_stream(topic, 1)
    await admin.stop()
    return topic


async def read(
    consumer: Any, ssp: SystemStreamPartition, count: int, each: int = 100
) -> list[tuple[str, Any]]:
    """``count`` messages, ``each`` per poll."""
    got: list[tuple[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while len(got) < count:
        assert loop.time() < deadline, f"only {len(got)} of {count} messages within 60 s"
        batch = await consumer.poll([ssp], each, 1.0)
        got.extend((e.offset, e.message) for e in batch.get(ssp, []))
    return got


async def test_a_broker_restart_fails_neither_the_consumer_nor_the_producer(
    own_kafka_broker: ScriptBroker,
) -> None:
    broker = own_kafka_broker
    built = factory(broker.bootstrap, 60_000)
    topic = await new_topic(built)
    ssp = SystemStreamPartition(SYSTEM, topic, 0)
    stream = SystemStream(SYSTEM, topic)
    producer = built.get_producer()
    await producer.start()
    consumer = built.get_consumer()
    consumer.register(ssp, None, OffsetDefault.OLDEST)
    await consumer.start()
    try:
        for message in (b"before-0", b"before-1"):
            producer.send(stream, 0, None, message)
        await producer.flush()
        assert await read(consumer, ssp, 2) == [("0", b"before-0"), ("1", b"before-1")]

        await asyncio.to_thread(broker.down)
        for _ in range(3):  # the broker is gone: nothing arrives, and nothing fails
            assert await consumer.poll([ssp], 100, 0.2) == {}
        await asyncio.to_thread(broker.up)

        for message in (b"after-2", b"after-3"):
            producer.send(stream, 0, None, message)
        await producer.flush()
        assert await read(consumer, ssp, 2) == [("2", b"after-2"), ("3", b"after-3")]
    finally:
        await consumer.stop()
        await producer.stop()


async def test_a_broker_gone_for_longer_than_connect_timeout_fails_the_consumer(
    own_kafka_broker: ScriptBroker,
) -> None:
    broker = own_kafka_broker
    built = factory(broker.bootstrap, 1500)
    topic = await new_topic(built)
    ssp = SystemStreamPartition(SYSTEM, topic, 0)
    consumer = built.get_consumer()
    consumer.register(ssp, None, OffsetDefault.UPCOMING)
    await consumer.start()
    loop = asyncio.get_running_loop()
    try:
        assert await consumer.poll([ssp], 100, 0.1) == {}
        await asyncio.to_thread(broker.down)
        deadline = loop.time() + 30
        with (
            capture_logs() as logs,
            pytest.raises(
                StreamSystemError,
                match=rf"^lost Kafka at {broker.bootstrap}: no answer for [0-9.]+ s after \d+ "
                r"failed checks: .*connect\.timeout\.ms is 1500\)$",
            ),
        ):
            while loop.time() < deadline:
                assert await consumer.poll([ssp], 100, 0.1) == {}
        unreachable = [e for e in logs if e["event"] == "broker_unreachable"]
        assert unreachable and all(e["bootstrap_servers"] == broker.bootstrap for e in unreachable)
    finally:
        await consumer.stop()
        await asyncio.to_thread(broker.up)


async def test_records_fetched_before_an_outage_do_not_say_the_broker_is_reachable(
    own_kafka_broker: ScriptBroker,
) -> None:
    """Records the consumer had fetched before the brokers went away are still delivered
    during the outage: they are no answer of a broker. They had closed the outage another
    client of the system had opened (``broker_reachable`` in the middle of it, then
    ``broker_unreachable`` again), and reset the consumer's own count of its silence."""
    broker = own_kafka_broker
    built = factory(broker.bootstrap, 60_000)
    topic = await new_topic(built)
    ssp = SystemStreamPartition(SYSTEM, topic, 0)
    stream = SystemStream(SYSTEM, topic)
    producer = built.get_producer()
    await producer.start()
    for i in range(500):
        producer.send(stream, 0, None, b"%d" % i)
    await producer.flush()
    await producer.stop()
    consumer = built.get_consumer()
    consumer.register(ssp, None, OffsetDefault.OLDEST)
    await consumer.start()
    try:
        first = await read(consumer, ssp, 1, each=1)  # the fetch holds the others
        await asyncio.to_thread(broker.down)
        # Another client of the system (a producer, say) finds the brokers gone.
        OUTAGES.failed(SYSTEM, broker.bootstrap, "producer", ConnectionRefusedError())
        with capture_logs() as logs:
            rest = await read(consumer, ssp, 10, each=1)
        assert len(first) == 1 and len(rest) == 10  # delivered from what was fetched
        assert [e for e in logs if e["event"] == "broker_reachable"] == []
        assert OUTAGES.is_open(SYSTEM, broker.bootstrap)
    finally:
        OUTAGES.answered(SYSTEM, broker.bootstrap)  # closed: the next test starts afresh
        await consumer.stop()
        await asyncio.to_thread(broker.up)


@pytest.mark.parametrize("kind", ["consumer", "producer", "admin"])
async def test_a_client_that_knows_no_broker_asks_its_bootstrap_servers_again(
    kafka_bootstrap: str, kind: str
) -> None:
    # What a client is left with when it bootstrapped from a broker that had just restarted
    # (it named no broker) and its bootstrap connection then closed: no broker to ask.
    # aiokafka alone then fails every metadata update ("Unable to update metadata from []")
    # for good; with keep_bootstrap it asks the bootstrap servers.
    if kind == "admin":
        client: Any = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        keep_bootstrap(client)
        await client.start()
    else:
        made = AIOKafkaConsumer if kind == "consumer" else AIOKafkaProducer
        client = await started(made(bootstrap_servers=kafka_bootstrap))
    network = client.client if kind == "producer" else client._client
    try:
        network.cluster._brokers = {}
        for conn_id in list(network._conns):
            network._conns.pop(conn_id).close()
        assert network.get_random_node() is not None
        assert await asyncio.wait_for(network.force_metadata_update(), 30)
        assert network.cluster._brokers, "the client should know the broker again"
    finally:
        if kind == "admin":
            await client.close()
        else:
            await stop_client(client)
