"""JobRunner: which of the job's tasks this container runs, and handing them over.

``samzapy run`` runs one JobRunner. It picks the coordinator of ``job.coordinator.factory``:

- ``static``: container ``job.container.id`` of ``job.container.count`` runs the tasks whose
  partition number k has ``k % count == id``, for as long as the job runs.
- ``kafka-group`` (the default when every input is on a kafka system): the container joins
  the job's consumer group (``GroupMembership``), whose assignor hands out whole tasks,
  incrementally (KIP-429's two phases, see ``system/kafka/group.py``). Each assignment's new
  tasks start in a SamzaContainer of their own next to the running ones (``shares.py``);
  tasks that stay keep processing throughout. A task the group moves elsewhere is first
  taken out of this container's assignment: its container stops dispatching to it, lets its
  calls in flight finish (``task.shutdown.ms``), closes, commits and closes its stores
  (kept locally, marked clean) while its other tasks go on; the runner then tells the group
  when it stopped it and rejoins, and the next rebalance hands it to its new owner, which
  restores its stores, calls ``init`` and resumes from that final checkpoint. Every
  rebalance is logged (``rebalance_log.py``: ``rebalance_started`` with its reason;
  ``tasks_released`` by the old owner; ``rebalance_completed``: the same reason, tasks kept,
  added and removed, the added tasks' pause since their previous owner stopped them, the
  handover time). The group lease (``lease.py``) holds
  writes while the member cannot be sure it is one. With ``job.standbytasks.replication.
  factor`` above 1, each assignment also names this container's standby tasks, which
  ``standby.py`` keeps warm; a task that starts here is promoted from its standby first.

  A set ``job.container.id`` makes the container a static member of the group (KIP-345):
  restarted with the same id it gets its tasks back with no rebalance, and a rolling
  restart moves no task. Its first assignment waits ``fence_wait_s`` before starting tasks:
  long enough for a still-running process with the same id, fenced by this join, to notice
  at its next heartbeat and stop its tasks without committing (``member_fenced``, exit 1).

The metrics reporters and the health state live here, across rebalances.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from samzapy.api.errors import TaskFencedError
from samzapy.checkpoint.group import GroupOffsets
from samzapy.config import ResolvedConfig
from samzapy.container.container import SamzaContainer
from samzapy.container.gauges import ProcessTotals
from samzapy.container.startup import unless_stopped
from samzapy.container.streams import prepare_streams
from samzapy.container.systems import started_admins, system_factory
from samzapy.coordinator.identity import (
    STATIC,
    container_index,
    coordinator_of,
    fence_wait_s,
    group_offsets_without_membership,
    job_group_id,
)
from samzapy.coordinator.lease import Lease
from samzapy.coordinator.placement import GroupStandbys
from samzapy.coordinator.rebalance_log import FENCED, RELEASED, WARMED, RebalanceLog, names
from samzapy.coordinator.shares import Shares, plan_handover
from samzapy.coordinator.standby import Standbys, standby_replicas
from samzapy.metrics import Health, MetricsRegistry, MetricsReporter, start_reporters
from samzapy.metrics.reporter import stop_reporters
from samzapy.system.ports import GroupMembership

log = structlog.get_logger("samzapy.job_runner")


class JobRunner:
    """Runs this container's share of the job until it ends, is stopped, or fails."""

    def __init__(
        self,
        config: ResolvedConfig,
        *,
        metrics: MetricsRegistry | None = None,
        health: Health | None = None,
        task_factory: Callable[[], Any] | None = None,
    ) -> None:
        """``task_factory``: makes each task (an application's operator tasks); None: the
        class ``task.class`` names."""
        self.config = config
        self._task_factory = task_factory
        self.metrics = metrics or MetricsRegistry()
        self.health = health if health is not None else Health()
        self.mode = coordinator_of(config)
        self._stop_reason: str | None = None
        self._stopped = asyncio.Event()
        #: static: the one container; kafka-group: the shares (see shares.py).
        self._container: SamzaContainer | None = None
        self._shares = Shares(self._new_container)
        self._reporters: list[MetricsReporter] = []
        self._assigned: tuple[list[int], Mapping[int, float], list[int], list[int]] | None = None
        self._assignment = asyncio.Event()
        self._assignments = 0
        #: Set while no release is under way (a rebalance waits for one to finish).
        self._settled = asyncio.Event()
        self._settled.set()
        self._rebalances = RebalanceLog()
        #: Tasks whose inputs all ended in this process (still this member's).
        self._ended: set[int] = set()
        #: The latest assignment's tasks until taken (this member's already).
        self._pending: set[int] = set()
        #: Tasks a newer assignment took away before they started: the group withholds them
        #: from the others until this member rejoins without them.
        self._dropped: set[int] = set()
        #: A static member's first assignment waits for a fenced predecessor to stop.
        self._fence_wait = config.job.container_id is not None
        self._not_before: asyncio.Future[None] | None = None
        self.rebalances = 0
        #: The container counts of the process, across rebalances.
        self._totals = ProcessTotals()
        self._totals.register(self.metrics)
        #: The metric groups of tasks that left with a failed share: removed when the next
        #: assignment starts (those of shares stopped at the end stay for the final report).
        self._stale_groups: list[str] = []
        #: kafka-group: the group lease (see lease.py) and the membership.
        self._lease: Lease | None = None
        self._membership: GroupMembership | None = None
        #: The checkpoints' input offsets, copied to the job's consumer group.
        self._group_offsets: GroupOffsets | None = None
        #: kafka-group with standby replicas: this container's standbys and their placement.
        self._standbys: Standbys | None = None
        self._placement: GroupStandbys | None = None

    @property
    def tasks(self) -> list[int]:
        """The tasks this member owns now (kafka-group), started or about to be."""
        return sorted(self._shares.owned | self._ended | self._pending)

    def request_stop(self, reason: str) -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stopped.set()
        if self._container is not None:
            self._container.request_stop(reason)
        self._shares.request_stop(reason)

    async def run(self) -> None:
        self._reporters = await start_reporters(self.config, self.metrics, self.health)
        try:
            if self.mode == STATIC:
                await self._run_static()
            else:
                await self._run_group()
        finally:
            await stop_reporters(self._reporters)

    # -- static -----------------------------------------------------------------------------

    async def _run_static(self) -> None:
        cfg = self.config
        count = cfg.job.container_count
        index = container_index(cfg)  # a job of one: 0, or an error for a name of another
        share = _share(count, index) if count > 1 else None
        self._group_offsets = group_offsets_without_membership(cfg)
        self._container = self._new_container(share)
        try:
            await self._container.run()
        finally:
            if self._group_offsets is not None:
                await self._group_offsets.stop()

    # -- kafka-group --------------------------------------------------------------------------

    async def _run_group(self) -> None:
        cfg, started = self.config, time.monotonic()
        inputs = list(dict.fromkeys(cfg.task.inputs))
        factory = system_factory(cfg, inputs[0].system)
        # The group hands out the partitions of existing topics: create what is missing first.
        if await unless_stopped(_streams_prepared(cfg), self._stopped) is None:
            log.info("startup_stopped", reason=self._stop_reason)
            return
        group_id, replicas = job_group_id(cfg), standby_replicas(cfg)
        if replicas > 0:
            self._standbys = Standbys(cfg, metrics=self.metrics, health=self.health)
            await self._standbys.start()
            own = self._standbys
            self._placement = GroupStandbys(replicas, own.report, own.directory_id)
        membership: GroupMembership = factory.get_group_membership(
            group_id=group_id,
            streams=[ss.stream for ss in inputs],
            session_timeout_ms=cfg.job.coordinator_session_timeout_ms,
            owned=lambda: self.tasks,
            on_rebalance=self._on_rebalance,
            on_assigned=self._on_assigned,
            instance_id=cfg.job.container_id,
            on_fenced=self._member_fenced,
            standbys=self._placement,
            job=(cfg.job.name, cfg.job.id),
        )
        if self._standbys is not None:
            self._standbys.on_warm = lambda: membership.rejoin(WARMED)
        self.metrics.counter("coordinator", "rebalances", lambda: self.rebalances)
        self.metrics.gauge("coordinator", "tasks", lambda: len(self.tasks))
        log.info(
            "group_joining",
            group=group_id,
            inputs=[str(ss) for ss in inputs],
            membership="dynamic" if cfg.job.container_id is None else "static",
        )
        lease = self._lease = Lease(
            cfg.job.coordinator_session_timeout_ms,
            on_lost=self._shares.abandon,
            margin_s=2 * membership.heartbeat_interval_s,
            heard=lambda: membership.heard_at,
            member=lambda: membership.member_id,
        )
        progress = self._shares.report_progress(
            cfg.task.progress_interval_ms, self._totals.processed, lambda: membership.member_id
        )
        ticking = asyncio.ensure_future(self._lease.run_beside(progress))
        standbys = self._standbys
        if await unless_stopped(_joined(membership), self._stopped) is None:
            ticking.cancel()
            await membership.stop()
            if standbys is not None:
                await standbys.stop()
            log.info("startup_stopped", reason=self._stop_reason)
            return
        self._membership = membership
        committer = membership.offset_committer()
        if committer is not None:
            self._group_offsets = GroupOffsets(
                committer, system=inputs[0].system, group_id=group_id
            )
        try:
            await self._serve(membership)
        finally:
            lease.give_up("the container is leaving the group")  # no hold outlives the stop
            await self._shares.stop("leaving the group")
            ticking.cancel()  # after: a long drain is no stand-still
            if standbys is not None:
                await standbys.stop()
            if self._group_offsets is not None:
                await self._group_offsets.stop()  # the final checkpoints' offsets, as a member
            await membership.stop()
            self._rebalances.left(group_id, self.config.job)
        self._check_shares()  # a share that failed while stopping fails the job
        reason = self._stop_reason or "every input partition reached end-of-stream"
        log.info("job_finished", **self._totals.finished(reason, started))

    async def _serve(self, membership: GroupMembership) -> None:
        """Run each assignment until the job is stopped, fails, or this container's tasks
        have all ended (bounded inputs)."""
        while not self._stopped.is_set():
            waits: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(self._assignment.wait()),
                asyncio.ensure_future(self._stopped.wait()),
            ]
            await asyncio.wait(
                [*waits, *self._shares.runs()], timeout=1.0, return_when=asyncio.FIRST_COMPLETED
            )
            for w in waits:
                w.cancel()
            if (failure := membership.failure()) is not None:
                raise failure
            self._check_shares()
            if self._stopped.is_set():
                return
            if self._assignment.is_set():
                self._assignment.clear()
                assigned, self._assigned = self._assigned, None
                if assigned is not None:
                    await self._take(membership, *assigned)
            elif self._ended and not self._shares.shares:
                log.info("tasks_ended", tasks=names(sorted(self._ended)))
                return  # every task of this container ended

    def _check_shares(self) -> None:
        """Deal with the shares whose run ended: a fenced one's tasks are dropped (and the
        group asked for a new assignment), any other failure fails the job, and a share
        that ended by itself ended its tasks."""
        for share in self._shares.done():
            exc = None if share.run.cancelled() else share.run.exception()
            if isinstance(exc, TaskFencedError):
                self._stale_groups.extend(share.container.metric_groups)
                self._fenced(exc, sorted(share.tasks))
            elif exc is not None:
                raise exc
            elif self._stop_reason is None:
                self._ended |= share.tasks

    async def _on_rebalance(self) -> None:
        if self._assignments:
            self.rebalances += 1
            member = self._membership
            self._rebalances.started(self.tasks, member.rebalance_reason if member else None)
        # The group must learn what this member runs: a release under way finishes first.
        await self._settled.wait()

    async def _on_assigned(self, tasks: list[int], released: Mapping[int, float]) -> None:
        placement = self._placement
        standbys = [] if placement is None else placement.assigned_standbys
        warmups = [] if placement is None else placement.assigned_warmups
        self._assigned = (tasks, released, standbys, warmups)
        if self._lease is not None:
            self._lease.renew()  # as the assignment arrives: a late ``_take`` renews nothing
        self._dropped |= self._pending - set(tasks) - self._shares.owned
        self._pending = set(tasks)
        self._assignment.set()

    async def _take(
        self,
        membership: GroupMembership,
        tasks: list[int],
        released: Mapping[int, float],
        standbys: list[int] | None = None,
        warmups: list[int] | None = None,
    ) -> None:
        """Hand over from the tasks this member runs to ``tasks``: release those that left
        (and tell the group), start those that came (promoted from their standbys here);
        the others go on. Then keep ``standbys`` (``warmups`` among them)."""
        structlog.contextvars.bind_contextvars(member=membership.member_id)
        self._rebalances.taking()
        if self._dropped:
            membership.released(self._dropped, time.time())
            membership.rejoin(RELEASED)
            self._dropped = set()
        if self._fence_wait and tasks:
            # A predecessor with this id may still run these tasks until it notices: the
            # share reads its checkpoints meanwhile, and claims and writes only after.
            self._fence_wait = False
            wait = fence_wait_s(membership)
            log.info("static_member_joined", tasks=names(tasks), fence_wait_ms=wait * 1000)
            self._not_before = asyncio.ensure_future(asyncio.sleep(wait))
        self._assignments += 1
        self._ended &= set(tasks)
        handover = plan_handover([s.tasks for s in self._shares.shares], set(tasks) - self._ended)
        for group in self._stale_groups:
            self.metrics.remove_group(group)
        self._stale_groups = []
        began = time.monotonic()
        # 1. Release the tasks that left: the group gives them out once this member has
        # rejoined without them.
        if handover.removed:
            stopped_at = time.time()
            self._settled.clear()
            try:
                for group in await self._shares.release(handover, "rebalance"):
                    self.metrics.remove_group(group)
            finally:
                self._settled.set()
            membership.released(handover.removed, stopped_at)
            membership.rejoin(RELEASED)
            log.info(
                "tasks_released",
                tasks=names(sorted(handover.removed)),
                elapsed_ms=round((time.monotonic() - began) * 1000, 1),
            )
        # 2. Start the tasks that came, in a container of their own (not those dropped since).
        paused: dict[str, float] = {}
        if handover.added and not self._stopped.is_set():
            self.health.ready = False
            if self._standbys is not None:
                await unless_stopped(self._standbys.promote(set(handover.added)), self._stopped)
        if (added := handover.added - self._dropped) and not self._stopped.is_set():
            share = await self._shares.start(added)
            if share.run.done():
                return  # it failed while starting: the next check deals with it
            now = time.time()
            paused = {
                f"Partition {t}": round((now - released[t]) * 1000, 1)
                for t in sorted(added)
                if t in released
            }
        if self._standbys is not None and not self._stopped.is_set():
            await self._standbys.assign(set(standbys or ()) - set(tasks), set(warmups or ()))
        if not self._stopped.is_set():  # a stop asked meanwhile: draining, /readyz stays 503
            self.health.ready = True
        if not self._assignment.is_set():
            self._pending = set()
        self._rebalances.completed(
            tasks,
            kept=handover.kept,
            added=added,
            removed=handover.removed,
            paused_ms=paused,
            began=began,
        )

    def _member_fenced(self) -> None:
        """The group dropped this static member: its tasks may run elsewhere already."""
        log.error("member_fenced", container_id=self.config.job.container_id)
        if self._lease is not None:
            self._lease.revoke()  # before anything else may write: a start or a release
        self._shares.abandon("the group fenced this member")
        if self._stop_reason is None:
            self._stop_reason = "fenced"
        self._stopped.set()

    def _fenced(self, exc: TaskFencedError, tasks: list[int]) -> None:
        """Another container owns the task now: drop the tasks of the share that failed
        without committing, and ask the group for a new assignment."""
        log.warning(
            "task_fenced",
            task=exc.task_name,
            epoch=exc.epoch,
            error=str(exc),
            tasks_dropped=names(tasks),
        )
        if self._membership is not None:
            self._membership.rejoin(FENCED)

    # -- shared ---------------------------------------------------------------------------------

    def _new_container(
        self, tasks: Callable[[int], bool] | frozenset[int] | None
    ) -> SamzaContainer:
        container = SamzaContainer(
            self.config,
            task_factory=self._task_factory,
            metrics=self.metrics,
            tasks=tasks.__contains__ if isinstance(tasks, frozenset) else tasks,
            reporters=False,
            health=self.health,
            totals=self._totals,
            lease=self._lease,
            group_offsets=self._group_offsets,
            not_before=self._not_before,
            progress=self.mode == STATIC,  # under kafka-group the shares' line is one
        )
        if self._stop_reason is not None:
            container.request_stop(self._stop_reason)
        return container


async def _streams_prepared(config: ResolvedConfig) -> bool:
    async with started_admins(config) as admins:
        await prepare_streams(config, admins)
    return True


async def _joined(membership: GroupMembership) -> bool:
    await membership.start()
    return True


def _share(count: int, index: int) -> Callable[[int], bool]:
    """Whether task k is container ``index``'s of ``count`` (a static share)."""
    return lambda k: k % count == index


__all__ = ["JobRunner"]
