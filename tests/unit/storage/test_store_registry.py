"""stores.<name>.factory: short names, import paths, and the errors naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.api.system import TaskName
from samzapy.storage.inmemory import InMemoryStorageEngine, InMemoryStoreFactory
from samzapy.storage.registry import OpenStore, open_store, store_factory_for
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.system.serde import JsonSerde, StringSerde

KEY = r"stores\.counts\.factory"
CUSTOM = """
from samzapy.storage.inmemory import InMemoryStorageEngine
from samzapy.storage.ports import StoreFactory

class RecordingFactory(StoreFactory):
    calls = []

    def create(self, store_name, task_name, directory, options, *, logged=False):
        RecordingFactory.calls.append((store_name, task_name, directory, dict(options)))
        return InMemoryStorageEngine(store_name, task_name)

class NeedsArguments(StoreFactory):
    def __init__(self, size):
        self.size = size

    def create(self, store_name, task_name, directory, options, *, logged=False):
        raise AssertionError("not reached")

class NotAFactory:
    pass
"""


@pytest.fixture
def custom_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "custom_store_factories_zz.py").write_text(CUSTOM)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "custom_store_factories_zz"


def test_short_names() -> None:
    assert type(store_factory_for("counts", "inmemory")) is InMemoryStoreFactory
    assert type(store_factory_for("counts", " rocksdb ")) is RocksDBStoreFactory
    assert store_factory_for("counts", "rocksdb").persistent is True
    assert store_factory_for("counts", "inmemory").persistent is False


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (None, rf"^{KEY} is required for store 'counts': expected rocksdb, inmemory or"),
        ("  ", rf"^{KEY} is required for store 'counts'"),
        (5, rf"^{KEY} must be rocksdb, inmemory or a 'module:Class' import path, got 5 \(int\)"),
        ("rocks", rf"^{KEY}: unknown store factory 'rocks': expected rocksdb, inmemory or"),
        (
            "no_such_module_zz:Factory",
            rf"^{KEY}: cannot import module 'no_such_module_zz' \(from 'no_such_module_zz",
        ),
        (
            "samzapy.storage.inmemory:InMemoryStorageEngine",
            rf"^{KEY}: 'samzapy.storage.inmemory:InMemoryStorageEngine' is not a "
            r"samzapy.storage.ports.StoreFactory subclass",
        ),
    ],
)
def test_bad_factories_name_the_key(factory: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        store_factory_for("counts", factory)
    assert caught.value.key == "stores.counts.factory"


def test_import_path_factory_gets_the_store_task_directory_and_options(
    custom_module: str, tmp_path: Path
) -> None:
    options = {"factory": f"{custom_module}:RecordingFactory", "key.serde": "string"}
    engine, store, cache, _, buffer = open_store(
        "counts", TaskName("Partition 3"), tmp_path / "d", options, StringSerde(), JsonSerde()
    )
    assert cache is None, "no read cache without object.cache.size"
    assert buffer is not None and buffer.max_bytes == 1 << 20, "a write buffer by default"
    store.put("a", {"n": 1})
    assert store.get("a") == {"n": 1}
    assert isinstance(engine, InMemoryStorageEngine) and store.engine is buffer
    assert buffer.inner is engine
    module = __import__(custom_module)
    assert module.RecordingFactory.calls == [("counts", "Partition 3", tmp_path / "d", options)]


def test_import_path_errors(custom_module: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{KEY}: '{custom_module}:NotAFactory' is not a"):
        store_factory_for("counts", f"{custom_module}:NotAFactory")
    with pytest.raises(
        ConfigError,
        match=rf"^{KEY}: creating '{custom_module}.NeedsArguments' with no arguments failed",
    ):
        store_factory_for("counts", f"{custom_module}.NeedsArguments")


def test_open_store_without_factory_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^{KEY} is required"):
        open_store("counts", TaskName("t"), tmp_path, {}, StringSerde(), JsonSerde())


def logged_store(
    tmp_path: Path, options: dict[str, Any], sent: list[tuple[bytes, bytes | None]]
) -> OpenStore:
    """Store ``counts`` of task ``t`` with ``options``, its changelog records in ``sent``."""
    return open_store(
        "counts",
        TaskName("t"),
        tmp_path,
        options,
        StringSerde(),
        JsonSerde(),
        changelog=lambda key, value: sent.append((key, value)),
    )


def test_a_read_cache_sits_between_the_write_buffer_and_the_changelog(tmp_path: Path) -> None:
    sent: list[tuple[bytes, bytes | None]] = []
    options = {"factory": "inmemory", "object.cache.size": 2, "write.batch.size": 4}
    engine, store, cache, logged, buffer = logged_store(tmp_path, options, sent)
    assert buffer is not None and store.engine is buffer and buffer.max_entries == 4
    assert cache is not None and buffer.inner is cache and cache.inner is logged
    for n in range(3):
        store.put("a", n)
    assert sent == [] and engine.get(b"a") is None and store.get("a") == 2
    assert cache.size == 0, "a key waiting in the buffer is read from there"
    store.put("b", 1)
    store.put("c", 1)
    store.put("d", 1)  # the fourth key waiting: all written back, each key once
    assert engine.get(b"a") == b"2" and buffer.pending == 0
    assert sent == [(b"a", b"2"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")]
    assert cache.size == 2  # the last two written: c and d
    assert store.get("d") == 1 and store.get("a") == 2
    assert (cache.hits, cache.misses) == (1, 1)


def test_the_buffer_lets_each_key_through_once_per_commit_within_its_byte_bound(
    tmp_path: Path,
) -> None:
    sent: list[tuple[bytes, bytes | None]] = []
    options = {"factory": "inmemory", "write.buffer.max.bytes": 12}
    engine, store, cache, logged, buffer = logged_store(tmp_path, options, sent)
    assert cache is None and logged is not None and buffer is not None
    for n in range(5):
        store.put("a", n)  # 1 + 1 bytes waiting, however often
    store.delete("b")  # 1 more
    assert sent == [] and engine.get(b"a") is None and store.get("a") == 4
    assert store.get("b") is None
    assert buffer.write_back() == 2
    assert sent == [(b"a", b"4"), (b"b", None)] and engine.get(b"a") == b"4"
    for key in ("k1", "k2", "k3", "k4", "k5"):  # 3 bytes each: the fifth passes 12
        store.put(key, 0)
    assert sent[2:] == [(b"k1", b"0"), (b"k2", b"0"), (b"k3", b"0"), (b"k4", b"0"), (b"k5", b"0")]
    assert buffer.pending == 0 and engine.get(b"k5") == b"0"
    assert len(sent) == 7  # for 11 writes


def test_sizes_given_as_text_are_read_as_the_configurations_check_reads_them(
    tmp_path: Path,
) -> None:
    # `samzapy validate` takes "+10" for an integer key: so does the store.
    options = {"factory": "inmemory", "write.buffer.max.bytes": "+7", "write.batch.size": " 2"}
    buffer = logged_store(tmp_path, options, []).buffer
    assert buffer is not None and buffer.max_bytes == 7


def test_the_former_name_of_the_byte_bound_still_counts(tmp_path: Path) -> None:
    options = {"factory": "inmemory", "changelog.dedup.max.bytes": 7}
    buffer = logged_store(tmp_path, options, []).buffer
    assert buffer is not None and buffer.max_bytes == 7


def test_a_buffer_bound_of_0_writes_and_sends_every_write_as_it_happens(tmp_path: Path) -> None:
    sent: list[tuple[bytes, bytes | None]] = []
    options = {"factory": "inmemory", "write.buffer.max.bytes": 0}
    engine, store, _, _, buffer = logged_store(tmp_path, options, sent)
    assert buffer is None
    store.put("a", 1)
    store.put("a", 2)
    assert sent == [(b"a", b"1"), (b"a", b"2")] and engine.get(b"a") == b"2"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"object.cache.size": -1},
            r"^stores\.counts\.object\.cache\.size must be an integer >= 0, got -1$",
        ),
        (
            {"object.cache.size": 10, "write.batch.size": 0},
            r"^stores\.counts\.write\.batch\.size must be an integer >= 1, got 0$",
        ),
        (
            {"write.buffer.max.bytes": "1MB"},
            r"^stores\.counts\.write\.buffer\.max\.bytes must be an integer >= 0, got '1MB'$",
        ),
    ],
)
def test_cache_and_buffer_sizes_are_checked_naming_the_key(
    tmp_path: Path, options: dict[str, int], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(
            "counts",
            TaskName("t"),
            tmp_path,
            {"factory": "inmemory", **options},
            StringSerde(),
            JsonSerde(),
        )
