"""Resolving configured names to classes: system factories by short name or import path.

``systems.<name>.samza.factory`` is a short name (``memory``, ``file``, ``kafka``), Samza's
Java class name of the same system, or the import path of a SystemFactory subclass
(``package.module:Class`` or ``package.module.Class``), loaded by ``samzapy.config.classes``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from samzapy.api.errors import ConfigError
from samzapy.config.classes import load_class
from samzapy.config.schema import SAMZA_SYSTEM_FACTORIES
from samzapy.system.file.factory import FileSystemFactory
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import SystemFactory

_FACTORY_KEY = "systems.<name>.samza.factory"


def _kafka_factory(key: str) -> type[SystemFactory]:
    try:  # the factory's own module: the package's names load lazily, aiokafka with them
        module = importlib.import_module("samzapy.system.kafka.factory")
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing.startswith("samzapy"):
            remedy = "this samzapy build does not include the kafka system yet"
        else:
            remedy = f"install its dependencies (pip install aiokafka); import failed: {exc}"
        raise ConfigError(f"{key}: the kafka system is not available: {remedy}", key=key) from exc
    factory = getattr(module, "KafkaSystemFactory", None)
    if factory is None:
        raise ConfigError(
            f"{key}: the kafka system is not available: samzapy.system.kafka.factory has no "
            "KafkaSystemFactory",
            key=key,
        )
    return factory  # type: ignore[no-any-return]


_BUILTIN: dict[str, Callable[[str], type[SystemFactory]]] = {
    "memory": lambda key: InMemorySystemFactory,
    "file": lambda key: FileSystemFactory,
    "kafka": _kafka_factory,
}


def system_factory_class(name_or_path: str, *, key: str = _FACTORY_KEY) -> type[SystemFactory]:
    """The SystemFactory class that ``systems.<name>.samza.factory`` (``key``) names."""
    if not isinstance(name_or_path, str):
        raise ConfigError(
            f"{key} must be a system name or 'module:Class' path, got {name_or_path!r}",
            key=key,
        )
    name = name_or_path.strip()
    name = SAMZA_SYSTEM_FACTORIES.get(name, name)
    builtin = _BUILTIN.get(name)
    if builtin is not None:
        return builtin(key)
    if ":" not in name and "." not in name:
        raise ConfigError(
            f"{key}: unknown system factory {name_or_path!r}: expected one of "
            f"{', '.join(sorted(_BUILTIN))} or a 'module:Class' import path",
            key=key,
        )
    return load_class(
        name, key=key, base=SystemFactory, what="a samzapy.system.ports.SystemFactory subclass"
    )


__all__ = ["system_factory_class"]
