"""The batches inside aiokafka go only under the container's lease (``batches.send_under``):
a produce request waits out a hold and is never sent once the lease broke; other requests
go as they come. A fake network client and lease: no broker needed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaError
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.produce import ProduceRequest

from samzapy.system.kafka.batches import send_under

PRODUCE = ProduceRequest(transactional_id=None, required_acks=-1, timeout=1000, topics=[])
METADATA = MetadataRequest([])


class Client:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, node_id: int, request: Any, **kwargs: Any) -> str:
        self.sent.append(request)
        return "answered"


class Producer:
    def __init__(self) -> None:
        self.client = Client()


class Lease:
    """Valid, held (``hold``: settled by ``answer``) or broken."""

    def __init__(self) -> None:
        self.is_valid = True
        self.answer: asyncio.Future[bool] | None = None

    def hold(self) -> None:
        self.is_valid = False
        self.answer = asyncio.get_running_loop().create_future()

    def valid(self) -> bool:
        return self.is_valid

    def held(self) -> asyncio.Future[None] | None:
        return None

    async def settle(self) -> bool:
        if self.answer is None:
            return False
        self.is_valid = await self.answer
        return self.is_valid


async def _gated() -> tuple[Producer, Lease, asyncio.Event]:
    producer, lease, dropping = Producer(), Lease(), asyncio.Event()
    send_under(producer, lease, dropping)
    return producer, lease, dropping


async def test_a_produce_request_waits_out_a_hold_and_goes_once_resumed() -> None:
    producer, lease, _ = await _gated()
    assert await producer.client.send(0, PRODUCE) == "answered"
    lease.hold()
    sending = asyncio.ensure_future(producer.client.send(0, PRODUCE))
    await asyncio.sleep(0.01)
    assert not sending.done() and len(producer.client.sent) == 1
    assert await producer.client.send(0, METADATA) == "answered"  # not a produce request
    assert lease.answer is not None
    lease.answer.set_result(True)
    assert await sending == "answered"
    assert producer.client.sent == [PRODUCE, METADATA, PRODUCE]


async def test_a_produce_request_is_never_sent_once_the_lease_broke() -> None:
    """Its batches fail once the producer drops what it holds, which counts them."""
    producer, lease, dropping = await _gated()
    lease.hold()
    sending = asyncio.ensure_future(producer.client.send(0, PRODUCE))
    await asyncio.sleep(0.01)
    assert lease.answer is not None
    lease.answer.set_result(False)  # the group evicted the member
    await asyncio.sleep(0.01)
    assert not sending.done()  # waits for the producer to drop it
    dropping.set()
    with pytest.raises(KafkaError, match="not sent: the container may have lost its tasks"):
        await sending
    assert producer.client.sent == []
