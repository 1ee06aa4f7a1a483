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
from samzapy.storage.cached import CachedStorageEngine
from samzapy.storage.inmemory import InMemoryStoreFactory
from samzapy.storage.logged import DEFAULT_DEDUP_BYTES, ChangelogSender, LoggedStorageEngine
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
    here, past the changelog and the cache), the store the task gets, and its write cache
    (None without ``object.cache.size``), and the changelog's side."""

    engine: StorageEngine
    store: SerializedKeyValueStore[Any, Any]
    cache: CachedStorageEngine | None = None
    #: The changelog's side (None without a changelog): its records wait there for the commit.
    logged: LoggedStorageEngine | None = None


#: The store option bounding the changelog records that wait for the commit, in bytes.
DEDUP_OPTION = "changelog.dedup.max.bytes"


def cache_sizes(store_name: str, options: Mapping[str, Any]) -> tuple[int, int]:
    """``object.cache.size`` and ``write.batch.size`` of a store's ``options`` (0, 0: no
    cache); the batch size defaults to the cache size and may not exceed it."""
    size = _count(store_name, options, "object.cache.size", 0)
    batch = _count(store_name, options, "write.batch.size", 1)
    if batch > size:
        key = f"stores.{store_name}.write.batch.size"
        raise ConfigError(
            f"{key} must be at most stores.{store_name}.object.cache.size ({size}), got "
            f"{batch}: the writes waiting to be written back live in the cache",
            key=key,
        )
    return size, batch or size


def _count(store_name: str, options: Mapping[str, Any], name: str, least: int) -> int:
    key = f"stores.{store_name}.{name}"
    value = options.get(name)
    if value is None:
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if type(value) is not int or value < least:
        raise ConfigError(f"{key} must be an integer >= {least}, got {value!r}", key=key)
    return value


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
    check it): the engine ``options["factory"]`` builds, told whether it is logged; with a
    ``changelog``, every write is also sent there, each key once per commit (``logged.py``,
    up to ``changelog.dedup.max.bytes`` waiting); with ``object.cache.size``, a write cache
    in front of both (``storage/cached.py``); the serdes on top.

    ``options`` are the store's keys with the ``stores.<name>.`` prefix removed.
    """
    factory = store_factory_for(store_name, options.get("factory"))
    size, batch = cache_sizes(store_name, options)
    engine = factory.create(store_name, task_name, directory, options, logged=changelog is not None)
    logged = None
    if changelog is not None:
        dedup = options.get(DEDUP_OPTION)
        logged = LoggedStorageEngine(
            engine,
            changelog,
            dedup_bytes=DEFAULT_DEDUP_BYTES
            if dedup is None
            else _count(store_name, options, DEDUP_OPTION, 0),
        )
    top: StorageEngine = logged or engine
    cache = CachedStorageEngine(top, size, batch) if size else None
    return OpenStore(
        engine, SerializedKeyValueStore(cache or top, key_serde, msg_serde), cache, logged
    )


__all__ = [
    "BUILTIN_FACTORIES",
    "OpenStore",
    "cache_sizes",
    "factory_key",
    "open_store",
    "store_factory_for",
]
