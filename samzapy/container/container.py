"""SamzaContainer: starts a job's tasks from its config, runs them, and shuts them down.

Start-up (Samza's container steps, in order):

1. build the systems (``systems.py``) and start their admins; prepare the streams
   (``streams.py``: create missing intermediate streams, check the inputs, count partitions);
2. decide the job model: which tasks the job has and which of them this container runs;
3. read each task's last checkpoint (``checkpoints.py``), checked (``stale_offsets.py``);
   claim the job's store directory (``store_directory.py``: refused if another job's);
4. plan the tasks (``plan.py``: where each partition resumes, what each task writes);
5. assemble: input queues and their consumers, the run loop, the output routers, then one
   task instance per task name with its stores;
6. start reporters and producers, claim the tasks, restore the stores, call ``init``,
   start the consumers and the partition-count monitor (``partition_monitor.py``), run.

Shutdown, after the run loop returns: close the tasks, commit every task, close the stores
marked clean, stop the systems. After a failure (or once the container gave its tasks up)
nothing is committed or written any more: the tasks are closed (errors logged) once their
calls left on the thread pool returned (for up to ``task.shutdown.ms``), what the
producers still hold is dropped, the systems stop within a bound (``shutdown.py``), and the
failure is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

import structlog

from samzapy.api.errors import TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.group import GroupOffsets
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import ResolvedConfig
from samzapy.container.assembly import TaskAssembly, assemble_inputs, task_factory_of
from samzapy.container.checkpoints import ContainerCheckpoints, checkpoint_namespace
from samzapy.container.clock import Clock, LoopClock
from samzapy.container.collector import OutputRouter
from samzapy.container.consumers import SystemConsumers
from samzapy.container.gauges import CONTAINER, ProcessTotals, partition_group, task_group
from samzapy.container.grouper import TaskModel
from samzapy.container.inputs import InputQueue
from samzapy.container.partition_monitor import PartitionCountMonitor
from samzapy.container.plan import ContainerPlan, job_model, plan_container
from samzapy.container.pool import task_pool
from samzapy.container.progress import finished_fields
from samzapy.container.run_loop import RunLoop
from samzapy.container.serdes import StreamSerdes
from samzapy.container.shutdown import close_after_failure, stop_cleanly, stop_parts
from samzapy.container.startup import log_started, unless_stopped
from samzapy.container.store_directory import claim_store_directory
from samzapy.container.streams import (
    declared_outputs,
    prepare_changelogs,
    prepare_streams,
    start_bounds,
)
from samzapy.container.systems import Systems
from samzapy.container.task_instance import TaskInstance
from samzapy.metrics import Health, MetricsRegistry, MetricsReporter
from samzapy.metrics.reporter import start_reporters, stop_reporters
from samzapy.system.fencing import ContainerLease, GroupLease

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
        lease: GroupLease | None = None,
        group_offsets: GroupOffsets | None = None,
        not_before: Awaitable[Any] | None = None,
        progress: bool = True,
        checkpoint_namespace: str | None = None,
    ) -> None:
        """``tasks``: whether to run the task of partition number k (None: every task of the
        job); ``reporters``: start the configured metrics reporters; ``totals``: the process's
        container counts this container adds to (a JobRunner's, which starts the reporters
        once for all its containers; None: its own); ``lease``: the group lease its writes
        go under (a JobRunner's; None: none); ``group_offsets``: where the checkpoints' input
        offsets are copied (the job's consumer group, a JobRunner's; None: nowhere);
        ``not_before``: what step 6 (the first to write or claim) waits for, a static member's
        fence wait; ``progress``: log ``progress`` and ``job_finished`` (else a JobRunner does);
        ``checkpoint_namespace``: the memory checkpoints' (None: ``<job.name>-<job.id>``)."""
        self.config = config
        self._checkpoint_namespace = checkpoint_namespace
        self._not_before = not_before
        self._progress = progress
        self._task_filter = tasks
        #: What /healthz and /readyz report; the stall watchdog records stalled tasks here.
        self.health = health if health is not None else Health()
        self._start_reporters = reporters
        #: Set once every task is restored, initialized and consuming.
        self.started = asyncio.Event()
        self._task_factory = task_factory
        self.clock: Clock = clock or LoopClock()
        self._monitor = PartitionCountMonitor.of(config, self.clock)
        self.metrics = metrics or MetricsRegistry()
        if totals is None:
            totals = ProcessTotals()
            totals.register(self.metrics)
        self._totals = totals
        self._stop_reason: str | None = None
        #: Set by request_stop and by abandon: cuts start-up short (a broker slow to answer).
        self._halted = asyncio.Event()
        #: Why the container gave its tasks up (abandon), once it did.
        self._abandoned: TaskFencedError | None = None
        #: Set once it failed (or gave its tasks up): it writes nothing more, drops the rest.
        self._failed = False
        self.run_loop: RunLoop | None = None
        self._routers: list[OutputRouter] = []
        # Writes need the group's lease and a container still running them.
        self._lease = None if lease is None else ContainerLease(lease, lambda: self._failed)
        self._group_offsets = group_offsets
        self._systems: Systems | None = None
        self._checkpoints: ContainerCheckpoints | None = None
        self._partitions: dict[TaskName, list[SystemStreamPartition]] = {}
        self._queues: dict[TaskName, dict[SystemStreamPartition, InputQueue]] = {}
        self._task_routers: dict[TaskName, OutputRouter] = {}
        self._consumers: SystemConsumers | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._reporters: list[MetricsReporter] = []
        self.tasks: list[TaskInstance] = []
        #: The released tasks' messages and commits (the counts only grow); those releasing.
        self._released_processed = self._released_commits = 0
        self._leaving: list[TaskInstance] = []

    @property
    def checkpoint_namespace(self) -> str:
        """Where the memory checkpoint manager keeps this job's checkpoints."""
        return self._checkpoint_namespace or checkpoint_namespace(self.config)

    @property
    def commit_count(self) -> int:
        """Commits the container's tasks (released ones included) have made so far."""
        running = [*self.tasks, *self._leaving]
        return self._released_commits + sum(t.progress().commits for t in running)

    @property
    def checkpoints_written(self) -> int:
        """Checkpoint records written: one per commit moving a task's, one per task taken over."""
        return sum(w.written for w in self._checkpoints.writers) if self._checkpoints else 0

    @property
    def last_checkpoints(self) -> dict[TaskName, Checkpoint]:
        """Each task's checkpoint last written or read, whatever ``task.checkpoint.factory``."""
        return self._checkpoints.last() if self._checkpoints else {}

    @property
    def metric_groups(self) -> list[str]:
        """The metric groups of its tasks and their partitions (a JobRunner's to remove)."""
        return self._groups([t.name for t in self.tasks])

    def open_inputs(self) -> dict[TaskName, list[SystemStreamPartition]]:
        """Each task's input partitions that have not ended for it yet."""
        return {
            name: [ssp for ssp, queue in queues.items() if not queue.ended]
            for name, queues in self._queues.items()
        }

    def _groups(self, names: Collection[TaskName]) -> list[str]:
        """The metric groups of tasks ``names`` and of the partitions only they read."""
        read = self._partitions
        others = {ssp for name, ssps in read.items() if name not in names for ssp in ssps}
        ssps = dict.fromkeys(s for name in names for s in read.get(name, ()) if s not in others)
        return [*(task_group(name) for name in names), *(partition_group(s) for s in ssps)]

    def _counts(self) -> dict[str, int]:
        written = self.checkpoints_written
        return {"processed": self.processed, "commits": self.commit_count, "checkpoints": written}

    @property
    def processed(self) -> int:
        """Messages the container's tasks (released ones included) have processed so far."""
        running = [*self.tasks, *self._leaving]
        return self._released_processed + sum(t.progress().processed for t in running)

    async def flush(self) -> None:
        """Return once everything the tasks sent so far is durable."""
        for router in self._routers:
            await router.flush()

    def abandon(self, reason: str) -> None:
        """The container may have lost its tasks: stop them at once, committing nothing. A
        start-up under way stops where it is (before it claims, restores or consumes any
        more) and ``run`` raises the error."""
        if self._abandoned is None:
            self._abandoned = TaskFencedError(f"the container may have lost its tasks: {reason}")
        self._failed = True
        self._halted.set()
        if self.run_loop is not None:
            self.run_loop.fail(self._abandoned)

    def request_stop(self, reason: str, quiet: bool = False) -> None:
        """Graceful stop: stop consuming, finish in-flight work, close, commit (quiet: no log)."""
        self.health.ready = False  # draining: /readyz answers 503 from now on
        self._stop_reason = reason
        self._halted.set()
        if self.run_loop is not None:
            self.run_loop.request_stop(reason, quiet)

    async def run(self) -> None:
        """Run the job until it ends or is stopped; raise SamzapyError if it failed."""
        started = time.monotonic()
        try:
            run_loop = await unless_stopped(self._start(), self._halted)
            if self._abandoned is not None:
                raise self._abandoned  # its tasks closed below, nothing committed
            if run_loop is None:
                log.info("startup_stopped", reason=self._stop_reason)
                await close_after_failure(self.tasks)
                return
            await run_loop.run(self.tasks)
            await stop_cleanly(self.tasks, self._systems, lambda: self._abandoned)
        except BaseException:
            self._failed = True  # its lease given up: nothing more is written
            wait_s = self.config.task.shutdown_ms / 1000  # for calls left on the thread pool
            await close_after_failure(self.tasks, clock=self.clock, wait_s=wait_s)
            raise
        finally:
            await self._stop_systems()
        self._monitor.check()  # an input's partition count changed: stopped, now it fails
        if self._progress:  # a JobRunner's share: the runner sums up the process instead
            log.info(
                "job_finished", **finished_fields(run_loop.stop_reason, started, self._counts())
            )

    # -- start-up -------------------------------------------------------------------------------

    async def _start(self) -> RunLoop:
        """Start-up, the module docstring's steps; the run loop, ready to run the tasks."""
        cfg = self.config
        task_factory = task_factory_of(cfg, self._task_factory)
        # 1. Systems and streams.
        self._systems = systems = Systems(cfg, self._lease)
        await systems.start_admins()
        counts = await prepare_streams(cfg, systems.admins)
        getattr(task_factory, "check_partitions", lambda counts: None)(counts)  # an app's joins
        # 2. The job model.
        models, job_task_count = job_model(cfg, counts, self._task_filter)
        # 3. Checkpoints (under exactly-once, each task's transactional producer first).
        checkpoints = await self._read_checkpoints(models, job_task_count, counts)
        # 4. The plan, with the heads of the bootstrap inputs the tasks are behind on, and
        #    where a partition without a checkpointed offset starts (its default, resolved).
        serdes = StreamSerdes(cfg, systems.factories)
        plan = plan_container(
            cfg,
            models,
            checkpoints,
            admins=systems.admins,
            default_offsets={n: f.default_offset for n, f in systems.factories.items()},
            carries_watermarks=serdes.carries_watermarks,
            bounds=await start_bounds(cfg, systems.admins, models, checkpoints),
        )
        # 5. Assembly: inputs, the run loop, the routers, the tasks.
        run_loop = self._assemble_inputs(plan, serdes)
        assembly = self._assemble_tasks(plan, serdes, counts, job_task_count, task_factory)
        named = cfg.task.task_class if self._task_factory is None else repr(task_factory)
        group = None if self._group_offsets is None else self._group_offsets.group_id
        log_started(cfg, self.tasks, job_task_count, named, group, self._totals)
        # 6. Reporters, producers, stores, init, consumers.
        await (self._not_before or asyncio.sleep(0))
        await self._start_tasks(plan, assembly, job_task_count)
        self.started.set()
        self.health.ready = self._stop_reason is None  # a stop asked meanwhile: draining
        return run_loop

    async def _read_checkpoints(
        self, models: list[TaskModel], job_task_count: int, counts: Mapping[SystemStream, int]
    ) -> dict[TaskName, Checkpoint]:
        """Step 3: each task's last checkpoint, its counts and topic IDs checked."""
        assert self._systems is not None
        self._checkpoints = ContainerCheckpoints(
            self.config,
            self._systems.factories,
            self.checkpoint_namespace,
            task_count=job_task_count,
            lease=self._lease,
            group=self._group_offsets,
        )
        checkpoints = await self._checkpoints.start([m.name for m in models])
        claim_store_directory(self.config)  # after the checkpoints': none claimed if refused
        admins, stateless = self._systems.admins, not self.config.stores
        return await self._checkpoints.checked(checkpoints, counts, admins, stateless=stateless)

    def _assemble_inputs(self, plan: ContainerPlan, serdes: StreamSerdes) -> RunLoop:
        """Step 5, inputs: the queues, the consumers filling them and the run loop."""
        assert self._systems is not None and self._checkpoints is not None
        inputs = assemble_inputs(
            self.config,
            plan,
            self._systems,
            serdes,
            clock=self.clock,
            health=self.health,
            checkpoints=self._checkpoints,
            on_dropped=lambda: self.metrics.counter(CONTAINER, "deserialization-errors").inc(),
        )
        self.run_loop = inputs.run_loop
        self._consumers, self._queues = inputs.consumers, inputs.queues
        if self._stop_reason is not None:
            inputs.run_loop.request_stop(self._stop_reason)
        return inputs.run_loop

    def _assemble_tasks(
        self,
        plan: ContainerPlan,
        serdes: StreamSerdes,
        counts: Mapping[SystemStream, int],
        job_task_count: int,
        task_factory: Callable[[], Any],
    ) -> TaskAssembly:
        """Step 5, tasks: the thread pool, the routers and one task instance per task, its
        consumers registered where the plan says each partition resumes."""
        cfg, systems, run_loop = self.config, self._systems, self.run_loop
        assert systems is not None and run_loop is not None and self._consumers is not None
        assert self._checkpoints is not None
        if cfg.job.container_thread_pool_size > 1:
            self._executor = task_pool(cfg.job.container_thread_pool_size)
        assembly = TaskAssembly(
            config=cfg,
            systems=systems,
            checkpoints=self._checkpoints,
            serdes=serdes,
            clock=self.clock,
            metrics=self.metrics,
            listener=run_loop,
            fail=run_loop.fail,
            space_freed=self._consumers.space_freed,
            partition_counts=counts,
            job_task_count=job_task_count,
            executor=self._executor,
        )
        run_loop.lags = assembly.lags
        run_loop.progress_s = run_loop.progress_s if self._progress else None
        self._task_routers = assembly.routers(plan.tasks)
        self._routers = list(dict.fromkeys(self._task_routers.values()))
        for task_plan in plan.tasks:
            self._partitions[task_plan.name] = list(task_plan.last_processed)
            router = self._task_routers[task_plan.name]
            queues = self._queues[task_plan.name]
            self.tasks.append(assembly.task(task_plan, task_factory(), queues, router))
        self._totals.running(self._counts)
        for start in plan.starts:
            systems.consumers[start.ssp.system].register(start.ssp, start.offset, start.default)
        return assembly

    async def _start_tasks(
        self, plan: ContainerPlan, assembly: TaskAssembly, job_task_count: int
    ) -> None:
        """Step 6: start the reporters and producers, look the outputs up, claim the tasks,
        restore their stores, call ``init``, start the consumers."""
        cfg, systems = self.config, self._systems
        assert systems is not None and self._checkpoints is not None
        if self._start_reporters:
            self._reporters = await start_reporters(cfg, self.metrics, self.health)
        await systems.start_producers()
        await prepare_changelogs(cfg, systems.admins, job_task_count)
        for router in self._routers:
            await router.prepare(declared_outputs(cfg))
        await self._checkpoints.claim()
        clock = self.clock  # under the group, a paused old owner's lock is waited out:
        wait = None if self._lease is None else lambda s: clock.sleep_until(clock.now() + s)
        for task, task_plan in zip(self.tasks, plan.tasks, strict=True):
            if task.stores:
                await task.stores.open_waiting(wait)
                last = task_plan.checkpoint
                if last is None:
                    await task.stores.restore(None)
                else:
                    await task.stores.restore(last.changelog_offsets, last.snapshots)
        for task, task_plan in zip(self.tasks, plan.tasks, strict=True):
            await task.init(assembly.context(task_plan.model, task))
        for consumer in systems.consumers.values():
            await consumer.start()
        self._monitor.start(
            systems.admins, assembly.partition_counts, self.request_stop, self._routers
        )

    # -- releasing tasks while the others run ---------------------------------------------------

    async def release(self, names: Collection[TaskName]) -> bool:
        """Stop running tasks ``names`` while the others go on (a rebalance moved them): stop
        dispatching to them, let their calls in flight finish (``task.shutdown.ms``), close,
        commit, close their stores marked clean, and stop reading their partitions. False
        when the container is stopping already (its stop commits every task). A failure
        fails the whole container, as in ``run``."""
        run_loop, consumers, checkpoints = self.run_loop, self._consumers, self._checkpoints
        if run_loop is None or consumers is None or checkpoints is None:
            return False
        if run_loop.stop_reason is not None or run_loop.failure is not None:
            return False
        leaving = [t for t in self.tasks if t.name in names]
        groups = self._groups([t.name for t in leaving])
        # From now on the container's own stop leaves them alone.
        self.tasks = [t for t in self.tasks if t.name not in names]
        self._leaving = leaving
        try:
            await run_loop.release([t.name for t in leaving])
            if run_loop.failure is not None:
                raise run_loop.failure
            await stop_cleanly(leaving)
        except BaseException as exc:
            for task in leaving:
                await task.close_stores(clean=False)
            run_loop.fail(exc)
            raise
        finally:
            self._leaving = []
            self._released_processed += sum(t.progress().processed for t in leaving)
            self._released_commits += sum(t.progress().commits for t in leaving)
        for task in leaving:
            consumers.release(self._queues.pop(task.name).values())
            self._partitions.pop(task.name, None)
            router = self._task_routers.pop(task.name)
            if router not in self._task_routers.values():
                self._routers.remove(router)
        await checkpoints.release([t.name for t in leaving])
        for group in groups:
            self.metrics.remove_group(group)
        return True

    # -- shutdown -------------------------------------------------------------------------------

    async def _stop_systems(self) -> None:
        self._monitor.stop()  # before the admins it asks
        await stop_parts(self._systems, self._checkpoints, abandon=self._failed)
        self._totals.ended(self._counts)
        await stop_reporters(self._reporters)
        if self._executor is not None:
            # A call given up at task.shutdown.ms runs on (pool.py: samzapy run leaves it).
            self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["SamzaContainer"]
