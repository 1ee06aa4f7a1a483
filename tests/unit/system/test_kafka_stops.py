"""A kafka client's stop ends within its bound however its brokers fare, and an abandoned
producer drops what it holds instead of waiting for brokers that are gone. Fakes of
aiokafka's clients, and its own batch accumulator: no broker needed."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.errors import KafkaError
from aiokafka.producer.message_accumulator import BatchBuilder, MessageAccumulator
from aiokafka.structs import TopicPartition
from structlog.testing import capture_logs

from samzapy.api.errors import SendFailedError, StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.system.kafka import KafkaSystemProducer, kafka_settings
from samzapy.system.kafka.batches import drop_held
from samzapy.system.kafka.connection import stop_client

SETTINGS = kafka_settings("k", {"bootstrap.servers": "127.0.0.1:9"})


class FakeNetwork:
    """aiokafka's network client as far as the stops use it."""

    def __init__(self) -> None:
        self.closed = False
        self.cluster = self
        self.topics: set[str] = set()

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1}

    def add_topic(self, topic: str) -> None:
        self.topics.add(topic)

    async def close(self) -> None:
        self.closed = True


class FakeAccumulator:
    """Holds every batch until it is failed: an idempotent producer's, the brokers gone."""

    def __init__(self) -> None:
        self.deliveries: list[asyncio.Future[None]] = []
        self.failed = False

    def fail_all(self, exception: BaseException) -> None:
        self.failed = True
        for delivery in self.deliveries:
            if not delivery.done():
                delivery.set_exception(exception)


class UnansweredProducer:
    """An AIOKafkaProducer whose brokers are gone: no batch is ever delivered, and its stop
    waits for every batch it holds (as aiokafka's does); ``send_batch`` waits for room
    without end once ``full``."""

    def __init__(self, *, full: bool = False) -> None:
        self.client = FakeNetwork()
        self._message_accumulator = FakeAccumulator()
        self.full = full
        self.stop_called = False

    def create_batch(self) -> Any:
        return BatchBuilder(1024, 0, is_transactional=False)

    async def partitions_for(self, topic: str) -> set[int]:
        return self.client.partitions_for_topic(topic)

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        if self.full:
            await asyncio.Event().wait()
        delivery = asyncio.get_running_loop().create_future()
        self._message_accumulator.deliveries.append(delivery)
        return delivery

    async def stop(self) -> None:
        self.stop_called = True
        deliveries = self._message_accumulator.deliveries
        if deliveries:
            await asyncio.wait(deliveries)


def producer_over(client: UnansweredProducer) -> KafkaSystemProducer:
    producer = KafkaSystemProducer(SETTINGS)
    producer._producer = client
    return producer


async def send(producer: KafkaSystemProducer, stream: str, partition: int, count: int) -> None:
    for i in range(count):
        producer.send(SystemStream("k", stream), partition, None, b"m%d" % i)


async def test_a_client_whose_stop_hangs_is_cut_short_and_its_connections_closed() -> None:
    client = UnansweredProducer()
    client._message_accumulator.deliveries.append(asyncio.get_running_loop().create_future())
    began = time.monotonic()
    with capture_logs() as logs:
        await stop_client(client, timeout_s=0.1)
    assert time.monotonic() - began < 1
    assert client.stop_called and client.client.closed
    assert [e["event"] for e in logs] == ["client_stop_cut_short"]


async def test_a_client_that_stops_keeps_its_own_close() -> None:
    client = UnansweredProducer()
    with capture_logs() as logs:
        await stop_client(client, timeout_s=0.1)
    assert client.stop_called and not client.client.closed  # its stop closed what it had
    assert logs == []


async def test_an_abandoned_producer_drops_what_it_holds_and_stops_at_once() -> None:
    """Batches inside the client, queued for it and still open are dropped and counted, none
    as a failed send; the client's stop waits for none of them."""
    client = UnansweredProducer()
    producer = producer_over(client)
    producer.linger("held", 60_000)
    await send(producer, "out", 0, 5)
    await send(producer, "out", 1, 3)
    await send(producer, "held", 0, 2)  # still open: lingers a minute
    await asyncio.sleep(0.05)  # linger.ms passed: the batches of "out" are in the client
    assert len(client._message_accumulator.deliveries) == 2
    began = time.monotonic()
    dropped = await asyncio.wait_for(producer.abandon(), 5)
    assert time.monotonic() - began < 1
    assert dropped == 10
    assert client._message_accumulator.failed and client.stop_called
    assert producer.failed_sends == 0
    assert producer.backpressure() is None
    assert await producer.abandon() == 0  # once stopped, nothing more


async def test_a_flush_waiting_when_the_producer_is_abandoned_does_not_succeed() -> None:
    """A flush still waiting (a commit) learns that what it waited for was dropped: no
    checkpoint may cover it."""
    producer = producer_over(UnansweredProducer())
    await send(producer, "out", 0, 3)
    flushing = asyncio.ensure_future(producer.flush())
    await asyncio.sleep(0.05)
    assert await producer.abandon() == 3
    with pytest.raises(StreamSystemError, match="abandoned"):
        await asyncio.wait_for(flushing, 5)
    assert producer.failed_sends == 0


async def test_an_abandoned_producer_gives_up_a_batch_waiting_for_room() -> None:
    """A batch the client has no room for (aiokafka waits for the partition's previous one to
    go) is dropped too: its sender is cancelled."""
    client = UnansweredProducer(full=True)
    producer = producer_over(client)
    await send(producer, "out", 0, 4)
    await asyncio.sleep(0.05)
    assert producer._senders  # waiting in send_batch
    dropped = await asyncio.wait_for(producer.abandon(), 5)
    assert dropped == 4
    assert not producer._senders and producer.failed_sends == 0


async def test_a_stopped_producer_still_flushes_first() -> None:
    """``stop`` (a clean stop) waits for its batches, delivered or failed, as before."""
    client = UnansweredProducer()
    producer = producer_over(client)
    await send(producer, "out", 0, 3)
    stopping = asyncio.ensure_future(producer.stop())
    await asyncio.sleep(0.1)
    assert not stopping.done()  # flushing
    client._message_accumulator.fail_all(KafkaError("refused"))
    with pytest.raises(SendFailedError, match="refused"):
        await asyncio.wait_for(stopping, 5)
    assert producer.failed_sends == 3 and client.stop_called


async def test_dropping_aiokafka_s_own_batches_leaves_no_error_behind() -> None:
    """aiokafka's accumulator as it is: a batch sent once and queued again for a retry, one
    queued and never sent, one in flight. All fail, with no error in a callback (aiokafka
    drops a failed batch from those in flight) and no exception left unread (the queued
    batches' waiters, which nobody awaits any more)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: errors.append(context))
    accumulator = MessageAccumulator(ClusterMetadata(), 1024, 0, 30)
    retried, queued, in_flight = (TopicPartition("t", p) for p in range(3))
    deliveries = [
        await accumulator.add_batch(BatchBuilder(1024, 0, is_transactional=False), tp, 1)
        for tp in (retried, queued, in_flight)
    ]
    accumulator.reenqueue(accumulator._pop_batch(retried))  # sent, and queued again to retry
    accumulator._pop_batch(in_flight)

    class Holder:
        _message_accumulator = accumulator

    await drop_held(Holder(), "dropped", 1)
    done = await asyncio.gather(*deliveries, return_exceptions=True)
    assert [str(d) for d in done] == ["KafkaError: dropped"] * 3
    await asyncio.sleep(0.01)
    del accumulator, deliveries, done, Holder
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(None)
    assert errors == []
