"""Serdes: turning keys and messages into bytes and back, and the registry that names them.

Built-in serdes, by the names a job's config uses (``serializers.registry.<name>.class`` adds
more, or replaces a built-in):

- ``string``: ``str`` <-> UTF-8 bytes.
- ``json``: any JSON value <-> compact UTF-8 JSON (no spaces, no NaN, non-ASCII kept as is).
- ``bytes``: bytes-like <-> ``bytes`` unchanged.
- ``integer``: ``int`` <-> 4 bytes big-endian signed (Samza's IntegerSerde).
- ``long``: ``int`` <-> 8 bytes big-endian signed (Samza's LongSerde).
- ``double``: ``float`` <-> 8 bytes big-endian IEEE 754 (Samza's DoubleSerde).
- ``byte`` and ``bytebuffer``: Samza's names of ``bytes`` (its ByteSerde and ByteBufferSerde
  write the bytes as they are).
- ``none``: objects pass through untouched (the memory system carries objects, not bytes).

``to_bytes`` and ``from_bytes`` run once per message, so each is a single call on the fast
path; input of the wrong type raises SerdeError naming the serde, what it expects and what
it got.

A serde's ``identity_types`` are the exact types whose distinct values it writes as distinct
bytes that read back as themselves: a table's cache uses such a key as its own identity,
instead of its bytes (``samzapy.api.keys``). A serde without it costs a cache a
serialization per look-up.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from samzapy.api.errors import ConfigError, SerdeError
from samzapy.config.classes import create


@runtime_checkable
class Serde(Protocol):
    """Serializes one kind of object to bytes and back."""

    def to_bytes(self, obj: Any) -> bytes: ...

    def from_bytes(self, data: bytes) -> Any: ...


def _describe(obj: Any) -> str:
    text = repr(obj)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(obj).__name__})"


class StringSerde:
    """``str`` <-> UTF-8 bytes."""

    identity_types: tuple[type, ...] = (str,)

    def to_bytes(self, obj: Any) -> bytes:
        try:
            return obj.encode("utf-8")  # type: ignore[no-any-return]
        except AttributeError:
            raise SerdeError(f"string serde expects a str, got {_describe(obj)}") from None
        except UnicodeEncodeError as exc:
            raise SerdeError(f"string serde cannot encode {_describe(obj)}: {exc}") from exc

    def from_bytes(self, data: bytes) -> Any:
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise SerdeError(f"string serde expects UTF-8 bytes, got {_describe(data)}") from exc
        except TypeError:
            raise SerdeError(f"string serde expects bytes, got {_describe(data)}") from None


def _json_encoder() -> Callable[[Any, int], Any]:
    """``(obj, 0) -> chunks`` of compact JSON (no spaces, no NaN, non-ASCII kept): the C encoder
    ``json.dumps`` makes afresh on every call (which cost three times the encoding of a
    100-byte object), made once, without a check for circular references (a cycle raises
    RecursionError instead). json's own encoder where its C accelerator is missing."""
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return lambda obj, level: (encoder.encode(obj),)
    return make(  # type: ignore[no-any-return]
        None,
        encoder.default,
        json.encoder.encode_basestring,
        None,
        encoder.key_separator,
        encoder.item_separator,
        False,
        False,
        False,
    )


class JsonSerde:
    """Any JSON value <-> compact UTF-8 JSON; ``from_bytes`` also accepts ``str``."""

    identity_types: tuple[type, ...] = (str, int)

    def __init__(self) -> None:
        #: ``(obj, 0) -> chunks`` of its JSON text (0: the indentation level).
        self._encode = _json_encoder()
        self._decode: Callable[[str | bytes | bytearray], Any] = json.loads
        decoder = json.JSONDecoder()
        #: ``(str, index) -> (value, end)``: what ``JSONDecoder.decode`` runs after matching
        #: whitespace around it with regular expressions, which cost as much again.
        self._scan: Callable[[str, int], tuple[Any, int]] = decoder.scan_once  # type: ignore[attr-defined]

    def to_bytes(self, obj: Any) -> bytes:
        try:
            return "".join(self._encode(obj, 0)).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SerdeError(f"json serde cannot encode {_describe(obj)}: {exc}") from exc
        except UnicodeEncodeError as exc:  # lone surrogates in a str
            raise SerdeError(f"json serde cannot encode {_describe(obj)}: {exc}") from exc
        except RecursionError as exc:
            raise SerdeError(
                f"json serde cannot encode {_describe(obj)}: it refers to itself, or nests too deep"
            ) from exc

    def from_bytes(self, data: bytes | bytearray | str) -> Any:
        if type(data) is bytes:
            # UTF-8 decoded by hand and scanned from its first character: json.loads detects
            # the encoding of bytes and matches whitespace around the value first, which more
            # than doubles the cost of a small message. Anything else (whitespace around the
            # value, a BOM, UTF-16, invalid UTF-8, invalid JSON) takes json.loads' own path,
            # errors included.
            try:
                text = data.decode()
                value, end = self._scan(text, 0)
                if end == len(text):
                    return value
            except (ValueError, StopIteration):
                pass
        try:
            return self._decode(data)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise SerdeError(f"json serde cannot decode {_describe(data)}: {exc}") from exc
        except TypeError:
            if isinstance(data, memoryview):
                return self.from_bytes(data.tobytes())
            raise SerdeError(f"json serde expects bytes or str, got {_describe(data)}") from None


class BytesSerde:
    """Bytes-like objects <-> ``bytes``, unchanged."""

    identity_types: tuple[type, ...] = (bytes,)

    def to_bytes(self, obj: Any) -> bytes:
        if type(obj) is bytes:
            return obj
        if isinstance(obj, bytes | bytearray | memoryview):
            return bytes(obj)
        raise SerdeError(
            f"bytes serde expects bytes, bytearray or memoryview, got {_describe(obj)}"
        )

    def from_bytes(self, data: bytes) -> Any:
        return data


class _StructSerde:
    """A fixed-width big-endian number: a signed integer, or an IEEE 754 double."""

    _name = ""
    _struct = struct.Struct(">i")

    def __init__(self) -> None:
        self._pack = self._struct.pack
        self._unpack = self._struct.unpack
        bits = self._struct.size * 8
        self._expects = f"an int in [-2**{bits - 1}, 2**{bits - 1})"

    def to_bytes(self, obj: Any) -> bytes:
        try:
            return self._pack(obj)
        except (struct.error, OverflowError):
            raise SerdeError(
                f"{self._name} serde expects {self._expects}, got {_describe(obj)}"
            ) from None

    def from_bytes(self, data: bytes) -> Any:
        try:
            return self._unpack(data)[0]
        except (struct.error, TypeError):
            raise SerdeError(
                f"{self._name} serde expects exactly {self._struct.size} bytes, "
                f"got {_describe(data)}"
            ) from None


class IntegerSerde(_StructSerde):
    """``int`` <-> 4 bytes big-endian signed."""

    identity_types: tuple[type, ...] = (int,)

    _name = "integer"
    _struct = struct.Struct(">i")


class LongSerde(_StructSerde):
    """``int`` <-> 8 bytes big-endian signed."""

    identity_types: tuple[type, ...] = (int,)

    _name = "long"
    _struct = struct.Struct(">q")


class DoubleSerde(_StructSerde):
    """``float`` <-> 8 bytes big-endian IEEE 754 (NaN and infinities included)."""

    _name = "double"
    _struct = struct.Struct(">d")

    def __init__(self) -> None:
        super().__init__()
        self._expects = "a float (or an int)"


class NoneSerde:
    """Pass-through: objects stay objects (for systems that carry objects, like memory)."""

    def to_bytes(self, obj: Any) -> Any:
        return obj

    def from_bytes(self, data: Any) -> Any:
        return data


BUILTIN_SERDES: Mapping[str, Callable[[], Serde]] = {
    "string": StringSerde,
    "json": JsonSerde,
    "bytes": BytesSerde,
    "integer": IntegerSerde,
    "long": LongSerde,
    "double": DoubleSerde,
    "byte": BytesSerde,  # Samza's names of bytes as they are
    "bytebuffer": BytesSerde,
    "none": NoneSerde,
}

#: Samza's serde factories (``serializers.registry.<name>.class``), by the built-in each is.
SAMZA_SERDE_FACTORIES: Mapping[str, str] = {
    f"org.apache.samza.serializers.{java}SerdeFactory": name
    for java, name in (
        ("Json", "json"),
        ("String", "string"),
        ("Integer", "integer"),
        ("Long", "long"),
        ("Double", "double"),
        ("Byte", "byte"),
        ("ByteBuffer", "bytebuffer"),
    )
}
_SAMZA_SERDES = "org.apache.samza.serializers."


class SerdeRegistry:
    """Resolves serde names to (cached) instances: job-defined classes first, then built-ins.

    ``custom`` maps a serde name to a ``module:Class`` (or dotted) path, as configured with
    ``serializers.registry.<name>.class``; the class is instantiated with no arguments. An
    application's descriptors may register serde objects under a name instead of a path.
    """

    def __init__(self, custom: Mapping[str, Any] | None = None) -> None:
        self._custom: dict[str, str] = {}
        self._instances: dict[str, Serde] = {}
        for name, path in (custom or {}).items():
            if isinstance(path, str):
                self._custom[name] = path
            else:  # a serde object an application's descriptor gave
                self._instances[name] = path

    def get(self, name: str | None) -> Serde:
        """The serde called ``name``; None means the pass-through ``none`` serde."""
        if name is None:
            name = "none"
        serde = self._instances.get(name)
        if serde is None:
            serde = self._create(name)
            self._instances[name] = serde
        return serde

    def _create(self, name: str) -> Serde:
        key = f"serializers.registry.{name}.class"
        path = self._custom.get(name)
        if path is None:
            builtin = BUILTIN_SERDES.get(name)
            if builtin is None:
                known = ", ".join(sorted({*BUILTIN_SERDES, *self._custom}))
                raise ConfigError(
                    f"unknown serde {name!r}: set {key} to a 'module:Class' path, "
                    f"or use one of: {known}",
                    key=key,
                )
            return builtin()
        if path in SAMZA_SERDE_FACTORIES:  # a Samza job's registration: the same serde
            return BUILTIN_SERDES[SAMZA_SERDE_FACTORIES[path]]()
        if path.startswith(_SAMZA_SERDES):
            raise ConfigError(
                f"{key}: {path!r} is a Samza serde samzapy has no counterpart of; samzapy's "
                f"built-in serdes: {', '.join(BUILTIN_SERDES)}; or give a 'module:Class' path "
                "of your own",
                key=key,
            )
        serde = create(path, key=key)
        if not callable(getattr(serde, "to_bytes", None)) or not callable(
            getattr(serde, "from_bytes", None)
        ):
            raise ConfigError(
                f"{key}: {path!r} is not a serde: expected to_bytes and from_bytes methods",
                key=key,
            )
        return serde  # type: ignore[no-any-return]


__all__ = [
    "BUILTIN_SERDES",
    "BytesSerde",
    "DoubleSerde",
    "IntegerSerde",
    "JsonSerde",
    "LongSerde",
    "NoneSerde",
    "SAMZA_SERDE_FACTORIES",
    "Serde",
    "SerdeRegistry",
    "StringSerde",
]
