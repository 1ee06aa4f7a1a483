"""A job's systems as one container uses them: each configured system's factory, admin and
producer, and a consumer for each input system; started and stopped together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from samzapy.config import ResolvedConfig
from samzapy.system.ports import SystemAdmin, SystemConsumer, SystemFactory, SystemProducer
from samzapy.system.registry import system_factory_class

log = structlog.get_logger("samzapy.container")


def system_factory(config: ResolvedConfig, name: str) -> SystemFactory:
    """The factory of system ``name`` (``systems.<name>.samza.factory``) with its settings."""
    system = config.systems[name]
    factory_class = system_factory_class(system.factory, key=f"systems.{name}.samza.factory")
    return factory_class(name, system.params)


def committed_systems(config: ResolvedConfig) -> set[str]:
    """The systems the job reads ``read_committed``: those carrying an intermediate input
    (samzapy writes those streams, in transactions under exactly-once)."""
    return {ss.system for ss in config.task.inputs if config.stream(ss).intermediate}


def input_systems(config: ResolvedConfig) -> list[str]:
    """The systems the job reads from (inputs and broadcast inputs)."""
    streams = [*config.task.inputs, *(b.system_stream for b in config.task.broadcast_inputs)]
    return sorted({ss.system for ss in streams})


class Systems:
    """The factories, admins, producers and input consumers of every configured system."""

    def __init__(self, config: ResolvedConfig) -> None:
        """A system that carries an intermediate input of the job is read ``read_committed``
        (samzapy writes those streams, in transactions under exactly-once)."""
        reading = set(input_systems(config))
        committed = committed_systems(config)
        self.factories: dict[str, SystemFactory] = {}
        self.admins: dict[str, SystemAdmin] = {}
        self.producers: dict[str, SystemProducer] = {}
        self.consumers: dict[str, SystemConsumer] = {}
        for name in config.systems:
            self.factories[name] = factory = system_factory(config, name)
            self.admins[name] = factory.get_admin()
            self.producers[name] = factory.get_producer()
            if name in committed:
                self.consumers[name] = factory.get_committed_consumer()
            elif name in reading:
                self.consumers[name] = factory.get_consumer()

    async def start_admins(self) -> None:
        for admin in self.admins.values():
            await admin.start()

    async def stop(self) -> None:
        """Stop every part; a part that fails to stop is logged, the others still stop."""
        for what, parts in (
            ("consumer", self.consumers),
            ("producer", self.producers),
            ("admin", self.admins),
        ):
            for name, part in parts.items():
                try:
                    await part.stop()
                except Exception as exc:
                    log.warning("system_stop_failed", system=name, part=what, error=repr(exc))


@asynccontextmanager
async def started_admins(config: ResolvedConfig) -> AsyncIterator[dict[str, SystemAdmin]]:
    """Every configured system's admin, started, and stopped again on the way out."""
    admins = {name: system_factory(config, name).get_admin() for name in config.systems}
    try:
        for admin in admins.values():
            await admin.start()
        yield admins
    finally:
        for admin in admins.values():
            await admin.stop()


__all__ = [
    "Systems",
    "committed_systems",
    "input_systems",
    "started_admins",
    "system_factory",
]
