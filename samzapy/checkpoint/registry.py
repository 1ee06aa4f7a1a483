"""Building the checkpoint manager that ``task.checkpoint.factory`` names.

Short names: ``memory`` (process-wide, by namespace), ``file`` (a directory), ``kafka`` (a
checkpoint stream, loaded only when asked for). Anything else is the import path of a
CheckpointManager subclass; it and the kafka manager are constructed with the keyword
arguments ``job_name``, ``job_id``, ``checkpoint_dir`` and ``namespace``.
"""

from __future__ import annotations

import importlib
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.ports import CheckpointManager
from samzapy.system.registry import load_class

FACTORY_KEY = "task.checkpoint.factory"


def _kafka_manager_class() -> type:
    try:
        module = importlib.import_module("samzapy.checkpoint.kafka")
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing.startswith("samzapy"):
            remedy = "this samzapy build does not include it yet"
        else:
            remedy = f"install its dependencies (pip install aiokafka); import failed: {exc}"
        raise ConfigError(
            f"{FACTORY_KEY}: the kafka checkpoint manager is not available: {remedy}",
            key=FACTORY_KEY,
        ) from exc
    cls = getattr(module, "KafkaCheckpointManager", None)
    if not isinstance(cls, type):
        raise ConfigError(
            f"{FACTORY_KEY}: the kafka checkpoint manager is not available: "
            "samzapy.checkpoint.kafka has no KafkaCheckpointManager class",
            key=FACTORY_KEY,
        )
    return cls


def checkpoint_manager_for(
    factory: str,
    *,
    job_name: str,
    job_id: str,
    checkpoint_dir: str,
    namespace: str,
) -> CheckpointManager:
    """The checkpoint manager for the configured ``task.checkpoint.factory``."""
    name = factory.strip() if isinstance(factory, str) else factory
    if name == "memory":
        return InMemoryCheckpointManager(namespace)
    if name == "file":
        if not checkpoint_dir:
            raise ConfigError(
                f"{FACTORY_KEY} is 'file' but no checkpoint directory is configured",
                key=FACTORY_KEY,
            )
        return FileCheckpointManager(checkpoint_dir)
    if name == "kafka":
        cls = _kafka_manager_class()
    elif isinstance(name, str) and (":" in name or "." in name):
        cls = load_class(name, key=FACTORY_KEY)
    else:
        raise ConfigError(
            f"{FACTORY_KEY}: unknown checkpoint manager {factory!r}: expected memory, file, "
            "kafka or a 'module:Class' import path",
            key=FACTORY_KEY,
        )
    if not issubclass(cls, CheckpointManager):
        raise ConfigError(
            f"{FACTORY_KEY}: {factory!r} is not a samzapy.checkpoint.ports.CheckpointManager "
            "subclass",
            key=FACTORY_KEY,
        )
    arguments: dict[str, Any] = {
        "job_name": job_name,
        "job_id": job_id,
        "checkpoint_dir": checkpoint_dir,
        "namespace": namespace,
    }
    try:
        return cls(**arguments)
    except TypeError as exc:
        raise ConfigError(
            f"{FACTORY_KEY}: cannot construct {factory!r} with keyword arguments "
            f"{', '.join(arguments)}: {exc}",
            key=FACTORY_KEY,
        ) from exc


__all__ = ["FACTORY_KEY", "checkpoint_manager_for"]
