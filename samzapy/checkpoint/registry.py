"""Building the checkpoint manager that ``task.checkpoint.factory`` names.

Short names: ``memory`` (process-wide, by namespace), ``file`` (a directory), ``kafka`` (the
job's checkpoint stream on the checkpoint system, Samza's default) and ``stream`` (the same
manager over any system, e.g. the memory system in tests). Both stream names need the
``system_factory`` of ``task.checkpoint.system``; the stream is
``checkpoint_stream_name(job_name, job_id)``, and a job's manager checks the stream's owner
record against the job (``samzapy.checkpoint.owner``); the ``file`` manager checks its
directory's owner file against it (``samzapy.checkpoint.owner_file``).

Anything else is the import path of a CheckpointManager subclass, constructed with the keyword
arguments ``job_name``, ``job_id``, ``checkpoint_dir`` and ``namespace``, plus
``system_factory`` and ``replication_factor`` when its ``__init__`` names them.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.ports import CheckpointManager
from samzapy.checkpoint.stream import StreamCheckpointManager, checkpoint_stream_name
from samzapy.checkpoint.transactional import (
    AtLeastOnceCheckpointManager,
    TransactionalCheckpointManager,
)
from samzapy.config import ResolvedConfig
from samzapy.config.checkpoints import STREAM_FACTORIES
from samzapy.config.classes import load_class
from samzapy.system.ports import SystemFactory

FACTORY_KEY = "task.checkpoint.factory"
SYSTEM_KEY = "task.checkpoint.system"


def _stream_manager(
    name: str,
    *,
    job_name: str,
    job_id: str,
    system_factory: SystemFactory | None,
    replication_factor: int,
) -> StreamCheckpointManager:
    if system_factory is None:
        wanted = "kafka system" if name == "kafka" else "system for the checkpoint stream"
        raise ConfigError(
            f"{FACTORY_KEY} is {name} but no {wanted} is configured; set {SYSTEM_KEY}",
            key=SYSTEM_KEY,
        )
    return StreamCheckpointManager(
        system_factory,
        checkpoint_stream_name(job_name, job_id),
        replication_factor,
        owner=JobIdentity(job_name, job_id),
    )


def _named_parameters(cls: type) -> set[str]:
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature
        return set()
    return {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


def checkpoint_manager_for(
    factory: str,
    *,
    job_name: str,
    job_id: str,
    checkpoint_dir: str,
    namespace: str,
    system_factory: SystemFactory | None = None,
    replication_factor: int = -1,
) -> CheckpointManager:
    """The checkpoint manager for the configured ``task.checkpoint.factory``.

    ``system_factory`` builds the checkpoint system's parts (``kafka`` and ``stream`` need
    it); ``replication_factor`` is the checkpoint stream's, -1 for the system's default.
    """
    name = factory.strip() if isinstance(factory, str) else factory
    if name == "memory":
        return InMemoryCheckpointManager(namespace)
    if name == "file":
        if not checkpoint_dir:
            raise ConfigError(
                f"{FACTORY_KEY} is 'file' but no checkpoint directory is configured",
                key=FACTORY_KEY,
            )
        # Its directory is named by job.name alone: its owner file says whose it is.
        return FileCheckpointManager(checkpoint_dir, owner=JobIdentity(job_name, job_id))
    if name in STREAM_FACTORIES:
        return _stream_manager(
            name,
            job_name=job_name,
            job_id=job_id,
            system_factory=system_factory,
            replication_factor=replication_factor,
        )
    if not (isinstance(name, str) and (":" in name or "." in name)):
        raise ConfigError(
            f"{FACTORY_KEY}: unknown checkpoint manager {factory!r}: expected memory, file, "
            "kafka, stream or a 'module:Class' import path",
            key=FACTORY_KEY,
        )
    cls = load_class(
        name,
        key=FACTORY_KEY,
        base=CheckpointManager,
        what="a samzapy.checkpoint.ports.CheckpointManager subclass",
    )
    arguments: dict[str, Any] = {
        "job_name": job_name,
        "job_id": job_id,
        "checkpoint_dir": checkpoint_dir,
        "namespace": namespace,
    }
    accepted = _named_parameters(cls)
    optional = {"system_factory": system_factory, "replication_factor": replication_factor}
    arguments.update({key: value for key, value in optional.items() if key in accepted})
    try:
        manager: CheckpointManager = cls(**arguments)
    except Exception as exc:
        raise ConfigError(
            f"{FACTORY_KEY}: creating {name!r} with the keyword arguments "
            f"{', '.join(arguments)} failed: {type(exc).__name__}: {exc}",
            key=FACTORY_KEY,
        ) from exc
    return manager


def checkpoint_manager(
    config: ResolvedConfig,
    factories: Mapping[str, SystemFactory],
    namespace: str,
    *,
    task_count: int = 1,
) -> CheckpointManager | None:
    """The manager a job's ``task.checkpoint.factory`` names, or None when checkpoints are
    off; ``factories`` are the job's systems (the checkpoint system is one of them). Under
    exactly-once it is the transactional manager, with a partition per task of the job's
    ``task_count``."""
    task = config.task
    if task.checkpoint_factory is None:
        return None
    system_factory = None
    if task.checkpoint_factory in STREAM_FACTORIES:
        system = task.checkpoint_system
        if system is None:
            kafka = [n for n, s in config.systems.items() if s.factory == "kafka"]
            system = kafka[0] if len(kafka) == 1 else None
        if system is None or system not in factories:
            raise ConfigError(
                f"{FACTORY_KEY} is {task.checkpoint_factory!r}: set {SYSTEM_KEY} to the system "
                "that holds the checkpoint stream"
                + (f" (no system named {system!r})" if system else ""),
                key=SYSTEM_KEY,
            )
        system_factory = factories[system]
    if system_factory is not None:
        stream = checkpoint_stream_name(config.job.name, config.job.id)
        replication = task.checkpoint_replication_factor
        # The stream's name is not the job's alone: its owner record says whose it is.
        owner = JobIdentity(config.job.name, config.job.id)
        if not task.exactly_once:  # it reads the exactly-once stream's newer checkpoints too
            return AtLeastOnceCheckpointManager(system_factory, stream, replication, owner=owner)
        return TransactionalCheckpointManager(
            system_factory,
            stream,
            task_count,
            None if replication == -1 else replication,
            fallback_stream=stream,
            owner=owner,
        )
    return checkpoint_manager_for(
        task.checkpoint_factory,
        job_name=config.job.name,
        job_id=config.job.id,
        checkpoint_dir=task.checkpoint_dir,
        namespace=namespace,
        system_factory=system_factory,
        replication_factor=task.checkpoint_replication_factor,
    )


__all__ = ["FACTORY_KEY", "SYSTEM_KEY", "checkpoint_manager", "checkpoint_manager_for"]
