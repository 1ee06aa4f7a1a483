"""SamzaContainer: builds a job's tasks from its config, runs them, and shuts them down.

Start-up (seed 003's TaskRunner steps, in order):

1. load the task class and build the systems (admins, consumers, producers) and serdes;
2. create the intermediate streams that are missing, ask the admins for the inputs'
   partition counts and group them into tasks;
3. read each task's last checkpoint and register every input partition with its consumer
   at the offset after it (or at the stream's offset default);
4. instantiate the task once per task name and call ``init``;
5. start the producers, the consumers and the run loop (timers start with it).

Shutdown, after the run loop returns: close the tasks, flush the producers, commit every
task, then stop consumers, producers and the checkpoint manager. After a failure nothing is
committed: the tasks are closed (errors logged) and the failure is raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from samzapy.api.errors import ConfigError, SamzapyError, StoreError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.config import ResolvedConfig
from samzapy.config.classes import load_task_class
from samzapy.container.checkpointing import (
    check_partition_counts,
    checkpoint_manager,
    partition_counts_extra,
)
from samzapy.container.clock import Clock, LoopClock
from samzapy.container.collector import OutputRouter, TaskCollector
from samzapy.container.consumers import InputQueue, InputSerdes, SystemConsumers
from samzapy.container.context import TaskContextImpl
from samzapy.container.grouper import TaskModel, group_by_partition
from samzapy.container.run_loop import RunLoop
from samzapy.container.stores import TaskStores
from samzapy.container.task_instance import TaskInstance
from samzapy.control.reconcile import CONTROL_STATE, TaskControl
from samzapy.metrics import Health, MetricsRegistry, MetricsReporter, reporter_for
from samzapy.system.ports import SystemAdmin, SystemConsumer, SystemFactory, SystemProducer
from samzapy.system.registry import system_factory_class
from samzapy.system.serde import Serde, SerdeRegistry

log = structlog.get_logger("samzapy.container")


def system_factory(config: ResolvedConfig, name: str) -> SystemFactory:
    """The factory of system ``name`` (``systems.<name>.samza.factory``) with its settings."""
    system = config.systems[name]
    factory_class = system_factory_class(system.factory, key=f"systems.{name}.samza.factory")
    return factory_class(name, system.params)


class SamzaContainer:
    """Runs every task of one job in this process."""

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
    ) -> None:
        """``tasks``: whether to run the task of partition number k (None: every task of the
        job); ``reporters``: start the configured metrics reporters (a JobRunner starts them
        once for all its containers instead)."""
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
        self._stop_reason: str | None = None
        self.run_loop: RunLoop | None = None
        self._serdes = SerdeRegistry(config.serializers)
        self._factories: dict[str, SystemFactory] = {}
        self._admins: dict[str, SystemAdmin] = {}
        self._consumers: dict[str, SystemConsumer] = {}
        self._producers: dict[str, SystemProducer] = {}
        self._checkpoints: CheckpointManager | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._reporters: list[MetricsReporter] = []
        self._changelogs = {s.changelog for s in config.stores.values() if s.changelog}
        self.tasks: list[TaskInstance] = []

    @property
    def checkpoint_namespace(self) -> str:
        """Where the memory checkpoint manager keeps this job's checkpoints."""
        return f"{self.config.job.name}-{self.config.job.id}"

    def request_stop(self, reason: str) -> None:
        """Graceful stop: stop consuming, finish in-flight work, close, commit."""
        self._stop_reason = reason
        if self.run_loop is not None:
            self.run_loop.request_stop(reason)

    async def run(self) -> None:
        """Run the job until it ends or is stopped; raise SamzapyError if it failed."""
        started = time.monotonic()
        try:
            await self._start()
            assert self.run_loop is not None
            if self._stop_reason is not None:
                self.run_loop.request_stop(self._stop_reason)
            await self.run_loop.run()
            await self._finish()
        except BaseException:
            await self._close_tasks_after_failure()
            raise
        finally:
            await self._stop_systems()
        elapsed = time.monotonic() - started
        processed = self.run_loop.processed
        log.info(
            "job_finished",
            reason=self.run_loop.stop_reason,
            processed=processed,
            elapsed_s=round(elapsed, 3),
            rate=round(processed / elapsed, 1) if elapsed > 0 else None,
            commits=self.run_loop.commit_count,
        )

    async def prepare_streams(self) -> None:
        """Create the missing intermediate streams and check that every input exists, then
        let go of the systems: what a coordinator needs before it asks for tasks."""
        cfg = self.config
        inputs = list(dict.fromkeys(cfg.task.inputs))
        for name in cfg.systems:
            self._factories[name] = factory = system_factory(cfg, name)
            self._admins[name] = factory.get_admin()
        try:
            for admin in self._admins.values():
                await admin.start()
            await self._create_intermediate_streams(inputs)
            await self._partition_counts(inputs)
        finally:
            for admin in self._admins.values():
                await admin.stop()
            self._admins.clear()
            self._factories.clear()

    # -- start-up -------------------------------------------------------------------------------

    async def _start(self) -> None:
        cfg = self.config
        task_factory = self._task_factory or load_task_class(cfg.task.task_class)
        # 1. Systems and serdes.
        input_streams = list(dict.fromkeys(cfg.task.inputs))
        broadcast = [(b.system_stream, b.partitions) for b in cfg.task.broadcast_inputs]
        input_systems = sorted(
            {ss.system for ss in input_streams} | {ss.system for ss, _ in broadcast}
        )
        for name in cfg.systems:
            self._factories[name] = factory = system_factory(cfg, name)
            self._admins[name] = factory.get_admin()
            self._producers[name] = factory.get_producer()
            if name in input_systems:
                self._consumers[name] = factory.get_consumer()
        for admin in self._admins.values():
            await admin.start()
        # 2. Intermediate streams, partition counts and the job model.
        await self._create_intermediate_streams(input_streams)
        counts = await self._partition_counts([*input_streams, *(ss for ss, _ in broadcast)])
        models = group_by_partition(
            {ss: counts[ss] for ss in input_streams},
            broadcast,
        )
        #: The job's task count (every container's tasks), which control messages announce
        #: and changelogs are sized by.
        self.job_task_count = job_task_count = len(models)
        if self._task_filter is not None:
            models = [m for m in models if self._task_filter(m.partition)]
        # 3. Checkpoints and starting offsets.
        checkpoints = await self._read_checkpoints(models)
        check_partition_counts(checkpoints, counts)
        loop = asyncio.get_running_loop()
        if cfg.job.container_thread_pool_size > 1:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                cfg.job.container_thread_pool_size, thread_name_prefix="samzapy-task"
            )
        router = OutputRouter(
            self._producers,
            self._admins,
            self._output_serdes,
            lambda ss: cfg.stream(ss).partitions or 1,
            replication_for_new=lambda ss: cfg.stream(ss).replication_factor,
            framed=self._is_framed,
            drop_errors=cfg.task.drop_producer_errors,
            on_dropped=lambda n: self.metrics.counter("container", "producer-errors").inc(n),
            on_error=lambda exc: self.run_loop.fail(exc) if self.run_loop else None,
        )
        queues_by_ssp: dict[SystemStreamPartition, list[InputQueue]] = defaultdict(list)
        capacity = self._queue_capacities(models)
        consumers = SystemConsumers(
            self._consumers,
            queues_by_ssp,
            {ssp: self._input_serdes(ssp) for m in models for ssp in m.ssps},
            compare_offsets={n: a.compare_offsets for n, a in self._admins.items()},
            poll_timeout=cfg.task.poll_timeout_ms / 1000,
            drop_deserialization_errors=cfg.task.drop_deserialization_errors,
            on_dropped=lambda ssp: self.metrics.counter(
                "container", "deserialization-errors"
            ).inc(),
        )
        self.run_loop = run_loop = RunLoop(
            consumers=consumers,
            input_systems=[s for s in input_systems if s in self._consumers],
            router=router,
            checkpoints=self._checkpoints,
            clock=self.clock,
            window_ms=cfg.task.window_ms,
            commit_ms=cfg.task.commit_ms,
            callback_timeout_ms=cfg.task.callback_timeout_ms,
            shutdown_ms=cfg.task.shutdown_ms,
            progress_interval_ms=cfg.task.progress_interval_ms,
            checkpoint_extra=partition_counts_extra(counts),
            stall_timeout_ms=cfg.task.stall_timeout_ms,
            stall_fail=cfg.task.stall_fail,
            health=self.health,
        )
        starts: dict[SystemStreamPartition, dict[TaskName, str | None]] = defaultdict(dict)
        outputs = self._intermediate_outputs(input_streams)
        # 4. One task instance per task name.
        for model in models:
            checkpoint = checkpoints.get(model.name)
            control = TaskControl(
                carrying=[ssp for ssp in model.ssps if self._carries_watermarks(ssp)],
                outputs={
                    stream: [ssp for ssp in model.ssps if ssp.system_stream in upstream]
                    for stream, upstream in outputs.items()
                },
            )
            if checkpoint is not None:
                control.restore(checkpoint.extra.get(CONTROL_STATE))
            trackers: dict[SystemStreamPartition, OffsetTracker] = {}
            queues = []
            for ssp in model.ssps:
                last = (
                    None if checkpoint is None or self._reset(ssp) else checkpoint.offsets.get(ssp)
                )
                trackers[ssp] = OffsetTracker(last)
                starts[ssp][model.name] = (
                    None if last is None else self._admins[ssp.system].offset_after(last)
                )
                q = InputQueue(ssp, capacity[ssp.system])
                queues.append(q)
                queues_by_ssp[ssp].append(q)
            collector = TaskCollector(router, loop)
            stores = TaskStores(
                task_name=model.name,
                partition=model.partition,
                configs=cfg.stores,
                base_dir=Path(cfg.job.logged_store_base_dir) / cfg.job.name,
                serde=self._serde_or_bytes,
                send=collector.send,
                router=router,
                factories=self._factories,
                admins=self._admins,
            )
            instance = TaskInstance(
                stores=stores,
                name=model.name,
                task=task_factory(),
                queues=queues,
                trackers=trackers,
                collector=collector,
                run_loop=run_loop,
                max_concurrency=cfg.task.max_concurrency,
                executor=self._executor,
                latency=self.metrics.timer(f"task.{model.name}", "process-latency"),
                control=control,
                task_count=job_task_count,
            )
            if checkpoint is not None:
                run_loop.remember_checkpoint(instance, checkpoint)
            self.tasks.append(instance)
        run_loop.tasks = self.tasks
        self._register_consumers(starts, queues_by_ssp)
        self._register_metrics()
        log.info(
            "container_started",
            inputs=[str(ss) for ss in input_streams],
            broadcast_inputs=[f"{ss}#{list(p)}" for ss, p in broadcast],
            tasks=len(self.tasks),
            task_names=[str(t.name) for t in self.tasks],
            job_tasks=job_task_count,
            task_class=cfg.task.task_class if self._task_factory is None else repr(task_factory),
            max_concurrency=cfg.task.max_concurrency,
            thread_pool_size=cfg.job.container_thread_pool_size,
            checkpoints=cfg.task.checkpoint_factory,
        )
        # 5. Metrics reporters, producers, init, consumers.
        if self._start_reporters:
            self._reporters = await start_reporters(cfg, self.metrics, self.health)
        for producer in self._producers.values():
            await producer.start()
        await self._open_stores(job_task_count, checkpoints)
        for instance, model in zip(self.tasks, models, strict=True):
            await instance.init(self._context(model, instance))
        for consumer in self._consumers.values():
            await consumer.start()
        self.started.set()
        self.health.ready = True

    async def _partition_counts(self, streams: list[SystemStream]) -> dict[SystemStream, int]:
        by_system: dict[str, list[str]] = defaultdict(list)
        for ss in streams:
            by_system[ss.system].append(ss.stream)
        counts: dict[SystemStream, int] = {}
        for system, names in by_system.items():
            found = await self._admins[system].partition_counts(names)
            for name in names:
                if name not in found:
                    raise StreamSystemError(
                        f"input stream {system}.{name} does not exist on system {system!r} "
                        "(check task.inputs and the system's settings)"
                    )
                counts[SystemStream(system, name)] = found[name]
        return counts

    async def _create_intermediate_streams(self, inputs: list[SystemStream]) -> None:
        """Create the intermediate streams that do not exist yet, with ``partitions`` or else
        the largest partition count of the job's other inputs (Samza's default)."""
        wanted = [
            (s.stream_id, SystemStream(s.system, s.physical_name))
            for s in self.config.streams.values()
            if s.intermediate and s.system is not None
        ]
        if not wanted:
            return
        others: list[SystemStream] = [ss for ss in inputs if ss not in {w for _, w in wanted}]
        for stream_id, ss in wanted:
            admin = self._admins[ss.system]
            if ss.stream in await admin.partition_counts([ss.stream]):
                continue
            partitions = self.config.streams[stream_id].partitions
            if partitions is None:
                if not others:
                    raise ConfigError(
                        f"streams.{stream_id}.partitions must be set: the intermediate stream "
                        f"{ss} does not exist yet and the job has no other input to size it by",
                        key=f"streams.{stream_id}.partitions",
                    )
                partitions = max((await self._partition_counts(others)).values())
            await admin.create_stream(
                ss.stream,
                partitions,
                replication_factor=self.config.streams[stream_id].replication_factor,
            )
            log.info("stream_created", stream=str(ss), partitions=partitions, intermediate=True)

    def _intermediate_outputs(
        self, inputs: list[SystemStream]
    ) -> dict[SystemStream, frozenset[SystemStream]]:
        """The intermediate streams this job writes, each with its upstream inputs: those
        configured, else every input that is not an intermediate stream the job reads. A job
        with no upstream input for a stream (a downstream job that only reads it) does not
        write it."""
        read_intermediate = {ss for ss in inputs if self.config.stream(ss).intermediate}
        outputs: dict[SystemStream, frozenset[SystemStream]] = {}
        for entry in self.config.streams.values():
            if not entry.intermediate or entry.system is None:
                continue
            ss = SystemStream(entry.system, entry.physical_name)
            upstream = frozenset(entry.upstream_inputs) or frozenset(
                i for i in inputs if i not in read_intermediate
            )
            if upstream:
                outputs[ss] = upstream
            elif ss not in inputs:
                log.warning(
                    "intermediate_stream_without_upstream",
                    stream=str(ss),
                    reason="the job neither reads it nor has inputs feeding it: it will send "
                    f"it no end-of-stream or watermark; set streams.{entry.stream_id}"
                    ".samza.upstream.inputs",
                )
        return outputs

    def _is_framed(self, ss: SystemStream) -> bool:
        stream = self.config.stream(ss)
        return stream.intermediate or stream.framed

    def _carries_watermarks(self, ssp: SystemStreamPartition) -> bool:
        stream = self.config.stream(ssp.system_stream)
        return stream.intermediate or stream.framed or stream.watermark_lateness_ms is not None

    async def _read_checkpoints(self, models: list[TaskModel]) -> dict[TaskName, Checkpoint]:
        self._checkpoints = checkpoint_manager(
            self.config, self._factories, self.checkpoint_namespace
        )
        if self._checkpoints is None:
            log.warning(
                "checkpoints_disabled",
                reason="task.checkpoint.factory is not set; a restart will not resume",
            )
            return {}
        for model in models:
            self._checkpoints.register(model.name)
        await self._checkpoints.start()
        found = {}
        for model in models:
            checkpoint = await self._checkpoints.read_last(model.name)
            if checkpoint is not None:
                found[model.name] = checkpoint
                log.info(
                    "checkpoint_read",
                    task=model.name,
                    offsets={str(ssp): o for ssp, o in checkpoint.offsets.items()},
                )
        return found

    # Stream views already carry their system's default.stream.* settings and serdes.

    def _reset(self, ssp: SystemStreamPartition) -> bool:
        return self.config.stream(ssp.system_stream).reset_offset

    def _offset_default(self, ssp: SystemStreamPartition) -> str:
        stream = self.config.stream(ssp.system_stream)
        return stream.offset_default or self._factories[ssp.system].default_offset

    def _queue_capacities(self, models: list[TaskModel]) -> dict[str, int]:
        per_system: dict[str, int] = defaultdict(int)
        for model in models:
            for ssp in model.ssps:
                per_system[ssp.system] += 1
        return {
            name: max(1, self.config.systems[name].fetch_threshold // n)
            for name, n in per_system.items()
        }

    def _register_consumers(
        self,
        starts: dict[SystemStreamPartition, dict[TaskName, str | None]],
        queues_by_ssp: dict[SystemStreamPartition, list[InputQueue]],
    ) -> None:
        for ssp, by_task in starts.items():
            admin = self._admins[ssp.system]
            known = [o for o in by_task.values() if o is not None]
            start = None
            if known:
                start = known[0]
                for o in known[1:]:
                    if admin.compare_offsets(o, start) < 0:
                        start = o
            if len(by_task) > 1 and start is not None:
                for q, offset in zip(queues_by_ssp[ssp], by_task.values(), strict=True):
                    if offset is not None and admin.compare_offsets(offset, start) > 0:
                        q.start_offset = offset
            self._consumers[ssp.system].register(ssp, start, self._offset_default(ssp))

    def _serde(self, name: str | None) -> Serde | None:
        if name is None or name == "none":
            return None
        return self._serdes.get(name)

    def _input_serdes(self, ssp: SystemStreamPartition) -> InputSerdes:
        key, msg = self._serde_names(ssp.system_stream)
        stream = self.config.stream(ssp.system_stream)
        return InputSerdes(
            self._serde(key),
            self._serde(msg),
            framed=stream.intermediate or stream.framed,
            lateness_ms=stream.watermark_lateness_ms,
        )

    def _output_serdes(self, ss: SystemStream) -> tuple[Serde | None, Serde | None]:
        if ss.system not in self._factories or ss in self._changelogs:
            return None, None  # changelog records are the stores' own bytes
        key, msg = self._serde_names(ss)
        return self._serde(key), self._serde(msg)

    def _serde_names(self, ss: SystemStream) -> tuple[str | None, str | None]:
        stream = self.config.stream(ss)
        factory = self._factories[ss.system]
        return (
            stream.key_serde or factory.default_key_serde,
            stream.msg_serde or factory.default_msg_serde,
        )

    def _context(self, model: TaskModel, instance: TaskInstance) -> TaskContextImpl:
        return TaskContextImpl(
            task_name=model.name,
            config=self.config.raw,
            system_stream_partitions=frozenset(model.ssps),
            metrics=self.metrics,
            stores=instance.stores.stores if instance.stores else None,
        )

    async def _open_stores(self, task_count: int, checkpoints: dict[TaskName, Checkpoint]) -> None:
        """Create missing changelogs, then open and restore every task's stores."""
        for name, store in self.config.stores.items():
            changelog = store.changelog
            if changelog is None:
                continue
            admin = self._admins[changelog.system]
            found = (await admin.partition_counts([changelog.stream])).get(changelog.stream)
            if found is None:
                await admin.create_stream(
                    changelog.stream,
                    task_count,
                    replication_factor=self.config.stream(changelog).replication_factor,
                    config={"cleanup.policy": "compact"},
                )
                log.info("stream_created", stream=str(changelog), partitions=task_count, store=name)
            elif found < task_count:
                raise StoreError(
                    f"the changelog {changelog} of store {name!r} has {found} partitions; the "
                    f"job has {task_count} tasks and needs one partition per task"
                )
        for task in self.tasks:
            if task.stores:
                task.stores.open()
                checkpoint = checkpoints.get(task.name)
                await task.stores.restore(checkpoint.extra if checkpoint else None)

    def _serde_or_bytes(self, name: str | None) -> Serde:
        return self._serdes.get("bytes" if name in (None, "none") else name)

    def _register_metrics(self) -> None:
        registry = self.metrics
        assert self.run_loop is not None
        run_loop = self.run_loop
        registry.gauge("container", "messages-processed", lambda: run_loop.processed)
        registry.gauge("container", "commits", lambda: run_loop.commit_count)
        run_loop.commit_latency = registry.timer("container", "commit-latency")
        started = time.monotonic()
        for task in self.tasks:
            _register_task_metrics(registry, task)
            group = f"task.{task.name}"
            registry.gauge(group, "checkpoint-age-seconds", _age(run_loop, task.name, started))
            if task.stores:
                registry.gauge(group, "restored-records", _restored(task.stores))
            for ssp, tracker in task.trackers.items():
                consumer = self._consumers.get(ssp.system)
                if consumer is not None:
                    registry.gauge(f"partition.{ssp}", "lag", _lag(consumer, ssp, tracker))

    # -- shutdown -------------------------------------------------------------------------------

    async def _finish(self) -> None:
        """A clean end: close the tasks, flush and commit every task."""
        assert self.run_loop is not None
        for task in self.tasks:
            await task.close()
        for task in self.tasks:
            await self.run_loop.commit(task)
        for task in self.tasks:
            if task.stores:
                task.stores.close(await task.stores.changelog_offsets())

    async def _close_tasks_after_failure(self) -> None:
        for task in self.tasks:
            try:
                await task.close()
            except SamzapyError as exc:
                log.warning("task_close_failed", task=task.name, error=str(exc))
            if task.stores:
                task.stores.close()

    async def _stop_systems(self) -> None:
        for what, parts in (
            ("consumer", self._consumers),
            ("producer", self._producers),
            ("admin", self._admins),
        ):
            for name, part in parts.items():
                try:
                    await part.stop()
                except Exception as exc:
                    log.warning("system_stop_failed", system=name, part=what, error=repr(exc))
        if self._checkpoints is not None:
            await self._checkpoints.stop()
        if self._task_filter is not None:  # the tasks may run elsewhere next
            # The next container of this process registers its own (counts restart from 0,
            # which Prometheus reads as a counter reset).
            self.metrics.remove_group("container")
            for task in self.tasks:
                self.metrics.remove_group(f"task.{task.name}")
                for ssp in task.trackers:
                    self.metrics.remove_group(f"partition.{ssp}")
        for reporter in self._reporters:
            await reporter.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


async def start_reporters(
    config: ResolvedConfig, registry: MetricsRegistry, health: Health
) -> list[MetricsReporter]:
    """Start the reporters of ``metrics.reporters`` on ``registry``."""
    cfg = config.metrics
    started: list[MetricsReporter] = []
    for name in cfg.reporters:
        reporter = reporter_for(
            name,
            interval_ms=cfg.reporter_interval_ms,
            host=cfg.prometheus_host,
            port=cfg.prometheus_port,
            health=health,
        )
        await reporter.start(registry)
        started.append(reporter)
    return started


def _lag(
    consumer: SystemConsumer, ssp: SystemStreamPartition, tracker: OffsetTracker
) -> Callable[[], float]:
    """Messages of the partition not processed yet (0 when the system cannot tell)."""

    def lag() -> float:
        high = consumer.high_watermark(ssp)
        if high is None:
            return 0
        try:
            done = -1 if tracker.last_processed is None else int(tracker.last_processed)
        except ValueError:
            return 0
        return max(high - done - 1, 0)

    return lag


def _age(run_loop: RunLoop, name: str, since: float) -> Callable[[], float]:
    """Seconds since the task's last checkpoint (since start-up before the first)."""
    return lambda: time.monotonic() - run_loop.checkpointed_at.get(name, since)


def _restored(stores: TaskStores) -> Callable[[], float]:
    return lambda: stores.restored_records


def _register_task_metrics(registry: MetricsRegistry, task: TaskInstance) -> None:
    """Gauges read from the task's own counters at snapshot time (nothing on the hot path);
    the process-latency timer is updated by the task itself."""
    group = f"task.{task.name}"
    registry.gauge(group, "messages-processed", lambda: task.processed)
    registry.gauge(group, "in-flight", lambda: task.inflight)
    registry.gauge(group, "windows", lambda: task.windows)
    registry.gauge(group, "commits", lambda: task.commits)


__all__ = ["SamzaContainer", "load_task_class", "start_reporters", "system_factory"]
