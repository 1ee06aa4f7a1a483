"""stores.<name>.factory: short names, import paths, and the errors naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.api.system import TaskName
from samzapy.storage.inmemory import InMemoryStorageEngine, InMemoryStoreFactory
from samzapy.storage.registry import open_store, store_factory_for
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
    engine, store = open_store(
        "counts", TaskName("Partition 3"), tmp_path / "d", options, StringSerde(), JsonSerde()
    )
    store.put("a", {"n": 1})
    assert store.get("a") == {"n": 1}
    assert isinstance(engine, InMemoryStorageEngine) and store.engine is engine
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
