"""Standby replicas (``job.standbytasks.replication.factor``): warm copies of other
containers' tasks' stores, kept at their latest checkpoints, promoted on failover.

Under ``kafka-group`` each task with a logged persistent store has, beside its active copy,
(factor - 1) standbys on other containers (``placement.py`` places them; each assignment names
a member's standby tasks). ``Standbys`` runs this container's:

1. ``assign``: start the standbys an assignment brings (open each logged store of the task in
   its standby directory, ``standby_store.py``; ``standby_started``) and close those it takes
   away, marked clean (``standby_dropped``), files kept;
2. ``run``: about every ``interval`` seconds, take in the checkpoints the active tasks wrote
   (``CheckpointManager.refresh``), then replay each standby's changelog from where it got to
   up to its task's latest checkpointed changelog offset, read committed, never past it: the
   copy holds the task's state as of a checkpoint, which is what a new owner resumes from;
3. ``promote``: before a task this container holds a standby of starts here as an active task,
   stop its catch-up, close it marked clean at the offset it reached and move it where the
   active task opens its store (``standby_promoted``). The active task's restore then keeps
   the local store and replays only what the standby had not reached. A directory another
   process still holds open is left alone until it lets go (``standby_not_moved``, then
   ``standby_moved_into_place``): the task starts after;
4. ``stop``: close every standby, marked clean.

A *warmup* is a standby a planned move waits for (KIP-441, ``placement.py``): once every
warmup of the latest assignment has reached its task's checkpoint, ``on_warm`` asks the group
for a new assignment (``standby_warm``), which moves the tasks here.

Each standby reports its lag behind its task's latest checkpoint (changelog records, summed
over its stores) for the group's metadata: the assignor gives a free task to a warm standby.
A standby logs ``standby_caught_up`` when it first reaches its task's checkpoint. Metrics per
standby store: ``checkpoint-lag``, ``changelog-lag`` (to the changelog's head) and
``records-applied``; ``/readyz`` lists the standbys with the same figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from samzapy.api.errors import SamzapyError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import CheckpointManager
from samzapy.checkpoint.registry import checkpoint_manager
from samzapy.config import ResolvedConfig
from samzapy.container.checkpoints import checkpoint_namespace
from samzapy.container.store_directory import claim_store_directory, job_store_directory
from samzapy.container.systems import system_factory
from samzapy.coordinator.standby_store import StandbyStore
from samzapy.metrics import Health, MetricsRegistry
from samzapy.storage import changelog_gap as gap
from samzapy.storage.task_stores import task_directory_name
from samzapy.system.ports import SystemAdmin, SystemFactory

log = structlog.get_logger("samzapy.standby")

_NOT_PERSISTENT = ("inmemory", "in-memory", "memory")


def standby_stores(config: ResolvedConfig) -> list[str]:
    """The stores a standby keeps: those with a changelog on an engine that persists."""
    return [
        name
        for name, store in config.stores.items()
        if store.changelog is not None and (store.factory or "rocksdb") not in _NOT_PERSISTENT
    ]


def standby_replicas(config: ResolvedConfig) -> int:
    """Standbys per task: the replication factor minus one, 0 when no store needs any."""
    if not standby_stores(config):
        return 0
    return config.job.standby_replication_factor - 1


@dataclass
class StandbyTask:
    """The standby of one task: a copy of each of its logged persistent stores."""

    task: int
    name: TaskName
    stores: dict[str, StandbyStore]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    opened: bool = False


class Standbys:
    """This container's standby tasks (module docstring)."""

    def __init__(
        self,
        config: ResolvedConfig,
        *,
        metrics: MetricsRegistry,
        health: Health,
        interval: float = 1.0,
    ) -> None:
        self.config = config
        self._metrics = metrics
        self._health = health
        self._interval = interval
        self._stores = standby_stores(config)
        self._base = job_store_directory(config)
        self.directory_id: str | None = None  # store_directory_id, once started
        self.tasks: dict[int, StandbyTask] = {}
        self._factories: dict[str, SystemFactory] = {}
        self._admins: dict[str, SystemAdmin] = {}
        self._checkpoints: CheckpointManager | None = None
        self._wake = asyncio.Event()
        self._run: asyncio.Task[None] | None = None
        #: The warmups of the latest assignment not caught up yet, and what to call once
        #: they all are (the membership's rejoin).
        self._warming: set[int] = set()
        self.on_warm: Callable[[], None] | None = None

    # -- starting and stopping ------------------------------------------------------------------

    async def start(self) -> None:
        """Start the changelog systems' admins and a checkpoint manager of its own, claim the
        job's store directory (JobCollisionError: another job's), start ``run`` in a task."""
        cfg = self.config
        inputs = list(dict.fromkeys(cfg.task.inputs))
        # Admins for the changelogs and the inputs (their partition count); factories for
        # those and for the systems the checkpoint manager may live on.
        needed = {inputs[0].system}
        for store in self._stores:
            changelog = cfg.stores[store].changelog
            assert changelog is not None
            needed.add(changelog.system)
        for name, system in cfg.systems.items():
            if name in needed or system.factory == "kafka" or name == cfg.task.checkpoint_system:
                self._factories[name] = system_factory(cfg, name)
        for name in sorted(needed):
            self._admins[name] = self._factories[name].get_admin()
            await self._admins[name].start()
        counts = await self._admins[inputs[0].system].partition_counts([i.stream for i in inputs])
        manager = checkpoint_manager(
            cfg, self._factories, checkpoint_namespace(cfg), task_count=max(counts.values())
        )
        if manager is not None:
            await manager.start()
        self._checkpoints = manager
        try:
            # Where the standbys live (shared with other containers?); after the checkpoints'.
            self.directory_id = claim_store_directory(cfg)
        except BaseException:
            await self.stop()
            raise
        self._run = asyncio.ensure_future(self.run())

    async def stop(self) -> None:
        if self._run is not None:
            self._run.cancel()
            await asyncio.gather(self._run, return_exceptions=True)
        for task in sorted(self.tasks):
            await self._close(task, "standby_dropped", "stopping")
        self._health.standbys = {}
        if self._checkpoints is not None:
            with contextlib.suppress(Exception):
                await self._checkpoints.stop()
        for admin in self._admins.values():
            with contextlib.suppress(Exception):
                await admin.stop()

    # -- what the group says ----------------------------------------------------------------

    def report(self) -> dict[int, int | None]:
        """Each standby task's lag behind its latest checkpoint, for the group's metadata."""
        out: dict[int, int | None] = {}
        for task, standby in self.tasks.items():
            lags = [self._lag(s, s.checkpointed) for s in standby.stores.values()]
            known = [lag for lag in lags if lag is not None]
            out[task] = sum(known) if standby.opened and len(known) == len(lags) else None
        return out

    async def assign(self, tasks: set[int], warmups: set[int] | None = None) -> None:
        """Start the standbys of ``tasks`` not running yet, close those not in it; note
        which of them are ``warmups``."""
        for task in sorted(set(self.tasks) - tasks):
            await self._close(task, "standby_dropped", "assignment")
        for task in sorted(tasks - set(self.tasks)):
            self._add(task)
        self._warming = set(warmups or ()) & tasks
        if tasks:
            self._wake.set()

    async def promote(self, tasks: set[int]) -> None:
        """``tasks`` start here as active tasks: close their standbys and move each copy
        where the active task opens its store (a copy left by an earlier run too)."""
        for task in sorted(tasks):
            standby = self.tasks.get(task)
            if standby is not None:
                await self._close(task, "standby_promoted", "active here")
            else:
                standby = self._standby(task)
            for store in standby.stores.values():
                try:
                    moved = await store.move_when_unlocked(self._compare(store))
                except OSError as exc:
                    log.warning(
                        "standby_not_moved", task=store.task_name, store=store.name, error=str(exc)
                    )
                    continue
                if moved:
                    log.info(
                        "standby_moved_into_place",
                        task=store.task_name,
                        store=store.name,
                        applied=store.applied,
                    )

    # -- keeping up ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep every standby at its task's latest checkpoint, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval)
            self._wake.clear()
            if not self.tasks:
                continue
            try:
                await self._tick()
            except SamzapyError as exc:  # a broker outage, say: try again at the next tick
                log.warning("standby_catch_up_failed", error=str(exc))
            except Exception:  # a standby never fails the job: its task restores without it
                log.exception("standby_catch_up_failed")

    async def _tick(self) -> None:
        manager = self._checkpoints
        if manager is not None:
            await manager.refresh()
        await self._heads()
        for task in sorted(self.tasks):
            standby = self.tasks.get(task)
            if standby is None or any(s.closing for s in standby.stores.values()):
                continue
            async with standby.lock:
                if self.tasks.get(task) is not standby:
                    continue
                if not standby.opened:
                    standby.opened = self._open(standby)
                    if not standby.opened:
                        continue
                checkpoint = None if manager is None else await manager.read_last(standby.name)
                if checkpoint is None:
                    continue
                for name, store in standby.stores.items():
                    await self._catch_up(store, checkpoint.changelog_offsets.get(name))
                if task in self._warming and self.report().get(task) == 0:
                    self._warm(task)
        self._health.standbys = self._status()

    def _warm(self, task: int) -> None:
        """A warmup caught up; the last one asks for the assignment that moves them here."""
        self._warming.discard(task)
        if not self._warming and self.on_warm is not None:
            log.info("standby_warm", task=TaskName.for_partition(task))
            self.on_warm()

    async def _catch_up(self, store: StandbyStore, checkpointed: str | None) -> None:
        if store.engine is None:
            return
        if checkpointed is None:
            if store.applied is not None:  # the checkpoint dropped its changelog offsets
                await store.wipe()
            return
        store.checkpointed = checkpointed
        ssp = store.changelog
        admin = self._admins[ssp.system]
        if gap.ends_before(admin, checkpointed, store.head):
            # Read again: a checkpoint manager that reads its storage each time may have
            # found a checkpoint written since this tick read the heads.
            store.head = (await admin.offset_bounds([ssp]))[ssp].upcoming
        if gap.ends_before(admin, checkpointed, store.head):
            # The changelog ends before the checkpoint: it was made again, and the copy no
            # longer matches it. Drop the copy and wait for the task's next checkpoint (its
            # restore starts over from the new changelog too); reading up to this one would
            # wait for offsets that never come.
            if store.applied is not None:
                gap.made_again(
                    store.task_name,
                    store.name,
                    ssp,
                    checkpointed,
                    str(store.head),
                    store.applied,
                    None,
                    consequence="the standby's copy is wiped; it starts over from the task's "
                    "next checkpoint",
                )
                await store.wipe()
            return
        if store.applied is not None and admin.compare_offsets(store.applied, checkpointed) == 0:
            return
        bounds = (await admin.offset_bounds([ssp]))[ssp]
        held = gap.oldest_held(bounds)
        needed = store.applied or gap.FIRST_OFFSET
        if gap.lacks(admin, needed, held, checkpointed):
            # A truncated changelog: as a restore does, the copy gets what it holds (its
            # marker would have the active task's restore keep it as it is).
            gap.truncated(
                store.task_name,
                store.name,
                ssp,
                needed,
                held,
                checkpointed,
                None if store.applied is None else "standby",
            )
            if store.applied is not None:
                await store.wipe()
        began = time.monotonic()
        records = await store.catch_up(
            self._factories[ssp.system], admin, bounds.oldest, checkpointed
        )
        caught_up = store.applied == checkpointed
        first = caught_up and not store.caught_up
        store.caught_up = store.caught_up or caught_up
        (log.info if first else log.debug)(
            "standby_caught_up",
            task=store.task_name,
            store=store.name,
            records=records,
            applied=store.applied,
            elapsed_s=round(time.monotonic() - began, 3),
        )

    async def _heads(self) -> None:
        """Each standby changelog's head, for the changelog lag."""
        by_system: dict[str, list[tuple[SystemStreamPartition, StandbyStore]]] = {}
        for standby in self.tasks.values():
            for store in standby.stores.values():
                by_system.setdefault(store.changelog.system, []).append((store.changelog, store))
        for system, pairs in by_system.items():
            bounds = await self._admins[system].offset_bounds([ssp for ssp, _ in pairs])
            for ssp, store in pairs:
                store.head = bounds[ssp].upcoming

    # -- one standby --------------------------------------------------------------------------

    def _standby(self, task: int) -> StandbyTask:
        name = TaskName.for_partition(task)
        stores = {}
        for store in self._stores:
            cfg = self.config.stores[store]
            assert cfg.changelog is not None
            directory = self._base / store / task_directory_name(name)
            changelog = SystemStreamPartition(cfg.changelog.system, cfg.changelog.stream, task)
            stores[store] = StandbyStore(name, store, cfg, directory, changelog)
        return StandbyTask(task, name, stores)

    def _add(self, task: int) -> None:
        standby = self.tasks[task] = self._standby(task)
        for store in standby.stores.values():
            self._register(store)

    def _open(self, standby: StandbyTask) -> bool:
        for store in standby.stores.values():
            if store.engine is None and not store.open():
                return False
        for store in standby.stores.values():
            log.info("standby_started", task=standby.name, store=store.name, applied=store.applied)
        return True

    async def _close(self, task: int, event: str, reason: str) -> None:
        standby = self.tasks.get(task)
        if standby is None:
            return
        for store in standby.stores.values():
            store.closing = True
        async with standby.lock:
            del self.tasks[task]
            for store in standby.stores.values():
                lag = self._lag(store, store.checkpointed)
                await store.stop_reading()
                store.close()
                self._metrics.remove_group(_group(store))
                log.info(
                    event,
                    task=standby.name,
                    store=store.name,
                    applied=store.applied,
                    checkpoint_lag=lag,
                    records_applied=store.records_applied,
                    reason=reason,
                )
        self._health.standbys = self._status()

    # -- figures ------------------------------------------------------------------------------

    def _lag(self, store: StandbyStore, end: str | None) -> int | None:
        return store.lag(self._admins[store.changelog.system], end)

    def _compare(self, store: StandbyStore) -> Any:
        return self._admins[store.changelog.system].compare_offsets

    def _register(self, store: StandbyStore) -> None:
        group = _group(store)
        self._metrics.gauge(
            group,
            "checkpoint-lag",
            lambda: behind(self._lag(store, store.checkpointed), store.applied, store.checkpointed),
        )
        self._metrics.gauge(
            group,
            "changelog-lag",
            lambda: behind(self._lag(store, store.head), store.applied, store.head),
        )
        self._metrics.counter(group, "records-applied", lambda: store.records_applied)

    def _status(self) -> dict[str, Any]:
        return {
            str(standby.name): {
                name: {
                    "applied": store.applied,
                    "checkpoint_lag": self._lag(store, store.checkpointed),
                    "changelog_lag": self._lag(store, store.head),
                    "records_applied": store.records_applied,
                }
                for name, store in standby.stores.items()
            }
            for standby in self.tasks.values()
        }


def behind(lag: int | None, applied: str | None, end: str | None) -> int:
    """A lag gauge's value: ``lag``; for a standby that has applied nothing yet, the offsets
    up to ``end`` (at most that many records to read: never 0, which would say caught up);
    0 when there is nothing to reach (``end`` unknown: no checkpoint, or no head read yet)."""
    if lag is not None:
        return lag
    if applied is None and end is not None:
        try:
            return int(end) + 1
        except ValueError:
            return 0
    return 0


def _group(store: StandbyStore) -> str:
    return f"standby.{store.task_name}/{store.name}"


__all__ = ["Standbys", "behind", "standby_replicas", "standby_stores"]
