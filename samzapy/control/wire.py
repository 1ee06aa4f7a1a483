"""The framed record format of intermediate (and ``samza.framed``) streams, Samza's in-band
control messages:

    IntermediateMessage => MessageType MessageData
      MessageType => one byte: 0 user message, 1 watermark, 2 end-of-stream,
                     3 user message with its origin, 4 user message with its origin and floor,
                     5 user message with its origin in compact form
      MessageData => the user serde's bytes, or for a control message the UTF-8 JSON object
                     {"version": 1, "taskName": str, "taskCount": int[, "timestamp": int ms]
                      [, "idle": true]} ("idle": a watermark message saying the task is idle),
                     or for type 3: Origin, then the user serde's bytes,
                     or for type 4: Origin, Floor, then the user serde's bytes,
                     or for type 5: CompactOrigin, then the user serde's bytes
      Origin => Source Epoch Offset Ordinal
        Source => 8 bytes: the first 8 bytes of the BLAKE2b hash of the UTF-8 text
                  "<job.name>-<job.id>/<task>" NUL "<system>.<stream>.<partition>": the writer
                  and the input partition whose message caused the record
        Epoch => uint32, big-endian: the writer's epoch of that input partition (moves on a
                 reset)
        Offset => uint64: the input message's offset
        Ordinal => uint32: the record's place among the sends that message caused
      Floor => uint64: the offset of the writer's oldest message of that input partition
               still in flight when it sent the record (type 4: a writer with several calls
               in flight, whose records do not reach a partition in position order)
      CompactOrigin => Source Sizes Epoch Offset Ordinal
        Sizes => one byte: how many bytes the three numbers after it take, Offset's in its
                 high four bits (0 to 8), Epoch's in bits 2 and 3 and Ordinal's in bits 0
                 and 1 (0 to 3 each)
        Epoch, Offset, Ordinal => Origin's numbers, each big-endian in as many bytes as Sizes
                 says (none for 0)

    A user message (type 0, 3, 4 or 5) may carry its event time: its type byte has the
    EVENT_TIME flag (0x80) set, and an int64 big-endian EventTime (ms since the epoch)
    follows the type's header (the type byte, Origin or CompactOrigin, Floor), before the
    body. The event time travels in the frame, not in Kafka's record timestamp, so an old
    event time never makes the broker's time-based retention delete an intermediate
    stream's records.

Epoch, Offset and Ordinal together are the record's *position*: in Origin's fixed-size form,
compared as bytes they compare as the tuple of numbers, which is how a reader drops a record
it already applied (``samzapy.control.origins``; a type-5 record's position is read into that
form, ``compact_position``). Type 5 is what writers write: its origin adds 9 bytes to a
record and its numbers' (at most 12 at an offset below 2**24 with epoch and ordinal 0), where
type 3 adds 24, which the clients and the broker pay for with every record. Type 3 is
written when the epoch or the ordinal does not fit in 3 bytes, and by samzapy versions
before type 5; a reader takes both alike. The header of types 3 and 4 is fixed-size (25
bytes, 33 for type 4), so a reader takes it apart with slices.

A record whose value is null (a Kafka tombstone) is a user message whose body is None. The
functions here are pure and shared by the container and by writers in other runtimes
(``samzapy.spark``), so both sides speak exactly one format.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samzapy.api.envelope import speedups

USER_MESSAGE = 0
WATERMARK = 1
END_OF_STREAM = 2
USER_MESSAGE_WITH_ORIGIN = 3
USER_MESSAGE_WITH_FLOOR = 4
USER_MESSAGE_WITH_COMPACT_ORIGIN = 5

#: The bytes of a source, of a position's epoch and of the whole position (epoch, offset 8,
#: ordinal 4), and where the body of a type-3 and a type-4 record starts.
SOURCE_SIZE = 8
EPOCH_SIZE = 4
POSITION_SIZE = EPOCH_SIZE + 8 + 4
ORIGIN_END = 1 + SOURCE_SIZE + POSITION_SIZE
FLOOR_END = ORIGIN_END + 8
#: Where a type-5 record's sizes byte is (its numbers follow it); its epochs and ordinals
#: stay below ``COMPACT_LIMIT`` (3 bytes).
SIZES_AT = 1 + SOURCE_SIZE
COMPACT_LIMIT = 1 << 24

#: A position's offset and ordinal, after the prefix (``origin_prefix``) of its record.
OFFSET_ORDINAL = struct.Struct(">QI")
#: A type-3 record's header: its prefix (``origin_prefix``), offset and ordinal, packed in one
#: call (a third of the time of packing the position and joining it to the prefix).
ORIGIN_HEADER = struct.Struct(f">{1 + SOURCE_SIZE + EPOCH_SIZE}sQI")
_PREFIX_SIZE = 1 + SOURCE_SIZE + EPOCH_SIZE

#: The flag of a user message's type byte when an event time follows its header.
EVENT_TIME = 0x80
#: The timestamp of an idle watermark message whose sender had no watermark yet: below every
#: event time, those before the epoch too (a reader's partition whose tasks are all idle is
#: at the highest of theirs, which this never raises).
NO_WATERMARK = -(2**63)
_TIME = struct.Struct(">q")
#: Where the body starts, by type byte (event time flag included).
_BODY_AT = {
    USER_MESSAGE: 1,
    USER_MESSAGE_WITH_ORIGIN: ORIGIN_END,
    USER_MESSAGE_WITH_FLOOR: FLOOR_END,
    USER_MESSAGE | EVENT_TIME: 1 + 8,
    USER_MESSAGE_WITH_ORIGIN | EVENT_TIME: ORIGIN_END + 8,
    USER_MESSAGE_WITH_FLOOR | EVENT_TIME: FLOOR_END + 8,
}

#: The control-message version this code writes and reads.
VERSION = 1

_USER_PREFIX = bytes([USER_MESSAGE])
_FLOOR_TYPE = bytes([USER_MESSAGE_WITH_FLOOR])
_COMPACT_TYPE = bytes([USER_MESSAGE_WITH_COMPACT_ORIGIN])
_POSITION = struct.Struct(">IQI")
_EPOCH = struct.Struct(">I")
_POSITION_FLOOR_TAIL = struct.Struct(">QIQ")


class FrameError(ValueError):
    """A record that is not a valid framed record (the caller names partition and offset)."""


@dataclass(frozen=True, slots=True)
class EndOfStreamMessage:
    """Upstream task ``task_name`` (one of ``task_count``) will write nothing more."""

    task_name: str
    task_count: int


@dataclass(frozen=True, slots=True)
class WatermarkMessage:
    """Upstream task ``task_name`` (one of ``task_count``) has written everything with an
    event time up to ``timestamp`` (milliseconds since the epoch). ``idle``: the task is idle
    (its inputs had no message for their idle timeout): a reader leaves it out of the partition's
    minimum until it sends a watermark that is not idle (Flink's idle watermark status);
    ``timestamp`` is then its last watermark (``NO_WATERMARK`` when it had none): when every
    task is idle, the partition's watermark is the highest."""

    task_name: str
    task_count: int
    timestamp: int
    idle: bool = False


ControlMessage = EndOfStreamMessage | WatermarkMessage


def frame(payload: bytes) -> bytes:
    """The framed record of a user message whose serialized body is ``payload``."""
    return _USER_PREFIX + payload


def with_event_time(record: bytes, event_time: int) -> bytes:
    """A framed user message (``frame``, ``frame_with_origin``, ``frame_with_floor``,
    ``frame_with_compact_origin``) with ``event_time`` in it (the module docstring)."""
    kind = record[0]
    at = _compact_end(record) if kind == USER_MESSAGE_WITH_COMPACT_ORIGIN else _BODY_AT[kind]
    return bytes([kind | EVENT_TIME]) + record[1:at] + _TIME.pack(event_time) + record[at:]


def source_id(writer: str, input_partition: str) -> bytes:
    """The 8 bytes that name a source in its records (see the module docstring)."""
    return hashlib.blake2b(f"{writer}\0{input_partition}".encode(), digest_size=8).digest()


def origin_prefix(source: bytes, epoch: int) -> bytes:
    """The first bytes of every record a writer sends for messages of one input partition
    in one epoch: type byte, ``source`` (``source_id``) and epoch."""
    return bytes([USER_MESSAGE_WITH_ORIGIN]) + source + _EPOCH.pack(epoch)


def frame_with_origin(prefix: bytes, offset: int, ordinal: int, payload: bytes) -> bytes:
    """The framed record of a user message: ``prefix`` (``origin_prefix``), the input
    message's offset, the send's ordinal, then the serialized body."""
    if len(prefix) != _PREFIX_SIZE:  # struct would pad or cut it without a word
        raise ValueError(f"an origin prefix has {_PREFIX_SIZE} bytes, got {len(prefix)}")
    return ORIGIN_HEADER.pack(prefix, offset, ordinal) + payload


def frame_with_floor(prefix: bytes, offset: int, ordinal: int, floor: int, payload: bytes) -> bytes:
    """``frame_with_origin``, type 4: the writer's ``floor`` after the position
    (``prefix`` from ``origin_prefix``, its type byte replaced here)."""
    return _FLOOR_TYPE + prefix[1:] + _POSITION_FLOOR_TAIL.pack(offset, ordinal, floor) + payload


def frame_with_compact_origin(prefix: bytes, offset: int, ordinal: int, payload: bytes) -> bytes:
    """``frame_with_origin``'s record in compact form (type 5), or that record itself (type 3)
    when the epoch or ``ordinal`` does not fit in 3 bytes."""
    if len(prefix) != _PREFIX_SIZE:
        raise ValueError(f"an origin prefix has {_PREFIX_SIZE} bytes, got {len(prefix)}")
    epoch = int.from_bytes(prefix[SIZES_AT:], "big")
    if not (epoch < COMPACT_LIMIT and 0 <= ordinal < COMPACT_LIMIT and 0 <= offset < 2**64):
        return frame_with_origin(prefix, offset, ordinal, payload)  # struct's errors too
    numbers = [n.to_bytes((n.bit_length() + 7) // 8, "big") for n in (epoch, offset, ordinal)]
    sizes = len(numbers[1]) << 4 | len(numbers[0]) << 2 | len(numbers[2])
    return b"".join((_COMPACT_TYPE, prefix[1:SIZES_AT], bytes([sizes]), *numbers, payload))


def _compact_end(record: bytes | bytearray | memoryview) -> int:
    """Where a type-5 record's body (or event time) starts; FrameError: cut short, mis-sized."""
    if len(record) <= SIZES_AT:
        raise FrameError(
            f"the origin of a user message is cut short: {len(record)} bytes, expected at "
            f"least {SIZES_AT + 1}"
        )
    sizes = record[SIZES_AT]
    offset_size = sizes >> 4
    if offset_size > 8:
        raise FrameError(
            f"the compact origin's sizes byte {sizes:#04x} gives an offset of "
            f"{offset_size} bytes (at most 8)"
        )
    end = SIZES_AT + 1 + (sizes >> 2 & 3) + offset_size + (sizes & 3)
    if len(record) < end:
        raise FrameError(
            f"the origin of a user message is cut short: {len(record)} bytes, expected at "
            f"least {end}"
        )
    return end


def _compact(record: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """``(epoch, offset, ordinal)`` of a type-5 record (FrameError as ``_compact_end``)."""
    _compact_end(record)
    sizes = record[SIZES_AT]
    at = SIZES_AT + 1
    numbers = []
    for size in (sizes >> 2 & 3, sizes >> 4, sizes & 3):
        numbers.append(int.from_bytes(record[at : at + size], "big"))
        at += size
    return numbers[0], numbers[1], numbers[2]


def compact_position(record: bytes | bytearray | memoryview) -> bytes:
    """A type-5 record's position in the fixed-size form (``position``)."""
    return _POSITION.pack(*_compact(record))


def position(epoch: int, offset: int, ordinal: int) -> bytes:
    """A position's bytes (as a type-3 record carries it)."""
    return _POSITION.pack(epoch, offset, ordinal)


def position_numbers(raw: bytes) -> tuple[int, int, int]:
    """``(epoch, offset, ordinal)`` of a position's bytes."""
    epoch, offset, ordinal = _POSITION.unpack(raw)
    return epoch, offset, ordinal


def encode_control(message: ControlMessage) -> bytes:
    """The framed record of a control message."""
    body: dict[str, Any] = {
        "version": VERSION,
        "taskName": message.task_name,
        "taskCount": message.task_count,
    }
    if isinstance(message, WatermarkMessage):
        body["timestamp"] = message.timestamp
        if message.idle:
            body["idle"] = True
        kind = WATERMARK
    else:
        kind = END_OF_STREAM
    return bytes([kind]) + json.dumps(body, separators=(",", ":")).encode()


def decode(record: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """``(USER_MESSAGE | USER_MESSAGE_WITH_ORIGIN | USER_MESSAGE_WITH_FLOOR, payload bytes)``
    (a type-5 record as ``USER_MESSAGE_WITH_ORIGIN``: the same origin in compact form) or
    ``(WATERMARK | END_OF_STREAM, ControlMessage)``; FrameError says what is wrong. The
    origin of a record with one: ``decode_origin``."""
    kind, payload, _ = decode_timed(record)
    return kind, payload


#: What a framed record may be, built once (``bytes | bytearray | memoryview`` written in the
#: check would build a union at every call: half of a decode's time).
_BYTES_LIKE = (bytes, bytearray, memoryview)


def decode_timed(record: bytes | bytearray | memoryview) -> tuple[int, Any, int | None]:
    """``decode``, with a user message's event time (None when it carries none)."""
    if type(record) is not bytes and not isinstance(record, _BYTES_LIKE):
        raise FrameError(f"a framed record must be bytes, got {type(record).__name__}")
    if not record:
        raise FrameError("an empty record has no type byte")
    kind = record[0]
    if kind == USER_MESSAGE:
        return USER_MESSAGE, bytes(record[1:]), None
    end = _BODY_AT.get(kind)
    if end is None and kind & ~EVENT_TIME == USER_MESSAGE_WITH_COMPACT_ORIGIN:
        # A user message with its origin, which a reader takes as type 3's.
        end = _compact_end(record) + (8 if kind & EVENT_TIME else 0)
        if len(record) < end:
            raise FrameError(
                f"the event time of a user message is cut short: {len(record)} bytes, "
                f"expected at least {end}"
            )
        kind = USER_MESSAGE_WITH_ORIGIN | (kind & EVENT_TIME)
    if end is not None:
        if len(record) < end:
            part = "origin" if kind & ~EVENT_TIME else "event time"
            raise FrameError(
                f"the {part} of a user message is cut short: {len(record)} bytes, expected at "
                f"least {end}"
            )
        if kind & EVENT_TIME:
            (event_time,) = _TIME.unpack_from(record, end - 8)
            return kind & ~EVENT_TIME, bytes(record[end:]), event_time
        return kind, bytes(record[end:]), None
    if kind not in (WATERMARK, END_OF_STREAM):
        raise FrameError(
            f"unknown type byte {kind} (expected {USER_MESSAGE} user message, {WATERMARK} "
            f"watermark, {END_OF_STREAM} end-of-stream, {USER_MESSAGE_WITH_ORIGIN} user "
            f"message with its origin, {USER_MESSAGE_WITH_FLOOR} with its origin and floor or "
            f"{USER_MESSAGE_WITH_COMPACT_ORIGIN} with its origin in compact form, each with the "
            f"flag {EVENT_TIME} when an event time follows)"
        )
    what = "watermark" if kind == WATERMARK else "end-of-stream"
    try:
        body = json.loads(bytes(record[1:]))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FrameError(f"the {what} message is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise FrameError(f"the {what} message must be a JSON object, got {body!r}")
    version = body.get("version")
    if type(version) is not int or version != VERSION:
        raise FrameError(
            f"the {what} message has version {version!r}; this samzapy reads version {VERSION}"
        )
    task_name = body.get("taskName")
    task_count = body.get("taskCount")
    if not isinstance(task_name, str) or not task_name:
        raise FrameError(f"the {what} message needs a non-empty string taskName, got {body!r}")
    if not isinstance(task_count, int) or isinstance(task_count, bool) or task_count < 1:
        raise FrameError(f"the {what} message needs an integer taskCount >= 1, got {body!r}")
    if kind == END_OF_STREAM:
        return kind, EndOfStreamMessage(task_name, task_count), None
    timestamp = body.get("timestamp")
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise FrameError(f"the watermark message needs an integer timestamp, got {body!r}")
    idle = body.get("idle", False)
    if not isinstance(idle, bool):
        raise FrameError(f"the watermark message's idle must be true or false, got {body!r}")
    return kind, WatermarkMessage(task_name, task_count, timestamp, idle), None


@dataclass(frozen=True)
class Origin:
    """A type-3, 4 or 5 record's origin, taken apart (for tools and tests: the container
    reads the record's bytes as they are)."""

    source: bytes
    epoch: int
    offset: int
    ordinal: int
    #: Type 4: the writer's floor; None for types 3 and 5.
    floor: int | None
    #: The serialized body.
    message: bytes

    @property
    def position(self) -> bytes:
        return position(self.epoch, self.offset, self.ordinal)

    def describe(self) -> dict[str, Any]:
        """The origin as JSON-friendly fields (for logs and tools)."""
        fields: dict[str, Any] = {
            "source": self.source.hex(),
            "epoch": self.epoch,
            "offset": self.offset,
            "ordinal": self.ordinal,
        }
        if self.floor is not None:
            fields["floor"] = self.floor
        return fields


def decode_origin(record: bytes | bytearray | memoryview) -> Origin:
    """The origin and body of a type-3, 4 or 5 record (FrameError if it is not one)."""
    kind, payload = decode(record)
    if kind not in (USER_MESSAGE_WITH_ORIGIN, USER_MESSAGE_WITH_FLOOR):
        raise FrameError(f"a record of type {kind} has no origin")
    if record[0] & ~EVENT_TIME == USER_MESSAGE_WITH_COMPACT_ORIGIN:
        epoch, offset, ordinal = _compact(record)
    else:
        epoch, offset, ordinal = _POSITION.unpack_from(record, 1 + SOURCE_SIZE)
    floor = None
    if kind == USER_MESSAGE_WITH_FLOOR:
        (floor,) = struct.unpack_from(">Q", record, ORIGIN_END)
    return Origin(bytes(record[1 : 1 + SOURCE_SIZE]), epoch, offset, ordinal, floor, payload)


def accelerated(name: str, state: dict[Any, Any], method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, with its common case in C where ``samzapy._speedups`` was built (and
    ``SAMZAPY_NO_SPEEDUPS`` is unset): its ``name`` (``frame_decoder``, ``origin_tagger``,
    ``origin_admitter``) made of ``state``, the dict the fast path reads (mutated by the
    Python side, never replaced), and ``method``, which takes every other call, so both give
    the same results and errors (tests/unit/control/test_speedups.py). Else ``method``."""
    module = speedups()
    make = getattr(module, name, None)  # None too: an extension built before ``name``
    return method if make is None else make(state, method)


#: ``decode_timed``: what a consumer of a framed stream calls for each record.
decode_timed_fast = accelerated("frame_decoder", _BODY_AT, decode_timed)


__all__ = [
    "COMPACT_LIMIT",
    "END_OF_STREAM",
    "EPOCH_SIZE",
    "EVENT_TIME",
    "FLOOR_END",
    "NO_WATERMARK",
    "OFFSET_ORDINAL",
    "ORIGIN_HEADER",
    "ORIGIN_END",
    "POSITION_SIZE",
    "SIZES_AT",
    "SOURCE_SIZE",
    "USER_MESSAGE",
    "USER_MESSAGE_WITH_COMPACT_ORIGIN",
    "USER_MESSAGE_WITH_FLOOR",
    "USER_MESSAGE_WITH_ORIGIN",
    "VERSION",
    "WATERMARK",
    "ControlMessage",
    "EndOfStreamMessage",
    "FrameError",
    "Origin",
    "WatermarkMessage",
    "accelerated",
    "compact_position",
    "decode",
    "decode_origin",
    "decode_timed",
    "decode_timed_fast",
    "encode_control",
    "frame",
    "frame_with_compact_origin",
    "frame_with_floor",
    "frame_with_origin",
    "origin_prefix",
    "position",
    "position_numbers",
    "source_id",
    "with_event_time",
]
