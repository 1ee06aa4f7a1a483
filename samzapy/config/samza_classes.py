"""Samza's Java factory class names in a job file: each read as the samzapy built-in it is.

A Samza job file names its systems, stores and checkpoint manager by Java class. samzapy
reads those it has a counterpart of as that counterpart's short name, as it does Samza's serde
factories (``system/serde.py``), so the lines work unchanged:

- ``systems.<name>.samza.factory``: ``org.apache.samza.system.kafka.KafkaSystemFactory`` is
  ``kafka``, ``org.apache.samza.system.inmemory.InMemorySystemFactory`` is ``memory``;
- ``stores.<name>.factory``: ``org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory``
  is ``rocksdb``, ``org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory``
  is ``inmemory``;
- ``task.checkpoint.factory``: ``org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory``
  is ``kafka``, ``org.apache.samza.checkpoint.file.FileSystemCheckpointManagerFactory`` is
  ``file``.

Any other ``org.apache.samza.`` class there is a problem naming the key, the class and what to
write instead, rather than an import error of a Python module called ``org``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.config.schema import SAMZA_SYSTEM_FACTORIES, SYSTEM_FACTORIES

#: Samza's store engine factories, by the short name of samzapy's same engine.
SAMZA_STORE_FACTORIES = {
    "org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory": "rocksdb",
    "org.apache.samza.storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory": "inmemory",
}
#: Samza's checkpoint manager factories, by the short name of samzapy's same manager.
SAMZA_CHECKPOINT_FACTORIES = {
    "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory": "kafka",
    "org.apache.samza.checkpoint.file.FileSystemCheckpointManagerFactory": "file",
}
_SAMZA = "org.apache.samza."


def is_samza_class(value: Any) -> bool:
    """Whether ``value`` names one of Samza's own Java classes."""
    return isinstance(value, str) and value.strip().startswith(_SAMZA)


def samza_class_problems(
    values: dict[str, Any], systems: tuple[str, ...], problem: Callable[[str, str], None]
) -> None:
    """Replace in ``values`` (typed keys) each factory key's Samza class name samzapy has a
    counterpart of by its short name; report any other Samza class through ``problem``."""
    keys: list[tuple[str, Mapping[str, str], tuple[str, ...], str]] = [
        ("task.checkpoint.factory", SAMZA_CHECKPOINT_FACTORIES, _CHECKPOINTS, _CHECKPOINT_BASE)
    ]
    keys += [
        (f"systems.{s}.samza.factory", SAMZA_SYSTEM_FACTORIES, SYSTEM_FACTORIES, _SYSTEM)
        for s in systems
    ]
    stores = sorted(
        {k.split(".")[1] for k in values if k.startswith("stores.") and k.count(".") >= 2}
    )
    keys += [(f"stores.{s}.factory", SAMZA_STORE_FACTORIES, _STORES, _STORE_BASE) for s in stores]
    for key, table, short_names, base in keys:
        value = values.get(key)
        if not isinstance(value, str) or not is_samza_class(value):
            continue
        name = value.strip()
        if name in table:
            values[key] = table[name]
            continue
        problem(
            key,
            f"{key}: {name!r} is one of Samza's Java classes, which samzapy has no counterpart "
            f"of: write {', '.join(short_names)} (samzapy's built-ins), or the 'module:Class' "
            f"path of a {base} subclass of your own",
        )


_CHECKPOINTS = ("kafka", "file", "memory", "stream")
_STORES = ("rocksdb", "inmemory")
_SYSTEM = "samzapy.system.ports.SystemFactory"
_STORE_BASE = "samzapy.storage.ports.StoreFactory"
_CHECKPOINT_BASE = "samzapy.checkpoint.ports.CheckpointManager"

__all__ = [
    "SAMZA_CHECKPOINT_FACTORIES",
    "SAMZA_STORE_FACTORIES",
    "is_samza_class",
    "samza_class_problems",
]
