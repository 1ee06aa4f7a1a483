"""What the kafka consumer's fetcher fetched, made into samzapy's envelopes a record batch at a
time (the input's hot path).

aiokafka's fetcher keeps, per partition, a ``FetchResult`` over a ``PartitionRecords``: a
generator that builds a ConsumerRecord per message, which ``getall`` takes one ``next`` at a
time, and which the consumer would then copy into an envelope. Here the fetcher's table of
results (``_Prefetched``) puts each new result over ``_EnvelopeRecords``, which decodes a
whole record batch into envelopes in one loop, and gives it a ``getall`` that hands them out
in slices: one object per message, no generator step or call per message. A changelog's reader
(``SystemConsumer.read_entries``) gets ``_EntryRecords`` instead, which makes each record a
(key, value) tuple and keeps its offset as an integer (``EntryBatch``): a fourth of the
envelope's cost.

The records are read by aiokafka's rules: CRCs checked when ``check_crcs`` is on, control
batches (transaction markers) skipped, and, read committed, the batches of aborted
transactions skipped (``_skipped``); records before the fetch position (compacted message
sets) are dropped, and the position moves past every batch read, whatever it held.

This reaches into aiokafka's fetcher; ``build_envelopes`` checks that it is as expected and
otherwise leaves it alone, and ``envelopes`` then copies aiokafka's records instead.
"""

from __future__ import annotations

import collections
import types
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

from aiokafka.consumer.fetcher import READ_COMMITTED, FetchResult, PartitionRecords
from aiokafka.errors import CorruptRecordException

from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord
from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.entries import Entry, EntryBatch, IntegerOffsets

_new = object.__new__

#: What ``_EnvelopeRecords`` uses of aiokafka's PartitionRecords: attributes and methods.
_RECORDS_FIELDS = (
    "_records",
    "_check_crcs",
    "_isolation_level",
    "_aborted_producers",
    "_tp",
    "next_fetch_offset",
)
_RECORDS_METHODS = ("_consume_aborted_up_to", "_contains_abort_marker")
#: What ``_getall`` uses of aiokafka's FetchResult.
_RESULT_FIELDS = ("_topic_partition", "_partition_records")
_RESULT_METHODS = ("check_assignment", "has_more", "_update_position")


class _BatchRecords(PartitionRecords):  # type: ignore[misc]
    """aiokafka's records of one fetched partition, read a record batch at a time by aiokafka's
    rules (the attributes are set by ``_Prefetched``)."""

    def _next_batch(self) -> Any:
        """The next record batch that may hold messages (None: none is left); the position
        moves past the ones that cannot."""
        records = self._records
        while records.has_next():
            batch = records.next_batch()
            if self._check_crcs and not batch.validate_crc():
                raise CorruptRecordException(f"Invalid CRC - {self._tp}")
            if not self._skipped(batch):
                return batch
            self.next_fetch_offset = batch.next_offset
        return None

    def _skipped(self, batch: Any) -> bool:
        """Whether ``batch`` holds no messages to read: a control batch (a transaction
        marker), or, read committed, a batch of a transaction that was aborted."""
        if self._isolation_level == READ_COMMITTED and batch.producer_id is not None:
            self._consume_aborted_up_to(batch.base_offset)
            if batch.is_control_batch and self._contains_abort_marker(batch):
                # The abort marker ends the aborted transaction of its producer.
                self._aborted_producers.discard(batch.producer_id)
            if batch.is_transactional and batch.producer_id in self._aborted_producers:
                return True
        return bool(batch.is_control_batch)

    # What a subclass decodes (``_decode_next``): the last record batch's records, handed
    # out from ``_at`` on, and the offset after that batch.
    _ready: list[Any]
    _at: int
    _ready_end: int

    def _decode_next(self) -> bool:
        """Decode the next record batch that holds messages into ``_ready``; False when
        none is left."""
        raise NotImplementedError

    def _offset_after(self, index: int) -> int:
        """The offset after ``_ready[index]``."""
        raise NotImplementedError

    def _slices(self, limit: int | None) -> Iterator[tuple[list[Any], int, int]]:
        """The next ``limit`` records (None: every one left) as slices of the decoded
        batches, ``(records, start, end)``, in offset order; the fetch position moves past
        each slice (past its whole batch once that is taken) before it is handed out."""
        taken = 0
        while limit is None or taken < limit:
            ready, at = self._ready, self._at
            if at >= len(ready):
                if not self._decode_next():
                    return
                continue
            end = len(ready) if limit is None else min(len(ready), at + limit - taken)
            self._at = end
            taken += end - at
            if end == len(ready):
                self.next_fetch_offset = self._ready_end
            else:
                self.next_fetch_offset = self._offset_after(end - 1)
            yield ready, at, end

    @property
    def exhausted(self) -> bool:
        return self._at >= len(self._ready) and not self._records.has_next()


class _EnvelopeRecords(_BatchRecords):
    """The records decoded into envelopes of ``_ssp`` a record batch at a time."""

    _ssp: SystemStreamPartition
    _ready: list[IncomingMessageEnvelope]
    #: Keep each record as read on its envelope (``raw``: a dead-letter stream).
    _keep_raw: bool

    def take(self, limit: int | None) -> list[IncomingMessageEnvelope]:
        """Up to ``limit`` envelopes (None: every one left), in offset order; the fetch
        position moves past them (past their whole batch once it is taken)."""
        out: list[IncomingMessageEnvelope] = []
        for ready, at, end in self._slices(limit):
            if at == 0 and end == len(ready) and not out:
                out = ready  # the whole batch: no copy (a new list is decoded next)
            else:
                out += ready[at:end]
        return out

    def _offset_after(self, index: int) -> int:
        return int(self._ready[index].offset) + 1

    def __next__(self) -> IncomingMessageEnvelope:
        taken = self.take(1)
        if not taken:
            raise StopIteration
        return taken[0]

    def _decode_next(self) -> bool:
        """Decode the next record batch that holds messages; False when none is left."""
        while (batch := self._next_batch()) is not None:
            start, ssp = self.next_fetch_offset, self._ssp
            ready: list[IncomingMessageEnvelope] = []
            append = ready.append
            kept = [r for r in batch if r.offset >= start] if self._keep_raw else None
            for record in batch if kept is None else kept:
                offset = record.offset
                if offset < start:
                    continue
                # The fields set here rather than through __init__: a call less per message.
                envelope: IncomingMessageEnvelope = _new(IncomingMessageEnvelope)
                envelope.system_stream_partition = ssp
                envelope.offset = str(offset)
                envelope.key = record.key
                envelope.message = value = record.value
                envelope.timestamp = record.timestamp
                envelope.size = 0 if value is None else len(value)
                envelope.origin = None
                append(envelope)
            if kept is not None:  # a dead-letter stream: the records as read, too
                for envelope, record in zip(ready, kept, strict=True):
                    headers = tuple((n, bytes(v)) for n, v in record.headers or ())
                    envelope.raw = RawRecord(record.key, record.value, headers)
            if not ready:
                self.next_fetch_offset = batch.next_offset
                continue
            self._ready, self._at, self._ready_end = ready, 0, batch.next_offset
            return True
        return False


class _EntryRecords(_BatchRecords):
    """The records decoded into store entries (``EntryBatch``) a record batch at a time:
    a changelog's reader (restore, standby) needs nothing else of them."""

    _ready: list[Entry]
    #: The offsets of ``_ready``'s entries.
    _ready_offsets: list[int]

    def take(self, limit: int | None) -> EntryBatch:
        """Up to ``limit`` entries (None: every one left), in offset order; the fetch
        position moves past them (past their whole batch once it is taken)."""
        entries: list[Entry] = []
        offsets: list[int] = []
        for ready, at, end in self._slices(limit):
            if at == 0 and end == len(ready) and not entries:
                entries, offsets = ready, self._ready_offsets  # no copy: new lists come next
            else:
                entries += ready[at:end]
                offsets += self._ready_offsets[at:end]
        return EntryBatch(entries, IntegerOffsets(offsets))

    def _offset_after(self, index: int) -> int:
        return self._ready_offsets[index] + 1

    def __next__(self) -> EntryBatch:
        taken = self.take(1)
        if not taken:
            raise StopIteration
        return taken

    def _decode_next(self) -> bool:
        """Decode the next record batch that holds messages; False when none is left."""
        while (batch := self._next_batch()) is not None:
            start = self.next_fetch_offset
            offsets: list[int] = []
            keep = offsets.append
            # One pass (a record batch can be read once): ``keep`` returns None, so every
            # record at or past the position is kept with its offset. A compacted batch has
            # gaps in its offsets, and a fetch can begin inside a batch.
            # A record without a key cannot be a store entry: refused, as ``record_bytes``
            # refuses it on the envelope path.
            ready = [
                (k if (k := r.key) is not None else _keyless(self._tp, r), r.value)
                for r in batch
                if (o := r.offset) >= start and not keep(o)
            ]
            if not ready:
                self.next_fetch_offset = batch.next_offset
                continue
            self._ready, self._ready_offsets = ready, offsets
            self._at, self._ready_end = 0, batch.next_offset
            return True
        return False


def _keyless(tp: Any, record: Any) -> NoReturn:
    """Raises the error of a changelog record without a key (a record written to the
    changelog by something other than its store)."""
    raise StoreError(
        f"the changelog record at offset {record.offset} of {tp.topic}#{tp.partition} has no "
        "key: a changelog's records must have bytes keys (was the topic written by something "
        "other than its store?)"
    )


def _getall(
    result: Any, max_records: int | None = None
) -> list[IncomingMessageEnvelope] | EntryBatch:
    """``FetchResult.getall`` of a result over ``_EnvelopeRecords`` or ``_EntryRecords``:
    its envelopes, or entries, in slices. (Set on the result itself: the fetcher tells
    results from errors by their exact type.)"""
    if not result.check_assignment(result._topic_partition) or not result.has_more():
        return []
    records: _EnvelopeRecords | _EntryRecords = result._partition_records
    envelopes = records.take(max_records)
    result._update_position()
    if records.exhausted:
        result._partition_records = None
    return envelopes


class _Prefetched(collections.OrderedDict[Any, Any]):
    """aiokafka's fetcher's results by partition (its ``_records``), which turns the results
    of the partitions of ``ssp_of`` into results over ``_EnvelopeRecords`` (or, with
    ``entries``, ``_EntryRecords``) as they arrive."""

    def __init__(
        self, ssp_of: Mapping[Any, SystemStreamPartition], keep_raw: bool, entries: bool
    ) -> None:
        super().__init__()
        self._ssp_of = ssp_of
        self._keep_raw = keep_raw
        self._entries = entries
        #: Whether the first result had every field used (None: none seen yet).
        self._as_expected: bool | None = None

    def __setitem__(self, tp: Any, result: Any) -> None:
        if type(result) is FetchResult:
            records: Any = getattr(result, "_partition_records", None)
            ssp = self._ssp_of.get(tp)
            if self._as_expected is None and type(records) is PartitionRecords:
                self._as_expected = all(hasattr(records, f) for f in _RECORDS_FIELDS) and all(
                    hasattr(result, f) for f in _RESULT_FIELDS
                )
            if ssp is not None and self._as_expected and type(records) is PartitionRecords:
                records._ready, records._at, records._ready_end = [], 0, 0
                if self._entries:
                    records.__class__ = _EntryRecords
                    records._ready_offsets = []
                else:
                    records.__class__ = _EnvelopeRecords
                    records._ssp = ssp
                    records._keep_raw = self._keep_raw
                # Neither may hold a cycle: a result in one waits for the collector with its
                # whole fetch (megabytes) rather than going with its last reference.
                # aiokafka's generator holds its records (unused here: ``take`` decodes).
                records._records_iterator = None
                result.getall = types.MethodType(_getall, weakref.proxy(result))
        super().__setitem__(tp, result)


def build_envelopes(
    consumer: Any,
    ssp_of: Mapping[Any, SystemStreamPartition],
    keep_raw: bool = False,
    *,
    entries: bool = False,
) -> bool:
    """Have ``consumer``'s fetcher build envelopes (see the module docstring), with each
    record as read in ``raw`` when ``keep_raw``, or, with ``entries``, ``EntryBatch``es;
    False when the fetcher is not as expected (``envelopes`` then copies aiokafka's
    records)."""
    fetcher = getattr(consumer, "_fetcher", None)
    records = getattr(fetcher, "_records", None)
    if type(records) is not collections.OrderedDict or records:
        return False
    methods = [(PartitionRecords, m) for m in _RECORDS_METHODS]
    methods += [(FetchResult, m) for m in _RESULT_METHODS]
    if not all(callable(getattr(cls, name, None)) for cls, name in methods):
        return False
    fetcher._records = _Prefetched(ssp_of, keep_raw, entries)  # type: ignore[union-attr]
    return True


def envelopes(
    ssp: SystemStreamPartition, records: list[Any], keep_raw: bool = False
) -> list[IncomingMessageEnvelope]:
    """Envelopes of aiokafka's ConsumerRecords (what ``_EnvelopeRecords`` did not build),
    with each record as read in ``raw`` when ``keep_raw``."""
    if records and type(records[0]) is IncomingMessageEnvelope:
        return records
    envelope = IncomingMessageEnvelope
    built = [
        envelope(
            ssp,
            str(r.offset),
            r.key,
            (value := r.value),
            r.timestamp,
            0 if value is None else len(value),
        )
        for r in records
    ]
    if keep_raw:
        for env, r in zip(built, records, strict=True):
            headers = tuple((n, bytes(v)) for n, v in r.headers or ())
            env.raw = RawRecord(r.key, r.value, headers)
    return built


__all__ = ["build_envelopes", "envelopes"]
