"""Reading a partition up to an end offset: where each batch is cut (``before_end``), and
``read_partition`` over the memory system."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.system import SystemStreamPartition
from samzapy.system.inmemory import InMemoryBroker, InMemorySystemFactory
from samzapy.system.reader import before_end, read_partition

SSP = SystemStreamPartition("mem", "changelog", 0)
ADMIN = InMemorySystemFactory("mem", {"namespace": "reader-cuts"}).get_admin()  # integer offsets


def envelopes(first: int, last: int) -> list[IncomingMessageEnvelope]:
    return [IncomingMessageEnvelope(SSP, str(i), b"k", b"v") for i in range(first, last + 1)]


@pytest.mark.parametrize("end", [0, 10, 11, 12, 15, 19, 20, 21, 100])
def test_a_batch_is_cut_before_the_end(end: int) -> None:
    batch = envelopes(10, 20)
    cut = before_end(ADMIN, batch, str(end))
    assert cut == sum(int(e.offset) < end for e in batch)


def test_the_end_of_stream_is_never_taken() -> None:
    batch = [*envelopes(10, 14), IncomingMessageEnvelope.end_of_stream(SSP)]
    assert before_end(ADMIN, batch, "100") == 5
    assert before_end(ADMIN, batch, "12") == 2
    assert before_end(ADMIN, [IncomingMessageEnvelope.end_of_stream(SSP)], "100") == 0
    assert before_end(ADMIN, [], "100") == 0


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"reader-{uuid.uuid4().hex}"
    yield name
    InMemoryBroker.drop_namespace(name)


@pytest.mark.parametrize("ended", [False, True], ids=["open", "ended"])
@pytest.mark.parametrize(("start", "end"), [(None, "17"), ("5", "17"), (None, "25"), ("3", "4")])
def test_read_partition_stops_at_the_end(
    namespace: str, start: str | None, end: str, ended: bool
) -> None:
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("changelog", 1)
    for i in range(25):
        broker.append("changelog", 0, f"k{i}".encode(), f"v{i}".encode())
    if ended:  # its end-of-stream follows the last record
        broker.end_partition("changelog", 0)
    factory = InMemorySystemFactory("mem", {"namespace": namespace})

    async def read() -> list[str]:
        got: list[str] = []
        async for batch in read_partition(factory, factory.get_admin(), SSP, start, end):
            got += [e.offset for e in batch]
        return got

    first = int(start) if start is not None else 0
    assert asyncio.run(read()) == [str(i) for i in range(first, int(end))]


def test_read_partition_of_an_ended_partition_stops_at_its_end_of_stream(namespace: str) -> None:
    """An end beyond what the partition holds: its end-of-stream ends the read."""
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("changelog", 1)
    for _ in range(5):
        broker.append("changelog", 0, b"k", b"v")
    broker.end_partition("changelog", 0)
    factory = InMemorySystemFactory("mem", {"namespace": namespace})

    async def read() -> list[str]:
        got: list[str] = []
        async for batch in read_partition(factory, factory.get_admin(), SSP, None, "30"):
            got += [e.offset for e in batch]
        return got

    assert asyncio.run(asyncio.wait_for(read(), 10)) == ["0", "1", "2", "3", "4"]
