"""Building the StoreFactory that ``stores.<name>.factory`` names, and a store from its parts.

Short names: ``inmemory`` (InMemoryStoreFactory) and ``rocksdb`` (RocksDBStoreFactory,
imported only when named, so a job without RocksDB stores never loads rocksdict). Anything else
is the import path (``module:Class`` or ``module.Class``) of a StoreFactory subclass, built
with no arguments. Every error is a ConfigError naming ``stores.<name>.factory``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from samzapy.api.errors import ConfigError
from samzapy.api.system import TaskName
from samzapy.config.classes import create
from samzapy.config.schema import to_int
from samzapy.storage.buffered import DEFAULT_BUFFER_BYTES, BufferedStorageEngine
from samzapy.storage.cached import CachedStorageEngine
from samzapy.storage.inmemory import InMemoryStoreFactory
from samzapy.storage.logged import ChangelogSender, LoggedStorageEngine
from samzapy.storage.ports import StorageEngine, StoreFactory
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import Serde


def factory_key(store_name: str) -> str:
    """``stores.<name>.factory``."""
    return f"stores.{store_name}.factory"


def _rocksdb_factory(key: str) -> StoreFactory:
    # Imported by name: storage/rocksdb is an adapter, above the core storage package.
    try:
        module = importlib.import_module("samzapy.storage.rocksdb")
    except ImportError as exc:
        raise ConfigError(
            f"{key} is 'rocksdb' but RocksDB support cannot be loaded ({exc}); "
            "install the rocksdict package",
            key=key,
        ) from exc
    factory: StoreFactory = module.RocksDBStoreFactory()
    return factory


BUILTIN_FACTORIES: Mapping[str, Callable[[str], StoreFactory]] = {
    "inmemory": lambda key: InMemoryStoreFactory(),
    "rocksdb": _rocksdb_factory,
}


def store_factory_for(store_name: str, factory: Any) -> StoreFactory:
    """The StoreFactory that ``stores.<store_name>.factory`` = ``factory`` names."""
    key = factory_key(store_name)
    if factory is None or (isinstance(factory, str) and not factory.strip()):
        raise ConfigError(
            f"{key} is required for store {store_name!r}: expected rocksdb, inmemory or a "
            "'module:Class' import path of a samzapy.storage.ports.StoreFactory",
            key=key,
        )
    if not isinstance(factory, str):
        raise ConfigError(
            f"{key} must be rocksdb, inmemory or a 'module:Class' import path, "
            f"got {factory!r} ({type(factory).__name__})",
            key=key,
        )
    name = factory.strip()
    builtin = BUILTIN_FACTORIES.get(name)
    if builtin is not None:
        return builtin(key)
    if ":" not in name and "." not in name:
        raise ConfigError(
            f"{key}: unknown store factory {factory!r}: expected rocksdb, inmemory or a "
            "'module:Class' import path",
            key=key,
        )
    store_factory: StoreFactory = create(
        name, key=key, base=StoreFactory, what="a samzapy.storage.ports.StoreFactory subclass"
    )
    return store_factory


class OpenStore(NamedTuple):
    """A store as ``open_store`` assembled it: the engine the factory built (restores write
    here, past the changelog, the buffer and the cache), the store the task gets, its read
    cache (None without ``object.cache.size``), the changelog's side (None without a
    changelog) and its write buffer (None with ``write.buffer.max.bytes: 0``)."""

    engine: StorageEngine
    store: SerializedKeyValueStore[Any, Any]
    cache: CachedStorageEngine | None = None
    logged: LoggedStorageEngine | None = None
    buffer: BufferedStorageEngine | None = None


#: The store option bounding the write buffer, in bytes of keys and values.
BUFFER_OPTION = "write.buffer.max.bytes"
#: Its former name (when it bounded only the changelog records waiting), still read.
FORMER_BUFFER_OPTION = "changelog.dedup.max.bytes"


def buffer_bounds(store_name: str, options: Mapping[str, Any]) -> tuple[int, int]:
    """The write buffer's bounds from a store's ``options``: bytes of keys and values
    (``write.buffer.max.bytes``, 0: no buffer) and keys (``write.batch.size``, 0: none)."""
    name = BUFFER_OPTION if options.get(BUFFER_OPTION) is not None else FORMER_BUFFER_OPTION
    size = DEFAULT_BUFFER_BYTES
    if options.get(name) is not None:
        size = _count(store_name, options, name, 0)
    return size, _count(store_name, options, "write.batch.size", 1)


def _count(store_name: str, options: Mapping[str, Any], name: str, least: int) -> int:
    key = f"stores.{store_name}.{name}"
    value = options.get(name)
    if value is None:
        return 0
    number = to_int(value)  # as the configuration's check reads it ("+10" too)
    if number is None or number < least:
        raise ConfigError(f"{key} must be an integer >= {least}, got {value!r}", key=key)
    return number


def open_store(
    store_name: str,
    task_name: TaskName,
    directory: Path,
    options: Mapping[str, Any],
    key_serde: Serde,
    msg_serde: Serde,
    *,
    changelog: ChangelogSender | None = None,
) -> OpenStore:
    """One task's store, assembled as the container runs it (and the store contract tests
    check it), from the bottom up: the engine ``options["factory"]`` builds, told whether it
    is logged; with a ``changelog``, every write that reaches the engine is also sent there
    (``logged.py``); with ``object.cache.size``, a read cache of what the engine holds
    (``cached.py``); the write buffer, which lets each key through once per commit
    (``buffered.py``, up to ``write.buffer.max.bytes``); the serdes on top.

    ``options`` are the store's keys with the ``stores.<name>.`` prefix removed.
    """
    factory = store_factory_for(store_name, options.get("factory"))
    size = _count(store_name, options, "object.cache.size", 0)
    buffer_bytes, buffer_keys = buffer_bounds(store_name, options)
    engine = factory.create(store_name, task_name, directory, options, logged=changelog is not None)
    logged = None if changelog is None else LoggedStorageEngine(engine, changelog)
    top: StorageEngine = logged or engine
    cache = CachedStorageEngine(top, size) if size else None
    top = top if cache is None else cache
    buffer = BufferedStorageEngine(top, buffer_bytes, buffer_keys) if buffer_bytes else None
    store: SerializedKeyValueStore[Any, Any] = SerializedKeyValueStore(
        top if buffer is None else buffer, key_serde, msg_serde
    )
    return OpenStore(engine, store, cache, logged, buffer)


__all__ = [
    "BUILTIN_FACTORIES",
    "OpenStore",
    "buffer_bounds",
    "factory_key",
    "open_store",
    "store_factory_for",
]
