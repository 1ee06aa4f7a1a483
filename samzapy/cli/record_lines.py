"""A record of a stream as one JSON line, decoded as the container decodes it (``samzapy tail``).

``describe`` takes a record as read (raw key and message) and applies what the job applies:
first the frame of an intermediate or ``samza.framed`` stream (``samzapy.control.wire``),
then the stream's key and message serdes. It never raises for a record it cannot decode: the
line says what failed and carries the bytes in hex. The lines:

    {"stream", "partition", "offset", "timestamp", "key", "value"[, "origin"]}
    {"stream", "partition", "offset", "timestamp", "control": "end-of-stream", "task", "task_count"}
    {..., "control": "watermark", "task", "task_count", "watermark"}
    {"stream", "partition", "offset", "timestamp"[, "key"], "error", "hex"}

``stream`` is ``system.stream``, ``timestamp`` in ms or null, ``origin`` the writer's
position of a type-3, 4 or 5 record (source hex, epoch, offset, ordinal[, floor]). Bytes
that no serde decodes print as text when they are UTF-8, else as ``{"hex": ...}``.
"""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.cli.process import reader_gone
from samzapy.container.consumers import InputSerdes
from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    ControlMessage,
    FrameError,
    WatermarkMessage,
    decode,
    decode_origin,
)
from samzapy.system.serde import Serde


class Printer:
    """Writes JSON lines to ``stream``, at most ``limit`` (None: no limit), flushing each
    batch (a BrokenPipeError goes to the caller)."""

    def __init__(self, stream: TextIO, limit: int | None = None) -> None:
        self._stream = stream
        self.left = limit

    def check_reader(self) -> None:
        """BrokenPipeError if the stream is a pipe whose reader is gone, with nothing to write
        (``tail --follow | head``, once head has its lines and the stream is quiet)."""
        if reader_gone(self._stream):
            raise BrokenPipeError(errno.EPIPE, "the reader of the output closed the pipe")

    @property
    def full(self) -> bool:
        return self.left is not None and self.left <= 0

    def print(self, lines: Iterable[Mapping[str, Any]]) -> None:
        texts = []
        for line in lines:
            if self.full:
                break
            texts.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")))
            if self.left is not None:
                self.left -= 1
        if texts:
            self._stream.write("\n".join(texts) + "\n")
            self._stream.flush()


class _UndecodableError(Exception):
    """The ``what`` of a record (its frame, key or message) did not decode."""

    def __init__(self, what: str, cause: Exception) -> None:
        super().__init__(what)
        self.what, self.cause = what, cause


def describe(envelope: IncomingMessageEnvelope, serdes: InputSerdes) -> dict[str, Any]:
    """The JSON line of one record as read (raw key and message), decoded as the container
    decodes it: frame first, then serdes. Never raises for a record it cannot decode."""
    ssp = envelope.system_stream_partition
    timestamp = envelope.timestamp
    line: dict[str, Any] = {
        "stream": f"{ssp.system}.{ssp.stream}",
        "partition": ssp.partition,
        "offset": int(envelope.offset) if envelope.offset.isdigit() else envelope.offset,
        "timestamp": timestamp if isinstance(timestamp, int) and timestamp >= 0 else None,
    }
    raw = envelope.message
    fields: dict[str, Any] = {}
    try:
        body, fields = _unframe(raw) if serdes.framed and raw is not None else (raw, fields)
        if "control" in fields:
            return line | fields
        line["key"] = jsonable(_decoded(serdes.key, envelope.key, "key"))
        line["value"] = jsonable(_decoded(serdes.msg, body, "message"))
    except _UndecodableError as bad:
        # The bytes as read: the key that failed, else the whole record (its frame too).
        data = envelope.key if bad.what == "key" else raw
        return line | fields | {"error": f"{bad.what}: {bad.cause}", "hex": _hex(data)}
    return line | fields


def _unframe(record: Any) -> tuple[Any, dict[str, Any]]:
    """The serialized body of a framed record and the fields its frame adds (``origin``),
    or ``(None, control fields)`` for a control message."""
    try:
        kind, payload = decode(record)
        if kind in (WATERMARK, END_OF_STREAM):
            return None, control_fields(payload)
        if kind == USER_MESSAGE:
            return payload, {}
        return payload, {"origin": decode_origin(record).describe()}
    except FrameError as exc:
        raise _UndecodableError("framed record", exc) from exc


def control_fields(message: ControlMessage) -> dict[str, Any]:
    """The fields of a control message's line."""
    fields: dict[str, Any] = {
        "control": "watermark" if isinstance(message, WatermarkMessage) else "end-of-stream",
        "task": message.task_name,
        "task_count": message.task_count,
    }
    if isinstance(message, WatermarkMessage):
        fields["watermark"] = message.timestamp
    return fields


def _decoded(serde: Serde | None, data: Any, what: str) -> Any:
    if serde is None or data is None:
        return data
    try:
        return serde.from_bytes(data)
    except Exception as exc:  # a serde of the job's: any failure is the record's
        raise _UndecodableError(what, exc) from exc


def jsonable(value: Any) -> Any:
    """``value`` as JSON can carry it: bytes as UTF-8 text or ``{"hex": ...}``, containers
    walked, non-finite floats and other objects as their text."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return {"hex": data.hex()}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def _hex(data: Any) -> str | None:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data).hex()
    return None


__all__ = ["Printer", "control_fields", "describe", "jsonable"]
