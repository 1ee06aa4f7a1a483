"""The checkpoints of a container's tasks: reading them at start-up, each task's writer, and
under exactly-once each task's transactional producer.

Start-up (``start``), in this order because the order is what fences a container that lost
its tasks:

0. exactly-once: check the job owns its checkpoint streams (``TransactionalCheckpointManager
   .own``; at-least-once, reading them in step 2 does), so that a job refused there has
   started nothing;
1. exactly-once: start each task's transactional producer (``transactional.id`` from the job
   name, job id and task name). Claiming the id aborts the transaction an earlier owner left
   open and fences its producer, so nothing it writes later can commit;
2. read each task's last checkpoint (``read_committed`` under exactly-once);
3. ``claim``: write each checkpoint found back with this container's owner epoch (its epoch
   plus one), so a container that lost a task without noticing cannot move its checkpoint.

Under exactly-once a task's outputs, changelog writes and checkpoint all go through its own
producer (``producers``); a send to any other system is refused.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from samzapy.api.system import SystemStream, TaskName
from samzapy.checkpoint.group import GroupOffsets
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.checkpoint.registry import checkpoint_manager
from samzapy.checkpoint.transactional import TransactionalCheckpointManager
from samzapy.checkpoint.writer import (
    Fetched,
    TaskCheckpointWriter,
    TransactionalCheckpointWriter,
)
from samzapy.config import ResolvedConfig
from samzapy.container.send_errors import RefusingProducer
from samzapy.container.stale_offsets import checked
from samzapy.system.fencing import WriteLease
from samzapy.system.ports import (
    SystemAdmin,
    SystemFactory,
    SystemProducer,
    TransactionalProducer,
)

log = structlog.get_logger("samzapy.container")


def checkpoint_namespace(config: ResolvedConfig) -> str:
    """``<job.name>-<job.id>``: the job's checkpoints among others' (the memory manager
    keeps them under it; a manager class of the job's own is given it)."""
    return f"{config.job.name}-{config.job.id}"


def transactional_id(config: ResolvedConfig, task: TaskName) -> str:
    """``samzapy-<job.name>-<job.id>-<task>``: the same for a task wherever it runs."""
    return re.sub(r"\s+", "-", f"samzapy-{config.job.name}-{config.job.id}-{task}")


class ContainerCheckpoints:
    """The checkpoint manager and the writers (and transactional producers) of the tasks."""

    def __init__(
        self,
        config: ResolvedConfig,
        factories: Mapping[str, SystemFactory],
        namespace: str,
        *,
        task_count: int,
        lease: WriteLease | None = None,
        group: GroupOffsets | None = None,
    ) -> None:
        self._config = config
        self._factories = factories
        self._lease = lease
        self._group = group
        self.manager: CheckpointManager | None = checkpoint_manager(
            config, factories, namespace, task_count=task_count
        )
        self._producers: dict[TaskName, TransactionalProducer] = {}
        self.writers: list[TaskCheckpointWriter] = []
        #: The inputs' topic IDs (``checked``), recorded by every checkpoint written.
        self._topic_ids: dict[SystemStream, str] | None = None

    @property
    def topic_ids(self) -> Mapping[SystemStream, str]:
        """The inputs' topic IDs looked up at start-up (``checked``; none before)."""
        return self._topic_ids or {}

    @property
    def transactional_system(self) -> str | None:
        manager = self.manager
        if isinstance(manager, TransactionalCheckpointManager):
            return manager.system_factory.system_name
        return None

    async def start(self, tasks: Sequence[TaskName]) -> dict[TaskName, Checkpoint]:
        """Steps 1 and 2; the checkpoints found, by task."""
        manager = self.manager
        if manager is None:
            log.warning(
                "checkpoints_disabled",
                reason="task.checkpoint.factory is not set; a restart will not resume",
            )
            return {}
        # 0. and 1. Claim the job's checkpoint stream, then the tasks' transactional ids.
        system = self.transactional_system
        if system is not None:
            assert isinstance(manager, TransactionalCheckpointManager)
            await manager.own()
            factory = self._factories[system]
            timeout_ms = self._config.task.transaction_timeout
            for task in tasks:
                self._producers[task] = factory.get_transactional_producer(
                    transactional_id(self._config, task), timeout_ms=timeout_ms
                )
            if self._lease is not None:
                for producer in self._producers.values():
                    producer.fence_with(self._lease)
            await asyncio.gather(*(p.start() for p in self._producers.values()))
        # 2. Read.
        for task in tasks:
            manager.register(task)
        await manager.start()
        found = {}
        for task in tasks:
            checkpoint = await manager.read_last(task)
            if checkpoint is not None:
                found[task] = checkpoint
                log.info(
                    "checkpoint_read",
                    task=task,
                    epoch=checkpoint.epoch,
                    offsets={str(ssp): o for ssp, o in checkpoint.offsets.items()},
                )
        return found

    async def checked(
        self,
        found: Mapping[TaskName, Checkpoint],
        counts: Mapping[SystemStream, int],
        admins: Mapping[str, SystemAdmin],
        *,
        stateless: bool = False,
    ) -> dict[TaskName, Checkpoint]:
        """The checkpoints ``start`` found, checked against the inputs (``stale_offsets``:
        ``counts``, their partition counts; ``stateless``, the job has no stores); the
        inputs' topic IDs it looked up are recorded by the checkpoints written from now on."""
        checkpoints, self._topic_ids = await checked(found, counts, admins, stateless=stateless)
        return checkpoints

    def producers(self, task: TaskName, systems: Mapping[str, SystemProducer]) -> dict[str, Any]:
        """The producers ``task`` sends through: the job's shared ones, or under exactly-once
        its transactional producer, and refusals for every other system."""
        system = self.transactional_system
        if system is None:
            return dict(systems)
        # Every configured system, connected or not: none is connected for a send it refuses.
        out: dict[str, SystemProducer] = {
            s: RefusingProducer(s, system) for s in (*self._factories, *systems)
        }
        out[system] = self._producers[task]
        return out

    def writer(
        self, task: TaskName, last: Checkpoint | None, *, fetched: Fetched | None = None
    ) -> TaskCheckpointWriter:
        """``fetched``: where the task's consumers are (``TaskCheckpointWriter``)."""
        manager = self.manager
        writer: TaskCheckpointWriter
        if isinstance(manager, TransactionalCheckpointManager):
            group = self._group
            if group is not None and group.system != manager.system_factory.system_name:
                group = None  # a transaction commits offsets to its own cluster's groups
            writer = TransactionalCheckpointWriter(
                manager,
                self._producers[task],
                task,
                last,
                group=group,
                fetched=fetched,
                topic_ids=self._topic_ids,
            )
        else:
            writer = TaskCheckpointWriter(
                manager,
                task,
                last,
                lease=self._lease,
                group=self._group,
                fetched=fetched,
                topic_ids=self._topic_ids,
            )
        self.writers.append(writer)
        return writer

    def last(self) -> dict[TaskName, Checkpoint]:
        """Each task's checkpoint last written (or read at start-up), whatever the manager."""
        return {w.task_name: w.last for w in self.writers if w.last is not None}

    async def claim(self) -> None:
        """Step 3, for every task's writer."""
        for writer in self.writers:
            await writer.claim()

    async def release(self, tasks: Sequence[TaskName]) -> None:
        """The tasks left the container after their final commit: stop their transactional
        producers (their writers stay, for the counts), and forget their offsets still
        waiting for the consumer group, which their new owner commits from now on."""
        for task in tasks:
            producer = self._producers.pop(task, None)
            if producer is not None:
                await _stop_producer(producer)
        if self._group is not None:
            leaving = set(tasks)
            for writer in self.writers:
                if writer.task_name in leaving and writer.last is not None:
                    self._group.forget(writer.last.offsets)

    async def stop(self, *, abandon: bool = False) -> None:
        """Stop the transactional producers (what they hold uncommitted is aborted: a clean
        stop committed everything before) and the manager. ``abandon`` (the container failed
        or lost its tasks): all at once, a checkpoint write under way given up, and what the
        producers held logged as ``output_dropped``."""
        producers, self._producers = list(self._producers.values()), {}
        manager = self.manager
        if not abandon:
            for producer in producers:
                await _stop_producer(producer)
            if manager is not None:
                await manager.stop()
            return
        stopping = [_stop_producer(p, abandon=True) for p in producers]
        if manager is not None:
            stopping.append(_abandon_manager(manager))
        if messages := sum(await asyncio.gather(*stopping)):
            log.info(
                "output_dropped",
                part="transactional producers",
                system=self.transactional_system,
                messages=messages,
                reason="the container failed or lost its tasks: their transactions never commit",
            )


async def _abandon_manager(manager: CheckpointManager) -> int:
    try:
        await manager.abandon()
    except Exception as exc:
        log.warning("system_stop_failed", part="checkpoint manager", error=repr(exc))
    return 0


async def _stop_producer(producer: TransactionalProducer, *, abandon: bool = False) -> int:
    """Stop ``producer`` (``abandon``: dropping what it holds); the messages dropped."""
    try:
        if abandon:
            return await producer.abandon()
        await producer.stop()
    except Exception as exc:
        log.warning("system_stop_failed", part="transactional producer", error=repr(exc))
    return 0


__all__ = [
    "ContainerCheckpoints",
    "checkpoint_namespace",
    "transactional_id",
]
