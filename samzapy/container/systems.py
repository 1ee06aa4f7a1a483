"""A job's systems as one container uses them: each configured system's factory; the admin
and producer of each system the job uses, and a consumer for each input system; started and
stopped together.

A system the job is not known to use (``used_systems``: no input, declared stream, changelog
or dead-letter stream of the job is on it) is not connected at start-up: a task may still send
to it (a task class names its outputs in code), and the first send connects it (``connect``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from samzapy.api.errors import TaskFencedError
from samzapy.config import ResolvedConfig
from samzapy.system.fencing import WriteLease
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


def used_systems(config: ResolvedConfig) -> list[str]:
    """The configured systems the job is known to use before it runs: those of its inputs
    and broadcast inputs, of its declared streams (intermediate streams, an application's
    outputs), of its stores' changelogs and of its dead-letter stream."""
    names = set(input_systems(config))
    names.update(s.system for s in config.streams.values() if s.system)
    names.update(c.changelog.system for c in config.stores.values() if c.changelog is not None)
    if config.task.dead_letter_stream is not None:
        names.add(config.task.dead_letter_stream.system)
    return sorted(names & set(config.systems))


#: The least a clean stop's commits wait for the servers (with connect.timeout.ms 0 too).
MIN_STOP_WAIT_S = 1.0


class Systems:
    """The factories of every configured system; the admins and producers of the systems in
    use, and the consumers of the input systems."""

    def __init__(self, config: ResolvedConfig, lease: WriteLease | None = None) -> None:
        """A system that carries an intermediate input of the job is read ``read_committed``
        (samzapy writes those streams, in transactions under exactly-once). ``lease``: every
        producer hands records over only under it (``fence_with``)."""
        reading = set(input_systems(config))
        committed = committed_systems(config)
        self._lease = lease
        self.factories: dict[str, SystemFactory] = {
            name: system_factory(config, name) for name in config.systems
        }
        self.admins: dict[str, SystemAdmin] = {}
        self.producers: dict[str, SystemProducer] = {}
        self.consumers: dict[str, SystemConsumer] = {}
        self._connecting: dict[str, asyncio.Future[SystemProducer]] = {}
        for name in used_systems(config):
            self._add(name)
            factory = self.factories[name]
            if name in committed:
                self.consumers[name] = factory.get_committed_consumer()
            elif name in reading:
                self.consumers[name] = factory.get_consumer()

    def _add(self, name: str) -> None:
        factory = self.factories[name]
        self.admins[name] = factory.get_admin()
        self.producers[name] = producer = factory.get_producer()
        if self._lease is not None:
            producer.fence_with(self._lease)

    def held(self) -> asyncio.Future[None] | None:
        """While the lease is held, a future done once it is settled (the tasks wait)."""
        return None if self._lease is None else self._lease.held()

    def stop_wait_s(self) -> float | None:
        """How long a clean stop's commits may wait for the servers: the longest
        ``stop_wait_ms`` of the systems in use (None: no bound)."""
        waits = [self.factories[name].stop_wait_ms for name in self.admins]
        bounded = [ms for ms in waits if ms is not None]
        return max(max(bounded) / 1000, MIN_STOP_WAIT_S) if bounded else None

    def commit_wait_s(self, final: bool) -> float | None:
        """How long a task's commit may wait for the servers (None: no bound): a final one
        (every input ended) ``stop_wait_s``, and so any other one of a container without a
        group lease; with one, a commit waits while the lease is held, for as long as the
        group's coordinator is away, and a consumer fails a container whose brokers are."""
        return self.stop_wait_s() if final or self._lease is None else None

    async def start_admins(self) -> None:
        for admin in list(self.admins.values()):
            await admin.start()

    async def start_producers(self) -> None:
        for producer in list(self.producers.values()):
            await producer.start()

    async def connect(self, name: str) -> SystemProducer:
        """The producer of system ``name``, connecting it first (admin and producer) if the
        job had not used it yet; a configured system only."""
        if name in self.producers and name not in self._connecting:
            return self.producers[name]
        pending = self._connecting.get(name)
        if pending is None:
            pending = self._connecting[name] = asyncio.ensure_future(self._connect(name))
        return await asyncio.shield(pending)

    async def _connect(self, name: str) -> SystemProducer:
        self._add(name)
        log.info("system_connected", system=name, reason="first send to it")
        try:
            await self.admins[name].start()
            await self.producers[name].start()
        finally:
            del self._connecting[name]
        return self.producers[name]

    async def stop(self, *, abandon: bool = False) -> None:
        """Stop every part; a part that fails to stop is logged, the others still stop.
        ``abandon`` (the container failed or lost its tasks: no checkpoint covers what it
        sent): every part at once, each producer dropping what it still holds instead of
        flushing it (``output_dropped``, with the messages), so the stop ends within the
        clients' bound even with the brokers gone."""
        # A system still connecting (its first send came as the container stopped) stops
        # connecting first: its start would otherwise open connections after its stop.
        connecting = list(self._connecting.values())
        for pending in connecting:
            pending.cancel()
        await asyncio.gather(*connecting, return_exceptions=True)
        parts = [
            (what, name, part)
            for what, by_name in (
                ("consumer", self.consumers),
                ("producer", self.producers),
                ("admin", self.admins),
            )
            for name, part in by_name.items()
        ]
        if abandon:
            await asyncio.gather(
                *(_stop(what, name, part, abandon=True) for what, name, part in parts)
            )
        else:
            for what, name, part in parts:
                await _stop(what, name, part, abandon=False)


async def _stop(
    what: str, name: str, part: SystemConsumer | SystemProducer | SystemAdmin, *, abandon: bool
) -> None:
    try:
        if abandon and isinstance(part, SystemProducer):
            if dropped := await part.abandon():
                log.info(
                    "output_dropped",
                    system=name,
                    part=what,
                    messages=dropped,
                    reason="the container failed or lost its tasks: no checkpoint covers them",
                )
        else:
            await part.stop()
    except TaskFencedError as exc:  # what it held back is another's to write
        log.info("system_stopped_fenced", system=name, part=what, error=str(exc))
    except Exception as exc:
        log.warning("system_stop_failed", system=name, part=what, error=repr(exc))


@asynccontextmanager
async def started_admins(config: ResolvedConfig) -> AsyncIterator[dict[str, SystemAdmin]]:
    """The admin of every system the job uses, started, and stopped again on the way out."""
    admins = {name: system_factory(config, name).get_admin() for name in used_systems(config)}
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
    "used_systems",
]
