"""The in-memory engine's lazily sorted key list against a plain model, through every fold path."""

from __future__ import annotations

import random

import pytest

from samzapy.api.system import TaskName
from samzapy.storage.inmemory import InMemoryStorageEngine


def model_range(model: dict[bytes, bytes], low: bytes | None, high: bytes | None) -> list[bytes]:
    return sorted(
        key for key in model if (low is None or key >= low) and (high is None or key < high)
    )


@pytest.mark.parametrize("burst", [1, 5, 40, 500])  # below and above the fold threshold
def test_matches_a_sorted_model_under_random_writes(burst: int) -> None:
    rng = random.Random(burst)
    engine = InMemoryStorageEngine("s", TaskName("t"))
    model: dict[bytes, bytes] = {}
    universe = [bytes([rng.randrange(256) for _ in range(rng.randrange(0, 4))]) for _ in range(800)]
    for _ in range(60):
        for _ in range(burst):
            key = rng.choice(universe)
            if rng.random() < 0.35:
                engine.delete(key)
                model.pop(key, None)
            else:
                value = bytes([rng.randrange(256)])
                engine.put(key, value)
                model[key] = value
        low, high = sorted(rng.sample(universe, 2))
        got = list(engine.iterate(low, high))
        assert [key for key, _ in got] == model_range(model, low, high)
        assert all(model[key] == value for key, value in got)
        assert [key for key, _ in engine.iterate(None, None)] == model_range(model, None, None)
    assert len(engine) == len(model)


def test_delete_then_put_again_is_indexed_once() -> None:
    engine = InMemoryStorageEngine("s", TaskName("t"))
    engine.put(b"a", b"1")
    engine.put(b"b", b"1")
    assert [k for k, _ in engine.iterate(None, None)] == [b"a", b"b"]
    engine.delete(b"a")
    engine.put(b"a", b"2")
    engine.put(b"c", b"3")
    engine.delete(b"c")
    assert list(engine.iterate(None, None)) == [(b"a", b"2"), (b"b", b"1")]


def test_iterator_skips_keys_deleted_after_it_was_created() -> None:
    engine = InMemoryStorageEngine("s", TaskName("t"))
    engine.write_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    iterator = engine.iterate(None, None)
    assert next(iterator) == (b"a", b"1")
    engine.delete(b"b")
    engine.put(b"c", b"33")
    engine.put(b"bb", b"new")
    assert list(iterator) == [(b"c", b"33")]


def test_close_empties_the_engine() -> None:
    engine = InMemoryStorageEngine("s", TaskName("t"))
    engine.put(b"a", b"1")
    engine.flush()
    engine.close()
    engine.close()
    assert engine.get(b"a") is None
    assert list(engine.iterate(None, None)) == []
