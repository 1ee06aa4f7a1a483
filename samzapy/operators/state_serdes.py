"""The serdes of the state windows and joins keep in their stores: ``StateSerde``, the default
(read back by the same job only), or a serde the job names or gives, checked to give bytes.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.storage.serialized import to_bytes_checked
from samzapy.system.serde import SerdeRegistry

_STR, _INT, _PICKLE = 0x73, 0x69, 0x70  # b"s", b"i", b"p"
_INT_MIN, _INT_MAX = -(2**63), 2**63


class StateSerde:
    """The default serde of a window's keys and values (its state is read back by the same
    job only): a type byte, then a ``str``'s UTF-8, an ``int``'s 8 bytes, or anything else
    pickled. The common keys and counts skip pickle, which costs a microsecond a message."""

    def to_bytes(self, obj: Any) -> bytes:
        kind = type(obj)
        if kind is str:
            text: str = obj
            return b"s" + text.encode()
        if kind is int and _INT_MIN <= obj < _INT_MAX:
            number: int = obj
            return b"i" + number.to_bytes(8, "big", signed=True)
        return b"p" + pickle.dumps(obj, 5)

    def from_bytes(self, data: bytes) -> Any:
        kind = data[0]
        if kind == _STR:
            return data[1:].decode()
        if kind == _INT:
            return int.from_bytes(data[1:], "big", signed=True)
        return pickle.loads(data[1:])


class GivesBytes:
    """A serde of the job's own, its ``to_bytes`` checked to give bytes (a window's state is
    kept as bytes): a failure names the serde, not the store's internal ``bytes`` serde."""

    __slots__ = ("from_bytes", "to_bytes")

    def __init__(self, serde: Any) -> None:
        self.to_bytes = to_bytes_checked(serde)
        self.from_bytes = serde.from_bytes


def state_serde(serde: Any, config: Mapping[str, Any]) -> Any:
    """A serde setting as an object: a name through the registry (the job's custom serdes
    included), an object as it is (a job's own checked, ``GivesBytes``), None as
    ``StateSerde``."""
    if serde is None:
        return StateSerde()
    if isinstance(serde, str):
        prefix, suffix = "serializers.registry.", ".class"
        custom = {
            k[len(prefix) : -len(suffix)]: v
            for k, v in config.items()
            if k.startswith(prefix) and k.endswith(suffix)
        }
        serde = SerdeRegistry(custom).get(serde)
    if not (
        callable(getattr(serde, "to_bytes", None)) and callable(getattr(serde, "from_bytes", None))
    ):
        raise ConfigError(f"a serde needs to_bytes and from_bytes methods, got {serde!r}")
    return GivesBytes(serde)


__all__ = ["GivesBytes", "StateSerde", "state_serde"]
