"""SamzaContainer: starts a job's tasks from its config, runs them, and shuts them down.

Start-up (Samza's container steps, in order):

1. build the systems (``systems.py``) and start their admins; prepare the streams
   (``streams.py``: create missing intermediate streams, check the inputs, count partitions);
2. decide the job model: which tasks the job has and which of them this container runs;
3. read each task's last checkpoint (``checkpoints.py``) and check its partition counts;
4. plan the tasks (``plan.py``: where each partition resumes, what each task writes);
5. assemble: input queues and their consumers, the run loop, the output routers, then one
   task instance per task name with its stores;
6. start reporters and producers, claim the tasks, restore the stores, call ``init``,
   start the consumers and run.

Shutdown, after the run loop returns: close the tasks, commit every task, close the stores
marked clean, stop the systems. After a failure nothing is committed: the tasks are closed
(errors logged) and the failure is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from samzapy.api.errors import SamzapyError, TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import check_partition_counts
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.config import ResolvedConfig
from samzapy.config.classes import load_task_class
from samzapy.container.checkpoints import ContainerCheckpoints
from samzapy.container.clock import Clock, LoopClock
from samzapy.container.collector import OutputRouter, TaskCollector
from samzapy.container.consumers import SystemConsumers
from samzapy.container.context import TaskContextImpl
from samzapy.container.gauges import (
    CONTAINER,
    ProcessTotals,
    partition_group,
    register_task_metrics,
    task_group,
)
from samzapy.container.grouper import TaskModel
from samzapy.container.inputs import InputQueue, TaskInputs
from samzapy.container.plan import TaskPlan, input_queues, job_model, plan_container
from samzapy.container.run_loop import RunLoop
from samzapy.container.serdes import StreamSerdes
from samzapy.container.streams import prepare_changelogs, prepare_streams
from samzapy.container.systems import Systems
from samzapy.container.task_instance import TaskInstance, TaskListener
from samzapy.control.reconcile import TaskControl
from samzapy.metrics import Health, MetricsRegistry, MetricsReporter
from samzapy.metrics.registry import Timer
from samzapy.metrics.reporter import start_reporters
from samzapy.storage.task_stores import TaskStores
from samzapy.system.ports import SystemProducer

log = structlog.get_logger("samzapy.container")


class SamzaContainer:
    """Runs the tasks of one job (or of this container's share of it) in this process."""

    def __init__(
        self,
        config: ResolvedConfig,
        *,
        task_factory: Callable[[], Any] | None = None,
        clock: Clock | None = None,
        metrics: MetricsRegistry | None = None,
        tasks: Callable[[int], bool] | None = None,
        reporters: bool = True,
        health: Health | None = None,
        totals: ProcessTotals | None = None,
        lease: Callable[[], bool] | None = None,
    ) -> None:
        """``tasks``: whether to run the task of partition number k (None: every task of the
        job); ``reporters``: start the configured metrics reporters; ``totals``: the process's
        container counts this container adds to (a JobRunner's, which starts the reporters
        once for all its containers; None: its own); ``lease``: whether the container may
        still be sure it owns its tasks (a JobRunner's group lease; None: always)."""
        self.config = config
        self._task_filter = tasks
        #: What /healthz and /readyz report; the stall watchdog records stalled tasks here.
        self.health = health if health is not None else Health()
        self._start_reporters = reporters
        #: Set once every task is restored, initialized and consuming.
        self.started = asyncio.Event()
        self._task_factory = task_factory
        self.clock: Clock = clock or LoopClock()
        self.metrics = metrics or MetricsRegistry()
        if totals is None:
            totals = ProcessTotals()
            totals.register(self.metrics)
        self._totals = totals
        self._stop_reason: str | None = None
        self.run_loop: RunLoop | None = None
        self._routers: list[OutputRouter] = []
        self._lease = lease
        self._systems: Systems | None = None
        self._checkpoints: ContainerCheckpoints | None = None
        self._partitions: list[SystemStreamPartition] = []
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._reporters: list[MetricsReporter] = []
        self.tasks: list[TaskInstance] = []

    @property
    def checkpoint_namespace(self) -> str:
        """Where the memory checkpoint manager keeps this job's checkpoints."""
        return f"{self.config.job.name}-{self.config.job.id}"

    @property
    def commit_count(self) -> int:
        """Checkpoints written so far."""
        return sum(w.written for w in self._checkpoints.writers) if self._checkpoints else 0

    @property
    def metric_groups(self) -> list[str]:
        """The metric groups of this container's tasks and their input partitions (a
        JobRunner removes them once the tasks have left)."""
        tasks = [task_group(t.name) for t in self.tasks]
        return [*tasks, *dict.fromkeys(partition_group(ssp) for ssp in self._partitions)]

    def _counts(self) -> dict[str, int]:
        return {"processed": self.processed, "commits": self.commit_count}

    @property
    def processed(self) -> int:
        """Messages the container's tasks have processed so far."""
        return sum(t.progress().processed for t in self.tasks)

    async def flush(self) -> None:
        """Return once everything the tasks sent so far is durable."""
        for router in self._routers:
            await router.flush()

    def abandon(self, reason: str) -> None:
        """The container may have lost its tasks: stop them at once, committing nothing."""
        if self.run_loop is not None:
            self.run_loop.fail(TaskFencedError(f"the container may have lost its tasks: {reason}"))

    def request_stop(self, reason: str) -> None:
        """Graceful stop: stop consuming, finish in-flight work, close, commit."""
        self._stop_reason = reason
        if self.run_loop is not None:
            self.run_loop.request_stop(reason)

    async def run(self) -> None:
        """Run the job until it ends or is stopped; raise SamzapyError if it failed."""
        started = time.monotonic()
        try:
            run_loop = await self._start()
            await run_loop.run(self.tasks)
            await self._finish()
        except BaseException:
            await self._close_tasks_after_failure()
            raise
        finally:
            await self._stop_systems()
        elapsed = time.monotonic() - started
        processed = self.processed
        log.info(
            "job_finished",
            reason=run_loop.stop_reason,
            processed=processed,
            elapsed_s=round(elapsed, 3),
            rate=round(processed / elapsed, 1) if elapsed > 0 else None,
            commits=self.commit_count,
        )

    # -- start-up -------------------------------------------------------------------------------

    async def _start(self) -> RunLoop:
        cfg = self.config
        task_factory = self._task_factory or load_task_class(cfg.task.task_class)
        # 1. Systems and streams.
        self._systems = systems = Systems(cfg)
        if self._lease is not None:
            for producer in systems.producers.values():
                producer.fence_with(self._lease)
        await systems.start_admins()
        counts = await prepare_streams(cfg, systems.admins)
        # 2. The job model.
        models, job_task_count = job_model(cfg, counts, self._task_filter)
        # 3. Checkpoints (under exactly-once, each task's transactional producer first).
        self._checkpoints = ContainerCheckpoints(
            cfg,
            systems.factories,
            self.checkpoint_namespace,
            task_count=job_task_count,
            lease=self._lease,
        )
        checkpoints = await self._checkpoints.start([m.name for m in models])
        check_partition_counts(checkpoints, counts)
        # 4. The plan.
        serdes = StreamSerdes(cfg, systems.factories)
        plan = plan_container(
            cfg,
            models,
            checkpoints,
            admins=systems.admins,
            default_offsets={n: f.default_offset for n, f in systems.factories.items()},
            carries_watermarks=serdes.carries_watermarks,
        )
        # 5. Assembly: inputs, the run loop, the router, the tasks.
        queues = input_queues(plan)
        by_ssp: dict[SystemStreamPartition, list[InputQueue]] = defaultdict(list)
        for task_queues in queues.values():
            for ssp, q in task_queues.items():
                by_ssp[ssp].append(q)
        consumers = SystemConsumers(
            systems.consumers,
            by_ssp,
            {ssp: serdes.input(ssp) for ssp in by_ssp},
            compare_offsets={n: a.compare_offsets for n, a in systems.admins.items()},
            poll_timeout=cfg.task.poll_timeout_ms / 1000,
            drop_deserialization_errors=cfg.task.drop_deserialization_errors,
            on_dropped=lambda ssp: self.metrics.counter(CONTAINER, "deserialization-errors").inc(),
        )
        self.run_loop = run_loop = RunLoop(
            consumers=[functools.partial(consumers.run, s) for s in sorted(systems.consumers)],
            clock=self.clock,
            window_ms=cfg.task.window_ms,
            commit_ms=cfg.task.commit_ms,
            callback_timeout_ms=cfg.task.callback_timeout_ms,
            shutdown_ms=cfg.task.shutdown_ms,
            progress_interval_ms=cfg.task.progress_interval_ms,
            checkpointing=self._checkpoints.manager is not None,
            stall_timeout_ms=cfg.task.stall_timeout_ms,
            stall_fail=cfg.task.stall_fail,
            health=self.health,
        )
        if self._stop_reason is not None:
            run_loop.request_stop(self._stop_reason)
        routers = self._routers_by_task(plan.tasks, serdes, run_loop)
        if cfg.job.container_thread_pool_size > 1:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                cfg.job.container_thread_pool_size, thread_name_prefix="samzapy-task"
            )
        parts = _SharedParts(
            routers=routers,
            serdes=serdes,
            listener=run_loop,
            space_freed=consumers.space_freed,
            partition_counts=counts,
            job_task_count=job_task_count,
            commit_latency=self.metrics.timer(CONTAINER, "commit-latency"),
        )
        for task_plan in plan.tasks:
            self.tasks.append(self._task_instance(task_plan, task_factory(), queues, parts))
        self._totals.running(self._counts)
        for start in plan.starts:
            systems.consumers[start.ssp.system].register(start.ssp, start.offset, start.default)
        self._log_started(task_factory, job_task_count)
        # 6. Reporters, producers, stores, init, consumers.
        if self._start_reporters:
            self._reporters = await start_reporters(cfg, self.metrics, self.health)
        for producer in systems.producers.values():
            await producer.start()
        await prepare_changelogs(cfg, systems.admins, job_task_count)
        declared = [
            SystemStream(s.system, s.physical_name) for s in cfg.streams.values() if s.system
        ]
        for router in self._routers:
            await router.prepare(declared)
        await self._checkpoints.claim()
        for task, task_plan in zip(self.tasks, plan.tasks, strict=True):
            if task.stores:
                task.stores.open()
                checkpoint = task_plan.checkpoint
                await task.stores.restore(checkpoint.changelog_offsets if checkpoint else {})
        for task, task_plan in zip(self.tasks, plan.tasks, strict=True):
            await task.init(self._context(task_plan.model, task))
        for consumer in systems.consumers.values():
            await consumer.start()
        self.started.set()
        self.health.ready = True
        return run_loop

    def _task_instance(
        self,
        plan: TaskPlan,
        task: Any,
        queues: dict[TaskName, dict[SystemStreamPartition, InputQueue]],
        parts: _SharedParts,
    ) -> TaskInstance:
        cfg = self.config
        assert self._systems is not None
        control = TaskControl(carrying=plan.carrying, outputs=plan.outputs)
        if plan.checkpoint is not None:
            control.restore(plan.checkpoint.control)
        assert self._checkpoints is not None
        writer = self._checkpoints.writer(plan.name, plan.checkpoint)
        router = parts.routers[plan.name]
        trackers = {ssp: OffsetTracker(last) for ssp, last in plan.last_processed.items()}
        self._partitions.extend(trackers)
        collector = TaskCollector(router, asyncio.get_running_loop(), plan.name)
        stores = TaskStores(
            task_name=plan.name,
            partition=plan.model.partition,
            configs=cfg.stores,
            base_dir=Path(cfg.job.logged_store_base_dir) / cfg.job.name,
            serde=parts.serdes.store,
            send=collector.send,
            flush=router.flush,
            factories=self._systems.factories,
            admins=self._systems.admins,
        )
        instance = TaskInstance(
            name=plan.name,
            task=task,
            inputs=TaskInputs(
                queues[plan.name].values(), space_freed=parts.space_freed, ended=control.ended
            ),
            trackers=trackers,
            collector=collector,
            router=router,
            clock=self.clock,
            checkpoints=writer,
            listener=parts.listener,
            max_concurrency=cfg.task.max_concurrency,
            executor=self._executor,
            stores=stores,
            control=control,
            task_count=parts.job_task_count,
            partition_counts=parts.partition_counts,
            latency=self.metrics.timer(task_group(plan.name), "process-latency"),
            commit_latency=parts.commit_latency,
            track_call_starts=cfg.task.callback_timeout_ms > 0,
        )
        consumers = self._systems.consumers
        register_task_metrics(
            self.metrics,
            instance,
            writer,
            [
                (ssp, consumers[ssp.system], tracker)
                for ssp, tracker in trackers.items()
                if ssp.system in consumers
            ],
        )
        return instance

    def _log_started(self, task_factory: Callable[[], Any], job_task_count: int) -> None:
        cfg, broadcasts = self.config, self.config.task.broadcast_inputs
        log.info(
            "container_started",
            inputs=[str(ss) for ss in dict.fromkeys(cfg.task.inputs)],
            broadcast_inputs=[f"{b.system_stream}#{list(b.partitions)}" for b in broadcasts],
            tasks=len(self.tasks),
            task_names=[str(t.name) for t in self.tasks],
            job_tasks=job_task_count,
            task_class=cfg.task.task_class if self._task_factory is None else repr(task_factory),
            max_concurrency=cfg.task.max_concurrency,
            thread_pool_size=cfg.job.container_thread_pool_size,
            checkpoints=cfg.task.checkpoint_factory,
            processing_guarantee=cfg.task.processing_guarantee,
        )

    def _routers_by_task(
        self, tasks: Sequence[TaskPlan], serdes: StreamSerdes, run_loop: RunLoop
    ) -> dict[TaskName, OutputRouter]:
        """One router for all tasks, or under exactly-once one per task, over its producers."""
        cfg, systems, checkpoints = self.config, self._systems, self._checkpoints
        assert systems is not None and checkpoints is not None

        def router(producers: Mapping[str, SystemProducer]) -> OutputRouter:
            made = OutputRouter(
                producers,
                systems.admins,
                serdes.output,
                lambda ss: cfg.stream(ss).partitions or 1,
                replication_for_new=lambda ss: cfg.stream(ss).replication_factor,
                stream_id=lambda ss: cfg.stream(ss).stream_id,
                framed=serdes.framed,
                drop_errors=cfg.task.drop_producer_errors,
                on_dropped=lambda n: self.metrics.counter(CONTAINER, "producer-errors").inc(n),
                on_error=run_loop.fail,
            )
            self._routers.append(made)
            return made

        if checkpoints.transactional_system is None:
            shared = router(systems.producers)
            return {t.name: shared for t in tasks}
        return {t.name: router(checkpoints.producers(t.name, systems.producers)) for t in tasks}

    def _context(self, model: TaskModel, instance: TaskInstance) -> TaskContextImpl:
        return TaskContextImpl(
            task_name=model.name,
            config=self.config.raw,
            system_stream_partitions=frozenset(model.ssps),
            metrics=self.metrics,
            stores=instance.stores.stores if instance.stores else None,
        )

    # -- shutdown -------------------------------------------------------------------------------

    async def _finish(self) -> None:
        """A clean end: close the tasks, commit every task, close the stores marked clean."""
        for task in self.tasks:
            await task.close()
        for task in self.tasks:
            await task.commit()
        for task in self.tasks:
            await task.close_stores(clean=True)

    async def _close_tasks_after_failure(self) -> None:
        for task in self.tasks:
            try:
                await task.close()
            except SamzapyError as exc:
                log.warning("task_close_failed", task=task.name, error=str(exc))
            await task.close_stores(clean=False)

    async def _stop_systems(self) -> None:
        if self._systems is not None:
            await self._systems.stop()
        if self._checkpoints is not None:
            await self._checkpoints.stop()
        self._totals.ended(self._counts)
        for reporter in self._reporters:
            await reporter.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class _SharedParts:
    """What every task instance of the container shares."""

    routers: Mapping[TaskName, OutputRouter]
    serdes: StreamSerdes
    listener: TaskListener
    space_freed: Callable[[], None]
    partition_counts: Mapping[SystemStream, int]
    job_task_count: int
    commit_latency: Timer


__all__ = ["SamzaContainer"]
