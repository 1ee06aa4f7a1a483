"""Kafka's default key partitioner: a key lands on the same partition whether Kafka's Java
client, Spark or samzapy routed it.

The hash is MurmurHash2 (32-bit) as Kafka's clients compute it: seed ``0x9747b28c``, the
input read as little-endian 4-byte words, the last 1-3 bytes folded in, and the result read
as a signed 32-bit integer, as Java sees it. The partition is that hash with its sign bit
cleared, modulo the partition count.

The hash runs once per keyed output message whose key a route has not seen lately. It is the
``murmurhash2`` package's (compiled, about 0.5 us a key here), a dependency of samzapy; only
where it is not installed after all (``pip install --no-deps``) the Python version below
(about 3.4 us a key) runs instead, whose word loop works on ints unpacked in one ``struct``
call and masks to 32 bits only where the multiplication can overflow.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from samzapy.api.errors import StreamSystemError
from samzapy.system.serde import Serde

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF

# Precompiled unpackers for keys up to 255 bytes; longer keys compile one per call.
_WORD_UNPACKERS = tuple(struct.Struct(f"<{n}I").unpack_from for n in range(64))


def python_murmur2(data: bytes, seed: int) -> int:
    """MurmurHash2 of ``data`` as an unsigned 32-bit int (as ``murmurhash2.murmurhash2``)."""
    length = len(data)
    h = seed ^ length
    words = length >> 2
    if words:
        unpack = _WORD_UNPACKERS[words] if words < 64 else struct.Struct(f"<{words}I").unpack_from
        m = _M
        mask = _MASK32
        for k in unpack(data):
            k = (k * m) & mask
            k ^= k >> 24
            h = ((h * m) & mask) ^ ((k * m) & mask)
    rest = length & 3
    if rest:
        i = length - rest
        if rest == 3:
            h ^= data[i + 2] << 16
        if rest >= 2:
            h ^= data[i + 1] << 8
        h = ((h ^ data[i]) * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    return h ^ (h >> 15)


#: The hash in use, ``(data, seed) -> unsigned 32-bit int``, and whether it is compiled.
hash32: Callable[[bytes, int], int]
try:
    from murmurhash2 import murmurhash2 as hash32

    COMPILED = True
except ImportError:  # installed without its dependencies: the same hash, slower
    hash32 = python_murmur2
    COMPILED = False


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: the hash as a signed 32-bit int, as Java returns it."""
    h = hash32(data if type(data) is bytes else bytes(data), _SEED)
    return h - 0x100000000 if h & 0x80000000 else h


def key_bytes(key: Any, serde: Serde | None) -> bytes:
    """The bytes a key is partitioned by: its serialized form; without a serde, a bytes-like
    key's bytes (what the producer sends) and any other key's text in UTF-8."""
    if serde is not None:
        return serde.to_bytes(key)
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, _BYTES_LIKE):
        return bytes(key)
    return str(key).encode()


#: Built once: ``bytearray | memoryview`` written in the check would build a union each call.
_BYTES_LIKE = (bytearray, memoryview)


def partition_for(key_bytes: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a serialized key."""
    if num_partitions < 1:
        raise StreamSystemError(
            f"cannot partition a key over {num_partitions} partitions: need >= 1"
        )
    if type(key_bytes) is not bytes:
        key_bytes = bytes(key_bytes)
    return (hash32(key_bytes, _SEED) & 0x7FFFFFFF) % num_partitions


__all__ = ["COMPILED", "hash32", "key_bytes", "murmur2", "partition_for", "python_murmur2"]
