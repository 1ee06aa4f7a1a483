"""A TestResult's view of a framed stream the job reads back: its messages, as sent.

An intermediate stream (a task job's ``add_intermediate``, an application's ``partition_by``
or ``broadcast`` stream) holds framed records: each message serialized behind a type byte and
its origin, with the writers' end-of-stream and watermark control messages among them, and,
after a restart, the copies a replay wrote again (which the job's readers drop by origin).
The result reads it as the job's readers do: control messages and replayed copies left out,
keys and messages deserialized with the stream's serdes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samzapy.config import ResolvedConfig
from samzapy.container.serdes import StreamSerdes
from samzapy.container.systems import system_factory
from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    WATERMARK,
    decode,
    decode_origin,
)
from samzapy.system.serde import Serde


class FramedReader:
    """Reads one framed stream's records as its messages."""

    def __init__(self, key_serde: Serde | None, msg_serde: Serde | None) -> None:
        self._key_serde = key_serde
        self._msg_serde = msg_serde

    def read(self, records: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """The ``(key, message)`` of each user message, each origin once, in order."""
        seen: set[tuple[bytes, bytes]] = set()
        found: list[tuple[Any, Any]] = []
        for key, record in records:
            if record is None:  # a tombstone: a user message without a body
                found.append((self._key(key), None))
                continue
            kind, payload = decode(record)
            if kind in (WATERMARK, END_OF_STREAM):
                continue
            if kind != USER_MESSAGE:
                origin = decode_origin(record)
                if (origin.source, origin.position) in seen:
                    continue  # a replay's copy
                seen.add((origin.source, origin.position))
            serde = self._msg_serde
            found.append((self._key(key), serde.from_bytes(payload) if serde else payload))
        return found

    def _key(self, key: Any) -> Any:
        if key is None or self._key_serde is None:
            return key
        return self._key_serde.from_bytes(key)


def framed_reader(config: ResolvedConfig, stream: str) -> FramedReader | None:
    """The reader of ``stream`` when the job reads it framed (an intermediate or
    ``samza.framed`` input); None for a stream whose records are its messages."""
    for ss in config.task.inputs:
        if ss.stream != stream:
            continue
        settings = config.stream(ss)
        if settings.intermediate or settings.framed:
            serdes = StreamSerdes(config, {ss.system: system_factory(config, ss.system)})
            return FramedReader(*serdes.output(ss))
    return None


__all__ = ["FramedReader", "framed_reader"]
