"""The framed record format of intermediate (and ``samza.framed``) streams, Samza's in-band
control messages:

    IntermediateMessage => MessageType MessageData
      MessageType => one byte: 0 user message, 1 watermark, 2 end-of-stream
      MessageData => the user serde's bytes, or for a control message the UTF-8 JSON object
                     {"version": 1, "taskName": str, "taskCount": int[, "timestamp": int ms]}

A record whose value is null (a Kafka tombstone) is a user message whose body is None. The
functions here are pure and shared by the container and by writers in other runtimes
(``samzapy.spark``), so both sides speak exactly one format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

USER_MESSAGE = 0
WATERMARK = 1
END_OF_STREAM = 2

#: The control-message version this code writes and reads.
VERSION = 1

_USER_PREFIX = bytes([USER_MESSAGE])


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
    event time up to ``timestamp`` (milliseconds since the epoch)."""

    task_name: str
    task_count: int
    timestamp: int


ControlMessage = EndOfStreamMessage | WatermarkMessage


def frame(payload: bytes) -> bytes:
    """The framed record of a user message whose serialized body is ``payload``."""
    return _USER_PREFIX + payload


def encode_control(message: ControlMessage) -> bytes:
    """The framed record of a control message."""
    body: dict[str, Any] = {
        "version": VERSION,
        "taskName": message.task_name,
        "taskCount": message.task_count,
    }
    if isinstance(message, WatermarkMessage):
        body["timestamp"] = message.timestamp
        kind = WATERMARK
    else:
        kind = END_OF_STREAM
    return bytes([kind]) + json.dumps(body, separators=(",", ":")).encode()


def decode(record: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """``(USER_MESSAGE, payload bytes)`` or ``(WATERMARK | END_OF_STREAM, ControlMessage)``;
    FrameError says what is wrong with the record."""
    if not isinstance(record, bytes | bytearray | memoryview):
        raise FrameError(f"a framed record must be bytes, got {type(record).__name__}")
    if not record:
        raise FrameError("an empty record has no type byte")
    kind = record[0]
    if kind == USER_MESSAGE:
        return USER_MESSAGE, bytes(record[1:])
    if kind not in (WATERMARK, END_OF_STREAM):
        raise FrameError(
            f"unknown type byte {kind} (expected {USER_MESSAGE} user message, {WATERMARK} "
            f"watermark or {END_OF_STREAM} end-of-stream)"
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
        return kind, EndOfStreamMessage(task_name, task_count)
    timestamp = body.get("timestamp")
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise FrameError(f"the watermark message needs an integer timestamp, got {body!r}")
    return kind, WatermarkMessage(task_name, task_count, timestamp)


__all__ = [
    "END_OF_STREAM",
    "USER_MESSAGE",
    "VERSION",
    "WATERMARK",
    "ControlMessage",
    "EndOfStreamMessage",
    "FrameError",
    "WatermarkMessage",
    "decode",
    "encode_control",
    "frame",
]
