"""What a run leaves on its memory systems, told at exit: their streams die with the process.

A ``memory`` system (``systems.<name>.samza.factory: memory``, or one an application declares
with ``InMemorySystemDescriptor``) keeps its streams in the process that runs the job: tests
read them in-process (``samzapy.testing.TestRunner``), but what ``samzapy run`` writes there
is gone when it exits, and nothing else would say so. So, as the run ends (cleanly or not),
each stream of a memory system the job wrote to is logged as one ``memory_stream_discarded``
event: the system, its namespace, the stream, what it was to the job (``output``,
``dead-letters``, ``changelog``, ``checkpoints``), how many messages it held and in how
many partitions. A warning when it held messages; an empty stream is logged at info.

The job's inputs and intermediate streams are not reported: it read them itself (a stop
drains the intermediate ones first).

Checkpoints kept there are lost the same way, and with them where a restart resumes: so
``samzapy validate`` and ``run`` warn of them before anything runs (``checkpoints_in_memory``,
``memory_checkpoints``), as they do of checkpoints switched off.
"""

from __future__ import annotations

from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.config import ResolvedConfig
from samzapy.container.systems import system_factory
from samzapy.system.inmemory import InMemoryBroker, InMemorySystemFactory

REASON = (
    "a memory system keeps its streams in the process of the job: they are gone once it "
    "exits; write to a file or kafka system to keep them (memory systems are for tests, "
    "which read them in-process)"
)


def report_memory_streams(config: ResolvedConfig, log: Any) -> None:
    """Log each stream the job wrote to a memory system (see the module docstring)."""
    namespaces: dict[str, str] = {}  # system -> namespace
    for name in sorted(config.systems):
        try:
            factory = system_factory(config, name)
        except ConfigError:  # validation said so before the run
            continue
        if isinstance(factory, InMemorySystemFactory):
            namespaces[name] = factory.namespace
    if not namespaces:
        return
    kinds = _kinds(config, namespaces)
    systems: dict[str, str] = {}  # namespace -> its first system, by name
    for name, namespace in namespaces.items():
        systems.setdefault(namespace, name)
    for namespace, system in systems.items():
        broker = InMemoryBroker.for_namespace(namespace)
        for stream in broker.streams():
            kind = kinds.get((namespace, stream), "output")
            if kind == "read":
                continue
            count = broker.partition_count(stream) or 0
            messages = sum(len(broker.partition(stream, p).records) for p in range(count))
            emit = log.warning if messages else log.info
            emit(
                "memory_stream_discarded",
                system=system,
                namespace=namespace,
                stream=stream,
                kind=kind,
                messages=messages,
                partitions=count,
                reason=REASON,
            )


def memory_checkpoints(config: ResolvedConfig) -> str | None:
    """Why the job's checkpoints do not outlive the process (None: they do, or are off):
    ``task.checkpoint.factory: memory``, or a checkpoint stream on a memory system."""
    factory = config.task.checkpoint_factory
    name = factory.strip() if isinstance(factory, str) else None
    if name == "memory":
        where = "task.checkpoint.factory is memory"
    elif name in ("kafka", "stream") and config.task.checkpoint_system is not None:
        system = config.task.checkpoint_system
        if system not in config.systems:
            return None  # validation says so
        try:
            in_memory = isinstance(system_factory(config, system), InMemorySystemFactory)
        except ConfigError:  # validation says so
            return None
        if not in_memory:
            return None
        where = f"the checkpoint stream is on system {system!r}, a memory system"
    else:
        return None
    return (
        f"{where}: checkpoints live in this process only, so a restart does not resume "
        "from them (every input starts at its offset default again); use file or kafka "
        "checkpoints"
    )


def _kinds(config: ResolvedConfig, namespaces: dict[str, str]) -> dict[tuple[str, str], str]:
    """What each stream of a memory system is to the job, by (namespace, stream), where the
    configuration says (``read``: an input or intermediate stream)."""
    kinds: dict[tuple[str, str], str] = {}

    def note(system: str | None, stream: str, kind: str) -> None:
        if system in namespaces:
            kinds.setdefault((namespaces[system], stream), kind)

    task = config.task
    for ss in [*task.inputs, *(b.system_stream for b in task.broadcast_inputs)]:
        note(ss.system, ss.stream, "read")
    for entry in config.streams.values():
        if entry.intermediate:
            note(entry.system, entry.physical_name, "read")
    if task.checkpoint_factory in ("kafka", "stream"):
        stream = checkpoint_stream_name(config.job.name, config.job.id)
        note(task.checkpoint_system, stream, "checkpoints")
    if task.dead_letter_stream is not None:
        note(task.dead_letter_stream.system, task.dead_letter_stream.stream, "dead-letters")
    for store in config.stores.values():
        if store.changelog is not None:
            note(store.changelog.system, store.changelog.stream, "changelog")
    return kinds


__all__ = ["memory_checkpoints", "report_memory_streams"]
