"""The serdes a TestRunner gives an application's declared outputs: checked, not applied.

The runner's streams carry objects, so that a test reads its outputs as the application
wrote them. A message or key that the output's serde in the job refuses would then pass the
test and fail the job, and a key would be partitioned by its text rather than by the bytes
the job sends (a ``json`` key ``"a"`` is the four bytes ``"a"``, quotes included), landing
on another partition than the job's. So each declared output's serdes are replaced:

- a ``Checked`` message serde serializes every message as the job would (a refusal fails the
  test with the job's error) and passes the object on;
- a ``CheckedKey`` key serde serializes every key as the job would and returns the bytes as
  a ``SerializedKey``, which the router partitions by (the job's partition) and which
  still holds the object: the runner's result reads the object back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from samzapy.api.descriptors import OutputDescriptor, StreamDescriptor
from samzapy.api.errors import SerdeError
from samzapy.api.system import SystemStream
from samzapy.config import ResolvedConfig
from samzapy.system.serde import Serde, SerdeRegistry


class Checked:
    """``serde``'s ``to_bytes`` run for its errors; the object itself goes on."""

    def __init__(self, serde: Serde) -> None:
        self.serde = serde

    def to_bytes(self, obj: Any) -> Any:
        serialized_bytes(self.serde, obj)
        return obj

    def from_bytes(self, data: Any) -> Any:
        return data


class SerializedKey(bytes):
    """A key's bytes as the job's key serde makes them, with the key itself (``key``)."""

    key: Any


def original_key(key: Any) -> Any:
    """The object a ``SerializedKey`` was made of; any other key as it is."""
    return key.key if type(key) is SerializedKey else key


class CheckedKey:
    """``serde``'s ``to_bytes`` run on each key: its bytes, holding the key itself."""

    def __init__(self, serde: Serde) -> None:
        self.serde = serde

    def to_bytes(self, obj: Any) -> SerializedKey:
        serialized = SerializedKey(serialized_bytes(self.serde, obj))
        serialized.key = obj
        return serialized

    def from_bytes(self, data: Any) -> Any:
        return original_key(data)


def serialized_bytes(serde: Serde, obj: Any) -> bytes | bytearray | memoryview:
    """``serde.to_bytes(obj)``, which must be bytes: the job's Kafka and file systems refuse
    anything else (the runner's memory system would carry it)."""
    data = serde.to_bytes(obj)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SerdeError(
            f"the serde {type(serde).__name__} made {type(data).__name__} of {obj!r:.80}, "
            "not bytes: to_bytes must return bytes (the job's systems refuse anything else)"
        )
    return data


def checked_output_serdes(
    resolved: ResolvedConfig, descriptors: Iterable[StreamDescriptor]
) -> dict[str, Any]:
    """The keys that give each declared output (an ``OutputDescriptor``) a ``Checked``
    message serde and a ``CheckedKey`` key serde in place of the ones ``resolved`` (the
    job's config, on the runner's systems) gives it; a serde that is ``none`` stays."""
    registry = SerdeRegistry(resolved.serializers)
    keys: dict[str, Any] = {}
    for descriptor in descriptors:
        if not isinstance(descriptor, OutputDescriptor):
            continue
        stream_id = descriptor.stream_id
        entry = resolved.streams.get(stream_id)
        system = (entry.system if entry is not None else None) or descriptor.system_name
        name = entry.physical_name if entry is not None else descriptor.physical_name
        stream = resolved.stream(SystemStream(system, name))
        for which, serde, wrap in (
            ("msg", stream.msg_serde, Checked),
            ("key", stream.key_serde, CheckedKey),
        ):
            if serde in (None, "none"):
                continue
            checked = f"samzapy-test-checked-{which}-{stream_id}"
            keys[f"serializers.registry.{checked}.class"] = wrap(registry.get(serde))
            keys[f"streams.{stream_id}.samza.{which}.serde"] = checked
    return keys


__all__ = [
    "Checked",
    "CheckedKey",
    "SerializedKey",
    "checked_output_serdes",
    "original_key",
    "serialized_bytes",
]
