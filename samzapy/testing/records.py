"""A TestRunner's streams through the job's serdes: records written for the messages a test
gives, and the messages read back from the records the job wrote.

A test runs the job with its real config, whose streams may name serdes (``streams.<id>.
samza.msg.serde: json``, or a system's ``samza.msg.serde``), and gives and reads objects:

1. each message given for an input is serialized with the input's message serde, and each
   key with its key serde, so the job deserializes them as it would records from Kafka; a
   message or key the serde cannot write fails the run naming the stream, the partition,
   the message's index and the serde. A message or key that is bytes already (``bytes``,
   ``bytearray``, ``memoryview``) is taken as the record's bytes, as written: the way to give
   a record the job cannot read (to test ``task.drop.deserialization.errors``). ``None`` stays
   ``None`` (no key; a message without a body). A framed or intermediate input's records are
   the test's own, as given;
2. each record read back (``TestResult.outputs``) is deserialized with its stream's serdes
   (an intermediate stream's, framed, by ``framed.py``); records that are not bytes (a
   stream without a serde, or an application's declared output, whose ``Checked`` serdes
   carry objects) are returned as they are.

A message given may be a ``Message``, to give its record a key and a timestamp: the record's
time, from which a stream with ``samza.watermark.lateness.ms`` (a task's ``on_watermark``, an
application's ``with_watermarks``) makes its watermarks.

A stream is the job's input of that name, else the ``streams.<id>`` entry whose physical name
it is, else the runner's ``memory`` system's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samzapy.api.envelope import KV
from samzapy.api.errors import SerdeError
from samzapy.api.system import SystemStream
from samzapy.config import ResolvedConfig
from samzapy.container.serdes import StreamSerdes
from samzapy.container.systems import system_factory
from samzapy.system.serde import Serde
from samzapy.testing.checked_serdes import original_key, serialized_bytes
from samzapy.testing.framed import FramedReader, framed_reader

#: The runner's own system, where a task job's ``add_input`` streams are.
SYSTEM = "memory"

#: What a record is made of: key, message, timestamp (ms since the epoch, or None).
Written = tuple[Any, Any, int | None]

_BYTES = (bytes, bytearray, memoryview)


@dataclass(frozen=True)
class Message:
    """A message given to ``add_input`` with its record's ``key`` and ``timestamp`` (ms since
    the epoch; None: the record has none)."""

    value: Any
    key: Any = None
    timestamp: int | None = None

    def __post_init__(self) -> None:
        if self.timestamp is not None and type(self.timestamp) is not int:
            raise TypeError(
                f"Message timestamp: expected an int of ms since the epoch (or None), got "
                f"{type(self.timestamp).__name__} {self.timestamp!r:.40}"
            )


def given_records(
    config: ResolvedConfig, stream: str, by_partition: Mapping[int, Sequence[Any]]
) -> dict[int, list[Written]]:
    """Step 1: the records of the messages given for input ``stream`` (``{partition:
    [message, KV or Message]}``), serialized as the job's config says."""
    ss = system_stream(config, stream)
    settings = config.stream(ss)
    key_serde, msg_serde = (
        (None, None) if settings.framed or settings.intermediate else _serdes(config, ss)
    )
    records: dict[int, list[Written]] = {}
    for partition, messages in by_partition.items():
        found: list[Written] = []
        for index, item in enumerate(messages):
            key, message, timestamp = _parts(item)
            where = (ss, partition, index)
            key = _written(config, key_serde, key, "key", where)
            found.append((key, _written(config, msg_serde, message, "msg", where), timestamp))
        records[partition] = found
    return records


class PlainReader:
    """Step 2 for a stream whose records are its messages."""

    def __init__(self, key_serde: Serde | None, msg_serde: Serde | None) -> None:
        self._key_serde = key_serde
        self._msg_serde = msg_serde

    def read(self, records: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """The ``(key, message)`` of each record, in order."""
        return [(self._key(key), _read(self._msg_serde, message)) for key, message in records]

    def _key(self, key: Any) -> Any:
        if self._key_serde is None or not isinstance(key, bytes):
            return original_key(key)
        return self._key_serde.from_bytes(key)


def stream_reader(config: ResolvedConfig, stream: str) -> FramedReader | PlainReader:
    """The reader of ``stream``'s records as the messages they hold (step 2)."""
    framed = framed_reader(config, stream)
    if framed is not None:
        return framed
    return PlainReader(*_serdes(config, system_stream(config, stream)))


def system_stream(config: ResolvedConfig, stream: str) -> SystemStream:
    """The system ``stream`` (a physical name in the runner's namespace) is on for the job."""
    for ss in config.task.inputs:
        if ss.stream == stream:
            return ss
    for entry in config.streams.values():
        if entry.physical_name == stream and entry.system is not None:
            return SystemStream(entry.system, stream)
    return SystemStream(SYSTEM, stream)


def _parts(item: Any) -> Written:
    """The key, message and timestamp of a message given."""
    if isinstance(item, Message):
        return item.key, item.value, item.timestamp
    if isinstance(item, KV):
        return item.key, item.value, None
    return None, item, None


def _serdes(config: ResolvedConfig, ss: SystemStream) -> tuple[Serde | None, Serde | None]:
    if ss.system not in config.systems:
        return None, None
    return StreamSerdes(config, {ss.system: system_factory(config, ss.system)}).output(ss)


def _written(
    config: ResolvedConfig,
    serde: Serde | None,
    obj: Any,
    which: str,
    where: tuple[SystemStream, int, int],
) -> Any:
    """``obj`` as the bytes ``serde`` writes (step 1)."""
    if serde is None or obj is None:
        return obj
    if isinstance(obj, _BYTES):
        return bytes(obj)
    try:
        return bytes(serialized_bytes(serde, obj))
    except Exception as exc:
        ss, partition, index = where
        name, key = _serde_name(config, ss, which)
        what = "" if which == "msg" else "the key of "
        raise SerdeError(
            f"add_input({ss.stream!r}): the {name!r} serde ({key}) cannot write {what}message "
            f"{index} of partition {partition} ({obj!r:.60}): {exc}; give objects it can "
            "write, or the record's bytes as bytes"
        ) from exc


def _serde_name(config: ResolvedConfig, ss: SystemStream, which: str) -> tuple[str, str]:
    """The name of ``ss``'s ``which`` (``key``, ``msg``) serde and the key that set it."""
    settings = config.stream(ss)
    own = f"streams.{settings.stream_id}.samza.{which}.serde"
    if config.raw.get(own) is not None:
        return str(config.raw.get(own)), own
    system = f"systems.{ss.system}.samza.{which}.serde"
    name = settings.msg_serde if which == "msg" else settings.key_serde
    return str(name), system


def _read(serde: Serde | None, data: Any) -> Any:
    if serde is None or not isinstance(data, bytes):
        return data
    return serde.from_bytes(data)


__all__ = ["SYSTEM", "Message", "PlainReader", "given_records", "stream_reader", "system_stream"]
