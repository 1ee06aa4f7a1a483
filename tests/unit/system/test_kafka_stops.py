"""A kafka client's stop ends within its bound however its brokers fare. Fakes of aiokafka's
clients: no broker needed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka.producer.message_accumulator import BatchBuilder
from structlog.testing import capture_logs

from samzapy.system.kafka.connection import stop_client


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
