"""The kafka consumer's envelopes, decoded a record batch at a time (system/kafka/fetched.py),
read exactly what aiokafka's own records give, and move the fetch position the same way.

Record sets are built with aiokafka's record batch builder: plain batches, gaps in offsets
(compaction), transactions committed and aborted with their markers, and fetches that start in
the middle of a batch; each is read by aiokafka's PartitionRecords and through the fetcher's
table that ``build_envelopes`` installs, taken in slices of several sizes, as envelopes and as
a changelog reader's store entries."""

from __future__ import annotations

import collections
import gc
import struct
import weakref
from typing import Any

import pytest
from aiokafka.consumer.fetcher import READ_COMMITTED, FetchResult, PartitionRecords
from aiokafka.consumer.subscription_state import SubscriptionState
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.record.util import calc_crc32c
from aiokafka.structs import TopicPartition

from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord, raw_record
from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.entries import EntryBatch, IntegerOffsets
from samzapy.system.kafka.fetched import build_envelopes, envelopes

TP = TopicPartition("words", 3)
SSP = SystemStreamPartition("kafka", "words", 3)
READ_UNCOMMITTED = 0
# Kafka's record batch header: base offset, length, leader epoch, magic, CRC, attributes.
_CRC_OFFSET = struct.calcsize(">qiib")
_ATTRIBUTES_OFFSET = struct.calcsize(">qiibI")
_CONTROL_MASK = 0x20


def batch(
    base: int,
    deltas: list[int],
    *,
    producer_id: int = -1,
    control: bytes | None = None,
    keyless: frozenset[int] = frozenset(),
) -> bytes:
    """A record batch at ``base`` with a record at each offset delta (gaps: compaction);
    ``producer_id`` >= 0 makes it transactional; ``control`` makes it a control batch whose
    one record has that key (an abort or commit marker); the records at the ``keyless``
    deltas have no key."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=int(producer_id >= 0),
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 20,
    )
    for delta in deltas:
        key = control if control is not None else f"k{base + delta}".encode()
        if delta in keyless:
            key = None
        value = b"\x00\x00\x00\x00" if control is not None else f"v{base + delta}".encode()
        builder.append(delta, timestamp=1_000 + base + delta, key=key, value=value, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    if control is not None:
        (attributes,) = struct.unpack_from(">h", data, _ATTRIBUTES_OFFSET)
        struct.pack_into(">h", data, _ATTRIBUTES_OFFSET, attributes | _CONTROL_MASK)
        crc = calc_crc32c(bytes(data[_ATTRIBUTES_OFFSET:]))
        struct.pack_into(">I", data, _CRC_OFFSET, crc)
    return bytes(data)


ABORT = struct.pack(">HH", 0, 0)
COMMIT = struct.pack(">HH", 0, 1)

#: name -> (record set, aborted transactions (producer id, first offset), fetch offset)
RECORD_SETS: dict[str, tuple[bytes, list[tuple[int, int]], int]] = {
    "plain": (batch(0, list(range(7))) + batch(7, list(range(5))), [], 0),
    "compacted gaps": (batch(0, [0, 2, 5]) + batch(9, [1, 4]), [], 0),
    "starts inside a batch": (batch(0, list(range(10))) + batch(10, [0, 1]), [], 4),
    "committed and aborted transactions": (
        batch(0, [0, 1, 2], producer_id=7)
        + batch(3, [0], producer_id=7, control=COMMIT)
        + batch(4, [0, 1], producer_id=8)
        + batch(6, [0, 1, 2])
        + batch(9, [0], producer_id=8, control=ABORT)
        + batch(10, [0, 1], producer_id=7)
        + batch(12, [0], producer_id=7, control=COMMIT),
        [(8, 4)],
        0,
    ),
    "ends with a marker": (
        batch(0, [0, 1], producer_id=5) + batch(2, [0], producer_id=5, control=COMMIT),
        [],
        0,
    ),
}


def aiokafka_reads(name: str, isolation: int) -> tuple[list[tuple[Any, ...]], int]:
    data, aborted, start = RECORD_SETS[name]
    records = PartitionRecords(
        TP, MemoryRecords(data), list(aborted), start, None, None, True, isolation
    )
    read = [(str(r.offset), r.key, r.value, r.timestamp, len(r.value)) for r in records]
    return read, records.next_fetch_offset


def installed(
    name: str, isolation: int, keep_raw: bool = False, entries: bool = False
) -> tuple[Any, Any]:
    """A fetcher table installed by ``build_envelopes`` holding the record set ``name``:
    its result and the partition's assignment."""
    data, aborted, start = RECORD_SETS[name]
    subscription = SubscriptionState()
    subscription.assign_from_user({TP})
    assignment = subscription.subscription.assignment
    assignment.state_value(TP).seek(start)
    fetcher = type("Fetcher", (), {})()
    fetcher._records = collections.OrderedDict()
    consumer = type("Consumer", (), {"_fetcher": fetcher})()
    assert build_envelopes(consumer, {TP: SSP}, keep_raw, entries=entries)
    records = PartitionRecords(
        TP, MemoryRecords(data), list(aborted), start, None, None, True, isolation
    )
    fetcher._records[TP] = FetchResult(
        TP, assignment=assignment, partition_records=records, backoff=0
    )
    result = fetcher._records[TP]
    assert type(result) is FetchResult  # aiokafka's fetcher tells results from errors so
    return result, assignment


async def samzapy_reads(
    name: str, isolation: int, limit: int | None, keep_raw: bool = False
) -> tuple[list[tuple[Any, ...]], int, list[int]]:
    """What the installed table hands out: the envelopes, the final position, and the
    position after each slice; ``keep_raw``: each envelope keeps its record as read."""
    result, assignment = installed(name, isolation, keep_raw)
    out: list[IncomingMessageEnvelope] = []
    positions: list[int] = []
    while result.has_more():
        taken = result.getall(limit)
        assert limit is None or len(taken) <= limit
        out += taken
        positions.append(assignment.state_value(TP).position)
    assert all(type(e) is IncomingMessageEnvelope and e.system_stream_partition == SSP for e in out)
    if keep_raw:
        assert [raw_record(e) for e in out] == [RawRecord(e.key, e.message) for e in out]
    else:
        assert all(raw_record(e) is None for e in out)
    read = [(e.offset, e.key, e.message, e.timestamp, e.size) for e in out]
    return read, assignment.state_value(TP).position, positions


@pytest.mark.parametrize("name", list(RECORD_SETS))
@pytest.mark.parametrize("isolation", [READ_UNCOMMITTED, READ_COMMITTED], ids=["all", "committed"])
@pytest.mark.parametrize("limit", [None, 1, 2, 5, 1000])
async def test_envelopes_hold_what_aiokafka_reads(name: str, isolation: int, limit: int) -> None:
    expected, end = aiokafka_reads(name, isolation)
    read, position, positions = await samzapy_reads(name, isolation, limit)
    assert read == expected
    assert position == end
    # Each slice moved the position to just past the last envelope handed out, or past its
    # whole batch; never backwards.
    assert positions == sorted(positions)


@pytest.mark.parametrize("name", list(RECORD_SETS))
async def test_records_kept_as_read_are_each_envelopes_own(name: str) -> None:
    """A dead-letter stream: each envelope keeps its own record (compaction gaps, records
    before the fetch position and aborted batches included), and reads stay the same."""
    expected, end = aiokafka_reads(name, READ_COMMITTED)
    read, position, _ = await samzapy_reads(name, READ_COMMITTED, 2, keep_raw=True)
    assert (read, position) == (expected, end)


def entry_reads(name: str, isolation: int, limit: int | None) -> tuple[list[Any], int, list[int]]:
    """What the table installed for a changelog's reader hands out: (offset, key, value)
    of each entry, the final position, and the position after each slice."""
    result, assignment = installed(name, isolation, entries=True)
    out: list[Any] = []
    positions: list[int] = []
    while result.has_more():
        taken = result.getall(limit)
        assert type(taken) is EntryBatch and type(taken.offsets) is IntegerOffsets
        assert limit is None or len(taken) <= limit
        assert len(taken.offsets) == len(taken.entries) and not taken.ended
        out += [(o, k, v) for o, (k, v) in zip(taken.offsets, taken.entries, strict=True)]
        positions.append(assignment.state_value(TP).position)
    return out, assignment.state_value(TP).position, positions


@pytest.mark.parametrize("name", list(RECORD_SETS))
@pytest.mark.parametrize("isolation", [READ_UNCOMMITTED, READ_COMMITTED], ids=["all", "committed"])
@pytest.mark.parametrize("limit", [None, 1, 2, 5, 1000])
async def test_entries_hold_what_aiokafka_reads(name: str, isolation: int, limit: int) -> None:
    """A changelog's reader gets each record's key, value and offset, and the position
    moves as it does for envelopes."""
    expected, end = aiokafka_reads(name, isolation)
    read, position, positions = entry_reads(name, isolation, limit)
    assert read == [(offset, key, value) for offset, key, value, _, _ in expected]
    assert position == end
    assert positions == sorted(positions)


async def test_aborted_transactions_are_skipped_only_read_committed() -> None:
    committed, _ = aiokafka_reads("committed and aborted transactions", READ_COMMITTED)
    everything, _ = aiokafka_reads("committed and aborted transactions", READ_UNCOMMITTED)
    offsets = [int(r[0]) for r in committed]
    assert offsets == [0, 1, 2, 6, 7, 8, 10, 11]  # the test data is what it says
    assert len(everything) == 10  # markers are never messages
    read, position, _ = await samzapy_reads("committed and aborted transactions", READ_COMMITTED, 3)
    assert [int(r[0]) for r in read] == offsets
    assert position == 13


async def test_a_corrupt_batch_fails_as_aiokafka_does() -> None:
    data, aborted, start = RECORD_SETS["plain"]
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    RECORD_SETS["corrupt"] = (bytes(corrupt), aborted, start)
    try:
        with pytest.raises(CorruptRecordException, match="Invalid CRC"):
            aiokafka_reads("corrupt", READ_UNCOMMITTED)
        with pytest.raises(CorruptRecordException, match="Invalid CRC"):
            await samzapy_reads("corrupt", READ_UNCOMMITTED, None)
        with pytest.raises(CorruptRecordException, match="Invalid CRC"):
            entry_reads("corrupt", READ_UNCOMMITTED, None)
    finally:
        del RECORD_SETS["corrupt"]


async def test_a_changelog_record_without_a_key_fails_naming_its_offset() -> None:
    """What the envelope path's ``record_bytes`` refuses, the entries refuse too: a store
    entry needs a key (a record written to the changelog by something else)."""
    RECORD_SETS["keyless"] = (batch(0, [0, 1, 2]) + batch(3, [0, 1, 2], keyless={1}), [], 0)
    try:
        with pytest.raises(
            StoreError, match=r"^the changelog record at offset 4 of words#3 has no"
        ):
            entry_reads("keyless", READ_UNCOMMITTED, None)
        # Envelopes carry it as read (an input stream's records may have no key).
        read, _, _ = await samzapy_reads("keyless", READ_UNCOMMITTED, None)
        assert [key for _, key, *_ in read][3:] == [b"k3", None, b"k5"]
    finally:
        del RECORD_SETS["keyless"]


def test_a_fetcher_not_as_expected_is_left_alone_and_its_records_copied() -> None:
    fetcher = type("Fetcher", (), {})()
    fetcher._records = {}  # not the OrderedDict aiokafka keeps
    consumer = type("Consumer", (), {"_fetcher": fetcher})()
    assert not build_envelopes(consumer, {TP: SSP})
    assert type(fetcher._records) is dict
    record = type("Record", (), {"offset": 4, "key": b"k", "value": b"abc", "timestamp": 9})()
    (copied,) = envelopes(SSP, [record])
    assert (copied.offset, copied.key, copied.message, copied.timestamp, copied.size) == (
        "4",
        b"k",
        b"abc",
        9,
        3,
    )


async def test_a_result_and_its_records_go_with_their_last_reference() -> None:
    """No reference cycle keeps a fetch alive until the collector runs (which ``samzapy run``
    runs rarely): half-read or whole, a result goes when the fetcher drops it."""
    subscription = SubscriptionState()
    subscription.assign_from_user({TP})
    assignment = subscription.subscription.assignment
    assignment.state_value(TP).seek(0)
    fetcher = type("Fetcher", (), {})()
    fetcher._records = collections.OrderedDict()
    consumer = type("Consumer", (), {"_fetcher": fetcher})()
    assert build_envelopes(consumer, {TP: SSP})
    gc.disable()
    try:
        for take in (1, None):
            assignment.state_value(TP).seek(0)
            data = RECORD_SETS["plain"][0]
            records = PartitionRecords(TP, MemoryRecords(data), [], 0, None, None, True, 0)
            fetcher._records[TP] = FetchResult(
                TP, assignment=assignment, partition_records=records, backoff=0
            )
            assert fetcher._records[TP].getall(take)
            gone = weakref.ref(fetcher._records[TP]), weakref.ref(records)
            del fetcher._records[TP], records
            assert [ref() for ref in gone] == [None, None]
    finally:
        gc.enable()
