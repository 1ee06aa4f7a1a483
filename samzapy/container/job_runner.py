"""JobRunner: which of the job's tasks this container runs, and handing them over.

``samzapy run`` runs one JobRunner. It picks the coordinator of ``job.coordinator.factory``:

- ``static``: container ``job.container.id`` of ``job.container.count`` runs the tasks whose
  partition number k has ``k % count == id``, for as long as the job runs.
- ``kafka-group`` (the default when every input is on a kafka system): the container joins
  the job's consumer group (``GroupMembership``), whose assignor hands out whole tasks. Each
  assignment runs in a SamzaContainer of its own. At a rebalance the group first revokes:
  the container stops dispatching, lets the calls in flight finish (``task.shutdown.ms``),
  closes the tasks, commits and closes their stores (kept locally, marked clean), and only
  then does the group hand the tasks out again; the next SamzaContainer restores its tasks'
  stores from their changelogs, calls ``init`` and resumes from the checkpoints. Every
  rebalance is logged (``rebalance_started``, ``rebalance_completed`` with the tasks that came
  and went and how long the handover took).

The metrics reporters and the health state live here, across rebalances.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from typing import Any

import structlog

from samzapy.api.errors import ConfigError, TaskFencedError
from samzapy.config import ResolvedConfig
from samzapy.container.container import SamzaContainer
from samzapy.container.gauges import ProcessTotals
from samzapy.container.lease import Lease
from samzapy.container.streams import prepare_streams
from samzapy.container.systems import started_admins, system_factory
from samzapy.metrics import Health, MetricsRegistry, MetricsReporter, start_reporters
from samzapy.system.ports import GroupMembership

log = structlog.get_logger("samzapy.job_runner")

KAFKA_GROUP = "kafka-group"
STATIC = "static"


def coordinator_of(config: ResolvedConfig) -> str:
    """``job.coordinator.factory``, or its default for the job's inputs."""
    if config.job.coordinator_factory is not None:
        return config.job.coordinator_factory
    systems = {ss.system for ss in config.task.inputs}
    factories = {config.systems[s].factory for s in systems if s in config.systems}
    return KAFKA_GROUP if factories == {"kafka"} else STATIC


def container_index(config: ResolvedConfig) -> int:
    """``job.container.id`` as an index below ``job.container.count``: an integer, or a name
    ending in one (``samzapy-2``, a StatefulSet pod's name)."""
    raw = config.job.container_id
    count = config.job.container_count
    found = re.search(r"(\d+)$", raw)
    index = int(found.group(1)) if found else -1
    if not 0 <= index < count:
        raise ConfigError(
            f"job.container.id must be an integer from 0 to job.container.count - 1 "
            f"({count - 1}), or a name ending in one, got {raw!r}",
            key="job.container.id",
        )
    return index


class JobRunner:
    """Runs this container's share of the job until it ends, is stopped, or fails."""

    def __init__(
        self,
        config: ResolvedConfig,
        *,
        metrics: MetricsRegistry | None = None,
        health: Health | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or MetricsRegistry()
        self.health = health if health is not None else Health()
        self.mode = coordinator_of(config)
        self._stop_reason: str | None = None
        self._stopped = asyncio.Event()
        self._container: SamzaContainer | None = None
        self._container_run: asyncio.Task[None] | None = None
        self._reporters: list[MetricsReporter] = []
        self._assigned: list[int] | None = None
        self._assignment = asyncio.Event()
        self._revoked_at: float | None = None
        self._tasks: list[int] = []
        self._failure: BaseException | None = None
        self.rebalances = 0
        #: The container counts of the process, across rebalances.
        self._totals = ProcessTotals()
        self._totals.register(self.metrics)
        #: The metric groups of the tasks of the container that stopped last: removed when
        #: the next assignment starts (kept at the end, for the final report).
        self._stale_groups: list[str] = []
        #: kafka-group: the group lease (see lease.py) and the membership.
        self._lease: Lease | None = None
        self._membership: GroupMembership | None = None

    def request_stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stopped.set()
        if self._container is not None:
            self._container.request_stop(reason)

    async def run(self) -> None:
        self._reporters = await start_reporters(self.config, self.metrics, self.health)
        try:
            if self.mode == STATIC:
                await self._run_static()
            else:
                await self._run_group()
        finally:
            for reporter in self._reporters:
                await reporter.stop()

    # -- static -----------------------------------------------------------------------------

    async def _run_static(self) -> None:
        cfg = self.config
        count = cfg.job.container_count
        share = None
        if count > 1:
            index = container_index(cfg)
            share = _share(count, index)
        await self._new_container(share).run()

    # -- kafka-group --------------------------------------------------------------------------

    async def _run_group(self) -> None:
        cfg = self.config
        inputs = list(dict.fromkeys(cfg.task.inputs))
        factory = system_factory(cfg, inputs[0].system)
        # The group hands out the partitions of existing topics: create what is missing first.
        async with started_admins(cfg) as admins:
            await prepare_streams(cfg, admins)
        group_id = f"samzapy.{cfg.job.name}.{cfg.job.id}"
        membership: GroupMembership = factory.get_group_membership(
            group_id=group_id,
            streams=[ss.stream for ss in inputs],
            session_timeout_ms=cfg.job.coordinator_session_timeout_ms,
            on_revoked=self._on_revoked,
            on_assigned=self._on_assigned,
        )
        self.metrics.counter("coordinator", "rebalances", lambda: self.rebalances)
        self.metrics.gauge("coordinator", "tasks", lambda: len(self._tasks))
        log.info("group_joining", group=group_id, inputs=[str(ss) for ss in inputs])
        self._lease = Lease(cfg.job.coordinator_session_timeout_ms, on_lost=self._lease_lost)
        ticking = asyncio.ensure_future(self._lease.run())
        await membership.start()
        self._membership = membership
        try:
            await self._serve(membership)
        finally:
            ticking.cancel()
            await self._stop_container("leaving the group")
            await membership.stop()
            log.info("group_left", group=group_id)

    async def _serve(self, membership: GroupMembership) -> None:
        """Run each assignment until the job is stopped, fails, or this container's tasks
        have all ended (bounded inputs)."""
        while not self._stopped.is_set():
            waits: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(self._assignment.wait()),
                asyncio.ensure_future(self._stopped.wait()),
            ]
            run = self._container_run
            if run is not None:
                waits.append(run)
            await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
            for w in waits[:2]:
                w.cancel()
            if self._failure is not None:
                raise self._failure
            if (failure := membership.failure()) is not None:
                raise failure
            if run is not None and run is self._container_run and run.done():
                self._container_run = self._container = None
                if isinstance(run.exception(), TaskFencedError):
                    self._fenced(run.exception())  # type: ignore[arg-type]
                    continue
                run.result()  # any other failure ends the job
                if self._stop_reason is None:
                    log.info("tasks_ended", tasks=_names(self._tasks))
                    return  # every task of this container ended
            if self._assignment.is_set():
                self._assignment.clear()
                tasks, self._assigned = self._assigned or [], None
                await self._take(tasks)

    async def _on_revoked(self, tasks: list[int]) -> None:
        self._revoked_at = time.monotonic()
        self.rebalances += 1
        self.health.ready = False
        log.info("rebalance_started", tasks_revoked=_names(tasks))
        await self._stop_container("rebalance")
        log.info(
            "tasks_released",
            tasks=_names(tasks),
            elapsed_ms=round((time.monotonic() - self._revoked_at) * 1000, 1),
        )

    async def _on_assigned(self, tasks: list[int]) -> None:
        self._assigned = tasks
        self._assignment.set()

    async def _take(self, tasks: list[int]) -> None:
        if self._lease is not None:
            self._lease.renew()
        before = set(self._tasks)
        self._tasks = tasks
        for group in self._stale_groups:
            self.metrics.remove_group(group)
        self._stale_groups = []
        started = time.monotonic()
        if tasks:
            container = self._new_container(frozenset(tasks).__contains__)
            run = self._container_run = asyncio.ensure_future(container.run())
            started_wait = asyncio.ensure_future(container.started.wait())
            await asyncio.wait([started_wait, run], return_when=asyncio.FIRST_COMPLETED)
            started_wait.cancel()
            if run.done() and isinstance(run.exception(), TaskFencedError):
                self._container_run = self._container = None
                self._fenced(run.exception())  # type: ignore[arg-type]
                return
            if run.done() and run.exception() is not None:
                raise run.exception()  # type: ignore[misc]  # failed during start-up
        else:
            self.health.ready = True  # nothing to restore: ready as an idle member
        since = self._revoked_at if self._revoked_at is not None else started
        log.info(
            "rebalance_completed" if self._revoked_at is not None else "tasks_assigned",
            tasks=_names(tasks),
            tasks_added=_names(sorted(set(tasks) - before)),
            tasks_removed=_names(sorted(before - set(tasks))),
            handover_ms=round((time.monotonic() - since) * 1000, 1),
        )
        self._revoked_at = None

    async def _stop_container(self, reason: str) -> None:
        """Stop the running container, if any, and wait for its commit."""
        container, run = self._container, self._container_run
        if container is None or run is None:
            return
        self._container = self._container_run = None
        self._stale_groups = container.metric_groups
        container.request_stop(reason)
        try:
            await asyncio.shield(run)
        except TaskFencedError as exc:
            self._fenced(exc)
        except Exception as exc:
            self._failure = self._failure or exc

    def _lease_lost(self) -> None:
        if self._container is not None:
            self._container.abandon("its event loop stood still for longer than the session")

    def _fenced(self, exc: TaskFencedError) -> None:
        """Another container owns the task now: drop this container's tasks without
        committing (done: it failed), and ask the group for a new assignment."""
        log.warning(
            "task_fenced",
            task=exc.task_name,
            epoch=exc.epoch,
            error=str(exc),
            tasks_dropped=_names(self._tasks),
        )
        self._tasks = []
        self.health.ready = False
        if self._membership is not None:
            self._membership.rejoin()

    # -- shared ---------------------------------------------------------------------------------

    def _new_container(self, tasks: Callable[[int], bool] | None) -> SamzaContainer:
        container = SamzaContainer(
            self.config,
            metrics=self.metrics,
            tasks=tasks,
            reporters=False,
            health=self.health,
            totals=self._totals,
            lease=None if self._lease is None else self._lease.valid,
        )
        self._container = container
        if self._stop_reason is not None:
            container.request_stop(self._stop_reason)
        return container


def _share(count: int, index: int) -> Callable[[int], bool]:
    """Whether task k is container ``index``'s of ``count`` (a static share)."""
    return lambda k: k % count == index


def _names(tasks: list[int]) -> list[str]:
    return [f"Partition {k}" for k in tasks]


__all__ = [
    "KAFKA_GROUP",
    "STATIC",
    "JobRunner",
    "container_index",
    "coordinator_of",
]
