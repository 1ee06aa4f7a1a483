"""Reading a partition up to an end offset: where each batch is cut (``before_end``, and
``EntryBatch.count_before`` for a changelog's entries), and ``read_partition`` and
``read_entries`` over the memory system."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.entries import EntryBatch, IntegerOffsets
from samzapy.system.inmemory import InMemoryBroker, InMemorySystemFactory
from samzapy.system.reader import before_end, read_entries, read_partition

SSP = SystemStreamPartition("mem", "changelog", 0)
ADMIN = InMemorySystemFactory("mem", {"namespace": "reader-cuts"}).get_admin()  # integer offsets


def envelopes(first: int, last: int) -> list[IncomingMessageEnvelope]:
    return [IncomingMessageEnvelope(SSP, str(i), b"k", b"v") for i in range(first, last + 1)]


@pytest.mark.parametrize("end", [0, 10, 11, 12, 15, 19, 20, 21, 100])
def test_a_batch_is_cut_before_the_end(end: int) -> None:
    batch = envelopes(10, 20)
    cut = before_end(ADMIN, batch, str(end))
    assert cut == sum(int(e.offset) < end for e in batch)


@pytest.mark.parametrize("end", [0, 10, 11, 12, 15, 19, 20, 21, 100])
@pytest.mark.parametrize("integers", [False, True], ids=["strings", "integers"])
def test_entries_are_cut_before_the_end(end: int, integers: bool) -> None:
    """At every position, with offsets as strings (any system) or integers (kafka's);
    gaps (a compacted changelog) included."""
    numbers = [10, 11, 12, 14, 15, 19, 20]
    offsets = IntegerOffsets(numbers) if integers else [str(i) for i in numbers]
    batch = EntryBatch([(str(i).encode(), b"v") for i in numbers], offsets)
    cut = batch.count_before(ADMIN.compare_offsets, str(end))
    assert cut == sum(i < end for i in numbers)
    head, rest = batch.split(cut)
    assert list(head.offsets) + list(rest.offsets) == [str(i) for i in numbers]
    assert head.entries + rest.entries == batch.entries
    assert type(head.offsets) is type(offsets)


def test_entries_of_envelopes_leave_the_end_of_stream_out() -> None:
    batch = EntryBatch.of_envelopes([*envelopes(3, 5), IncomingMessageEnvelope.end_of_stream(SSP)])
    assert (batch.entries, list(batch.offsets), batch.ended) == (
        [(b"k", b"v")] * 3,
        ["3", "4", "5"],
        True,
    )
    alone = EntryBatch.of_envelopes([IncomingMessageEnvelope.end_of_stream(SSP)])
    assert (len(alone), alone.ended) == (0, True)
    head, rest = EntryBatch.of_envelopes(envelopes(0, 3)).split(1)
    assert not head.ended and not rest.ended


def test_entries_are_bytes() -> None:
    delete = IncomingMessageEnvelope(SSP, "0", bytearray(b"k"), None)
    assert EntryBatch.of_envelopes([delete]).entries == [(b"k", None)]
    with pytest.raises(StoreError, match="bytes keys, got str"):
        EntryBatch.of_envelopes([IncomingMessageEnvelope(SSP, "0", "k", b"v")])


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
    first = int(start) if start is not None else 0
    expected = [str(i) for i in range(first, int(end))]
    assert asyncio.run(read(factory, start, end, entries=False)) == expected
    assert asyncio.run(read(factory, start, end, entries=True)) == expected


async def read(
    factory: InMemorySystemFactory, start: str | None, end: str, *, entries: bool
) -> list[str]:
    """The offsets ``read_partition`` (or ``read_entries``) reads, checking that the
    entries match their offsets."""
    got: list[str] = []
    admin = factory.get_admin()
    if entries:
        async for entry_batch in read_entries(factory, admin, SSP, start, end):
            assert entry_batch.entries == [
                (f"k{o}".encode(), f"v{o}".encode()) for o in entry_batch.offsets
            ]
            got += entry_batch.offsets
    else:
        async for batch in read_partition(factory, admin, SSP, start, end):
            got += [e.offset for e in batch]
    return got


def test_read_partition_of_an_ended_partition_stops_at_its_end_of_stream(namespace: str) -> None:
    """An end beyond what the partition holds: its end-of-stream ends the read."""
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("changelog", 1)
    for i in range(5):
        broker.append("changelog", 0, f"k{i}".encode(), f"v{i}".encode())
    broker.end_partition("changelog", 0)
    factory = InMemorySystemFactory("mem", {"namespace": namespace})
    for entries in (False, True):
        got = asyncio.run(asyncio.wait_for(read(factory, None, "30", entries=entries), 10))
        assert got == ["0", "1", "2", "3", "4"]


def test_read_entries_of_a_partition_holding_only_its_end_of_stream(namespace: str) -> None:
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("changelog", 1)
    broker.end_partition("changelog", 0)
    factory = InMemorySystemFactory("mem", {"namespace": namespace})
    assert asyncio.run(asyncio.wait_for(read(factory, None, "30", entries=True), 10)) == []
