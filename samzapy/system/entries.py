"""A partition's records as store entries: what restoring a store or keeping a standby reads.

A changelog's records are replayed into a store as (key, value) pairs, the value None for a
delete; their other fields (timestamps, headers) are never looked at, and each record's offset
only where a read is cut at an end offset. ``EntryBatch`` holds exactly that: the entries,
their offsets as a sequence, and whether the partition's end-of-stream followed them.

Any consumer can return them (``SystemConsumer.poll_entries`` makes them from envelopes); a
consumer that can build them straight from what it fetched skips making an envelope per
record, which costs more than writing the record to RocksDB (the kafka consumer does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StoreError

#: A system's order of offsets (``SystemAdmin.compare_offsets``).
Compare = Callable[[str, str], int]

Entry = tuple[bytes, bytes | None]


class EntryBatch:
    """Records of one partition in offset order: ``entries`` (key, value: None for a
    delete) and ``offsets`` (each entry's offset); ``ended`` when the partition's
    end-of-stream followed the last of them."""

    __slots__ = ("ended", "entries", "offsets")

    def __init__(self, entries: list[Entry], offsets: Sequence[str], ended: bool = False) -> None:
        self.entries = entries
        self.offsets = offsets
        self.ended = ended

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        span = f"{self.offsets[0]}..{self.offsets[-1]}" if self.entries else "empty"
        return f"EntryBatch({len(self.entries)} entries, {span}{', ended' if self.ended else ''})"

    @classmethod
    def of_envelopes(cls, envelopes: list[IncomingMessageEnvelope]) -> EntryBatch:
        """The entries of ``envelopes`` (one partition's, in offset order; an end-of-stream
        can only be the last). Keys and values must be bytes (None: a delete)."""
        ended = bool(envelopes) and envelopes[-1].is_end_of_stream
        records = envelopes[:-1] if ended else envelopes
        entries = [
            (
                key if type(key := e.key) is bytes else record_bytes(key),
                value
                if (value := e.message) is None or type(value) is bytes
                else record_bytes(value),
            )
            for e in records
        ]
        return cls(entries, [e.offset for e in records], ended)

    def split(self, n: int) -> tuple[EntryBatch, EntryBatch]:
        """The first ``n`` entries, and the rest (which keeps ``ended``)."""
        head = EntryBatch(self.entries[:n], self.offsets[:n])
        return head, EntryBatch(self.entries[n:], self.offsets[n:], self.ended)

    def count_before(self, compare: Compare, end: str) -> int:
        """How many entries come before offset ``end`` (``compare``: the system's order,
        ``SystemAdmin.compare_offsets``): one comparison when the last one
        does (the usual batch), a binary search's few otherwise (one per entry would cost
        more than writing it to a store)."""
        offsets = self.offsets
        return count_before(compare, len(offsets), offsets.__getitem__, end)


def count_before(compare: Compare, n: int, offset: Callable[[int], str], end: str) -> int:
    """How many of ``n`` ascending offsets (``offset(i)``, the i-th) come before ``end``
    in the order ``compare``."""
    if n == 0 or compare(offset(n - 1), end) < 0:
        return n
    low, high = 0, n - 1  # offsets below low are before end, those from high on are not
    while low < high:
        mid = (low + high) // 2
        if compare(offset(mid), end) < 0:
            low = mid + 1
        else:
            high = mid
    return low


class IntegerOffsets(Sequence[str]):
    """Offsets kept as integers, read as the strings the ports speak: a consumer whose
    offsets are integers lists them without a string per record."""

    __slots__ = ("_values",)

    def __init__(self, values: list[int]) -> None:
        self._values = values

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> IntegerOffsets: ...
    def __getitem__(self, index: int | slice) -> str | IntegerOffsets:
        if isinstance(index, slice):
            return IntegerOffsets(self._values[index])
        return str(self._values[index])

    def __repr__(self) -> str:
        return f"IntegerOffsets({self._values!r})"


def record_bytes(value: Any) -> bytes:
    """A changelog record's key or value as bytes."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise StoreError(f"changelog records must have bytes keys, got {type(value).__name__}")


__all__ = ["Entry", "EntryBatch", "IntegerOffsets", "count_before", "record_bytes"]
