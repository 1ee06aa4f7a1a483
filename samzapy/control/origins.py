"""Origins: how a reader of an intermediate stream drops what a writer wrote twice.

Under at-least-once a writer task that restarts (after a crash, a move to another container,
or being fenced) replays its inputs from its last checkpoint and sends again what it had
sent since. Every user message a samzapy task writes to a framed stream for an input
message carries its origin (``wire.py``, type 5, or 3): its *source* (writer task, input
partition) and its *position* (the writer's epoch of that partition, the input message's
offset, the send's ordinal among that message's sends).

A reader task keeps, per partition it reads and per source, the highest position it has
applied, checkpointed with its offsets (a commit runs with nothing in flight, so the two
agree), and drops every record at or below it. Within one epoch a source's records reach a
partition in increasing position: the writer reads each input partition in offset order,
sends a message's records in order, and the producer keeps order per partition. A replay
starts again from the writer's checkpoint, below what the reader applied, and climbs the
same positions, so the reader applies exactly what it had not. This holds however the
writer's inputs interleave, as long as the records a writer sends for an input message (and
the partitions they go to) are a function of that message and the writer's restored state.

The epoch makes a reset safe: a writer that re-reads an input partition *on purpose*
(``samza.reset.offset``) or because the partition went back (a recreated topic: the first
offset read is not past the checkpointed one) moves to the next epoch, whose positions are
all above the old ones, so the reader takes its records as new. The epoch is kept in the
writer's checkpoint and derived only from it, so a replay of the same checkpoint derives the
same epoch and is deduplicated like any other.

A writer with several calls in flight (an async task above ``task.max.concurrency`` 1)
sends its calls' records interleaved, so positions do not rise along a partition. Its records
(type 4) also carry its *floor*: the offset of its oldest call of that input partition still
in flight, so every record of an older message was sent before. For such a source the reader
keeps the highest floor it saw and the positions above it that it applied, and drops a record
below the floor or among those: bounded by the calls in flight, and exact for the same reason,
since a replay's floor never claims more than the writer (or its zombie) had completed.

Records without an origin (type 0: written by ``samzapy.spark``, by a window, a watermark
or end-of-stream listener, after an async call completed, or by an older writer) are never
dropped. Bookkeeping per reader partition is bounded by writer tasks x their input
partitions, never by messages.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samzapy.api.system import SystemStreamPartition
from samzapy.control.wire import (
    EPOCH_SIZE,
    EVENT_TIME,
    FLOOR_END,
    OFFSET_ORDINAL,
    ORIGIN_END,
    SOURCE_SIZE,
    USER_MESSAGE_WITH_COMPACT_ORIGIN,
    USER_MESSAGE_WITH_ORIGIN,
    accelerated,
    compact_position,
    frame_with_compact_origin,
    frame_with_floor,
    origin_prefix,
    position,
    position_numbers,
    source_id,
)


class WriterOrigins:
    """The origins one writer task gives the records it sends for its input messages.

    ``writer``, the source's first part, names the job and the task (two jobs writing one
    framed stream are different sources). The epoch of each input partition is settled at
    the first message the task reads from it (``observe``): one at or below the checkpointed
    offset the task resumed after means the partition went back (a reset), and moves it to
    the next epoch, before anything is sent or checkpointed for it."""

    __slots__ = (
        "_carried",
        "_last_prefix",
        "_last_ssp",
        "_prefixes",
        "epochs",
        "tagger",
        "unresolved",
        "writer",
    )

    def __init__(
        self,
        writer: str,
        epochs: Mapping[SystemStreamPartition, int],
        resumed: Mapping[SystemStreamPartition, int] | None = None,
        carried: Mapping[str, int] | None = None,
    ) -> None:
        """``epochs``: each input partition's epoch; ``resumed``: the checkpointed offset of
        the partitions the task resumes after; ``carried``: saved epochs of partitions the
        task no longer reads, kept for when it does again."""
        self.writer = writer
        self.epochs = dict(epochs)
        #: The partitions whose first message was not seen yet, with their resumed offset.
        self.unresolved = dict(resumed or {})
        self._carried = dict(carried or {})
        #: Mutated, never replaced: ``tagger`` reads it.
        self._prefixes: dict[SystemStreamPartition, bytes] = {}
        self._last_ssp: SystemStreamPartition | None = None
        self._last_prefix = b""
        #: ``tag``, its common case in C where samzapy._speedups was built: what senders call.
        self.tagger: Callable[..., bytes] = accelerated("origin_tagger", self._prefixes, self.tag)

    @classmethod
    def starting(
        cls,
        writer: str,
        ssps: Iterable[SystemStreamPartition],
        *,
        saved: Mapping[str, Any] | None,
        checkpointed: Mapping[SystemStreamPartition, str],
        reset: Iterable[SystemStreamPartition] = (),
    ) -> WriterOrigins:
        """The origins of a task starting from its checkpoint: ``saved`` the epochs it
        recorded (``to_json``), ``checkpointed`` its input offsets there, ``reset`` the
        partitions whose checkpointed offsets are ignored (``samza.reset.offset``). An epoch
        never goes back: saved epochs of partitions not read now are carried on."""
        saved = dict(saved or {})
        resetting = set(reset)
        epochs: dict[SystemStreamPartition, int] = {}
        resumed: dict[SystemStreamPartition, int] = {}
        for ssp in ssps:
            epoch = int(saved.pop(str(ssp), 0))
            offset = checkpointed.get(ssp)
            if offset is not None and ssp in resetting:
                epoch += 1  # the partition is read again on purpose: new records
            elif offset is not None and (number := _integer(offset)) is not None:
                resumed[ssp] = number
            epochs[ssp] = epoch
        return cls(writer, epochs, resumed, {k: int(v) for k, v in saved.items()})

    def observe(self, ssp: SystemStreamPartition, offset: str) -> None:
        """The task reads the message at ``offset`` of ``ssp`` (called while ``unresolved``
        is not empty): the first one settles the partition's epoch."""
        resumed = self.unresolved.pop(ssp, None)
        if resumed is None:
            return
        number = _integer(offset)
        if number is not None and number <= resumed:
            # The partition went back past the checkpoint: a reset (a recreated topic).
            self.epochs[ssp] += 1
            self._prefixes.pop(ssp, None)
            self._last_ssp = None

    def tag(
        self,
        ssp: SystemStreamPartition,
        offset: str,
        ordinal: int,
        payload: bytes,
        floor: str | None = None,
    ) -> bytes:
        """The framed record of ``payload``, the ``ordinal``-th send caused by the message at
        ``offset`` of ``ssp``; untagged (type 0) when the offset is not an integer. ``floor``:
        for a writer with several calls in flight, the offset of its oldest message of
        ``ssp`` in flight (type 4)."""
        prefix: bytes | None
        if ssp is self._last_ssp:  # a message's sends, and a partition's, come in runs
            prefix = self._last_prefix
        else:
            prefix = self._prefixes.get(ssp)
            if prefix is not None:
                self._last_ssp, self._last_prefix = ssp, prefix
        if prefix is not None and floor is None:  # the hot path
            try:
                return frame_with_compact_origin(prefix, int(offset), ordinal, payload)
            except (ValueError, struct.error):
                return b"\x00" + payload
        number = _integer(offset)
        if number is None or ssp not in self.epochs:
            return b"\x00" + payload
        if prefix is None:
            prefix = origin_prefix(source_id(self.writer, _name(ssp)), self.epochs[ssp])
            self._prefixes[ssp] = prefix
        if floor is not None:
            return frame_with_floor(prefix, number, ordinal, min(int(floor), number), payload)
        return frame_with_compact_origin(prefix, number, ordinal, payload)

    def to_json(self) -> dict[str, int]:
        epochs = {**self._carried, **{str(ssp): e for ssp, e in self.epochs.items()}}
        return dict(sorted(epochs.items()))


class _Unordered:
    """What a reader applied from one source whose records came out of position order (a
    writer with several calls in flight, type 4): every position at or below ``low``, every
    position below ``floor`` (the epoch, the highest floor seen, ordinal 0), and those in
    ``seen`` (above both)."""

    __slots__ = ("epoch", "floor", "low", "seen")

    def __init__(self, epoch: bytes, low: bytes, floor: bytes, seen: set[bytes]) -> None:
        self.epoch = epoch
        self.low = low
        self.floor = floor
        self.seen = seen

    def applied(self, at: bytes) -> bool:
        return at <= self.low or at < self.floor or at in self.seen

    def prune(self) -> None:
        """Forget the positions the low position or the floor covers."""
        low, floor = self.low, self.floor
        self.seen = {at for at in self.seen if at > low and at >= floor}

    def to_json(self) -> dict[str, Any]:
        self.prune()
        return {
            "low": list(position_numbers(self.low)) if self.low else None,
            "floor": list(position_numbers(self.floor)),
            "seen": sorted(list(position_numbers(at)) for at in self.seen),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Unordered:
        floor = _position(data["floor"])
        low = _position(data["low"]) if data.get("low") is not None else b""
        return cls(floor[:_E], low, floor, {_position(at) for at in data.get("seen") or ()})


#: Positions a source may leave unpruned in ``_Unordered.seen`` between two prunes.
_PRUNE_AT = 256
#: Where a record's position starts, and the size of its epoch.
_S = 1 + SOURCE_SIZE
#: A user message's type, its event-time flag left out.
_TYPE = ~EVENT_TIME & 0xFF
_E = EPOCH_SIZE
#: A position's offset and ordinal at 0, and its ordinal at 0 (after an 8-byte offset).
_NO_OFFSET_ORDINAL = OFFSET_ORDINAL.pack(0, 0)
_NO_ORDINAL = _NO_OFFSET_ORDINAL[8:]


class ReaderOrigins:
    """The positions applied per (partition read, source) of one reader task: per source,
    the highest position (a writer with one call in flight, type 3 or 5: its records rise
    along a partition), or an ``_Unordered`` record of them (type 4)."""

    __slots__ = ("_last_sources", "_last_ssp", "admitter", "applied", "busy", "dropped")

    def __init__(self, ssps: Iterable[SystemStreamPartition]) -> None:
        #: Mutated, never replaced: ``admitter`` reads it.
        self.applied: dict[SystemStreamPartition, dict[bytes, bytes | _Unordered]] = {
            ssp: {} for ssp in ssps
        }
        #: ``admit``, its common case in C where samzapy._speedups was built: what readers call.
        self.admitter: Callable[[SystemStreamPartition, bytes], bool] = accelerated(
            "origin_admitter", self.applied, self.admit
        )
        self.dropped = 0
        self._last_ssp: SystemStreamPartition | None = None
        self._last_sources: dict[bytes, bytes | _Unordered] = {}
        #: A call on the thread pool is running (set by the container, see ``reading``).
        self.busy = False

    def admit(self, ssp: SystemStreamPartition, record: bytes) -> bool:
        """Whether ``record`` (a type-3, 4 or 5 record read from ``ssp``) is new, noting
        it applied; False: a copy of one applied."""
        source = record[1:_S]
        kind = record[0] & _TYPE  # the event-time flag aside
        if kind == USER_MESSAGE_WITH_COMPACT_ORIGIN:  # type 3's, in compact form
            at = compact_position(record)
            kind = USER_MESSAGE_WITH_ORIGIN
        else:
            at = record[_S:ORIGIN_END]
        if ssp is self._last_ssp:  # a partition's records come in runs: skip its hash
            sources = self._last_sources
        else:
            sources = self._last_sources = self.applied[ssp]
            self._last_ssp = ssp
        last = sources.get(source)
        if kind == USER_MESSAGE_WITH_ORIGIN:
            if type(last) is bytes:  # the common case: one call in flight
                if at <= last:
                    self.dropped += 1
                    return False
                sources[source] = at
                return True
            floor = None
        else:
            floor = record[ORIGIN_END:FLOOR_END]
        return self._admit(sources, source, last, at, floor)

    def _admit(
        self,
        sources: dict[bytes, bytes | _Unordered],
        source: bytes,
        last: bytes | _Unordered | None,
        at: bytes,
        floor: bytes | None,
    ) -> bool:
        epoch = at[:_E]
        if last is None or (type(last) is _Unordered and epoch > last.epoch):
            last = None  # the first record of the source, or of its next epoch
        elif type(last) is bytes:
            if epoch > last[:_E]:
                last = None
            else:  # the writer now has several calls in flight (or restarted so)
                last = _Unordered(last[:_E], last, last[:_E] + _NO_OFFSET_ORDINAL, set())
                sources[source] = last
        if last is None:
            if floor is None:
                sources[source] = at
            else:
                sources[source] = _Unordered(epoch, b"", epoch + floor + _NO_ORDINAL, {at})
            return True
        assert isinstance(last, _Unordered)
        if epoch < last.epoch or last.applied(at):
            self.dropped += 1
            return False
        if floor is None:
            # One call in flight: every position below this one was sent before it.
            last.low = at
            last.prune()
            if not last.seen:
                sources[source] = at
            return True
        last.seen.add(at)
        low = epoch + floor + _NO_ORDINAL
        if low > last.floor:
            last.floor = low
        if len(last.seen) > _PRUNE_AT:
            last.prune()
        return True

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {
            str(ssp): {
                source.hex(): (
                    at.to_json() if isinstance(at, _Unordered) else list(position_numbers(at))
                )
                for source, at in sorted(sources.items())
            }
            for ssp, sources in self.applied.items()
            if sources
        }

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Take up what a checkpoint recorded (``to_json``)."""
        for ssp, sources in self.applied.items():
            for source, saved in ((data or {}).get(str(ssp)) or {}).items():
                sources[bytes.fromhex(source)] = (
                    _Unordered.from_json(saved) if isinstance(saved, dict) else _position(saved)
                )


def _position(numbers: Any) -> bytes:
    epoch, offset, ordinal = (int(n) for n in numbers)
    return position(epoch, offset, ordinal)


def _name(ssp: SystemStreamPartition) -> str:
    return f"{ssp.system}.{ssp.stream}.{ssp.partition}"


def _integer(offset: str) -> int | None:
    try:
        number = int(offset)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def spread(offset: str, ordinal: int, partitions: int) -> int | None:
    """The partition of a keyless record with an origin: a function of the origin, spread
    over the partitions (None: let the producer choose, for an offset that is no integer)."""
    try:
        return (int(offset) * 31 + ordinal) % partitions
    except ValueError:
        return None


__all__ = ["ReaderOrigins", "WriterOrigins", "spread"]
