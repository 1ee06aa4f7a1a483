"""Kafka's default partitioner: murmur2 against Kafka's published vectors."""

from __future__ import annotations

import random

import pytest

from samzapy.api.errors import StreamSystemError
from samzapy.system import partitioner
from samzapy.system.partitioner import murmur2, partition_for, python_murmur2

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (apache/kafka).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def reference_murmur2(data: bytes) -> int:
    """MurmurHash2 written as plainly as possible, to cross-check the fast version."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = data[whole:]
    if tail:
        for shift, byte in reversed(list(enumerate(tail))):
            h ^= byte << (8 * shift)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_reference_agrees_with_kafka(data: bytes, expected: int) -> None:
    assert reference_murmur2(data) == expected


def test_matches_the_reference_for_every_length() -> None:
    rng = random.Random(7)
    for length in [*range(0, 80), 255, 256, 257, 1000]:
        data = rng.randbytes(length)
        assert murmur2(data) == reference_murmur2(data), length


def test_the_compiled_hash_is_installed() -> None:
    """``murmurhash2`` is a dependency with wheels for the platforms CI runs on."""
    assert partitioner.COMPILED
    assert partitioner.hash32 is not python_murmur2


def test_the_python_fallback_agrees_with_the_compiled_hash() -> None:
    rng = random.Random(11)
    seed = 0x9747B28C
    for length in [*range(0, 80), 255, 256, 257, 1000]:
        for _ in range(5):
            data = rng.randbytes(length)
            assert python_murmur2(data, seed) == partitioner.hash32(data, seed), length


def test_partition_for_without_the_compiled_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitioner, "hash32", python_murmur2)
    for data, expected in KAFKA_VECTORS:
        assert murmur2(data) == expected
        assert partition_for(bytearray(data), 7) == (expected & 0x7FFFFFFF) % 7


def test_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == -790332482
    assert murmur2(memoryview(b"xfoobar")[1:]) == -790332482
    assert partition_for(bytearray(b"foobar"), 50) == 16
    assert partition_for(memoryview(b"xfoobar")[1:], 50) == 16


def test_partition_is_the_positive_hash_modulo_the_count() -> None:
    # (-790332482 & 0x7fffffff) = 1357151166
    assert partition_for(b"foobar", 50) == 1357151166 % 50 == 16
    assert partition_for(b"foobar", 1) == 0
    assert all(0 <= partition_for(data, 12) < 12 for data, _ in KAFKA_VECTORS)


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(StreamSystemError, match="cannot partition a key over 0 partitions"):
        partition_for(b"k", 0)
