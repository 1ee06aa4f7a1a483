"""Assembling a container from its plan (start-up step 5): the input side (each task's
queues, the consumers filling them, the run loop), then each task instance with its output
router, checkpoint writer, stores, control bookkeeping and metrics.

Under at-least-once the tasks share one router over the job's producers; under exactly-once
each task has its own, over its transactional producer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from samzapy.api.context import MessageCollector
from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.api.task import AsyncStreamTask
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.config import ResolvedConfig
from samzapy.config.classes import load_task_class
from samzapy.container.bootstrap import TaskBootstrap
from samzapy.container.checkpoints import ContainerCheckpoints
from samzapy.container.clock import Clock
from samzapy.container.collector import OutputRouter
from samzapy.container.commit import fetched_positions
from samzapy.container.consumers import SystemConsumers
from samzapy.container.context import TaskContextImpl
from samzapy.container.coordinator import TaskListener
from samzapy.container.drops import task_drops
from samzapy.container.gauges import CONTAINER, register_task_metrics, task_group
from samzapy.container.grouper import TaskModel
from samzapy.container.inputs import InputQueue, TaskInputs
from samzapy.container.origins import OriginCollector
from samzapy.container.plan import ContainerPlan, TaskPlan, input_queues
from samzapy.container.run_loop import Drain, RunLoop
from samzapy.container.serdes import StreamSerdes
from samzapy.container.store_directory import job_store_directory
from samzapy.container.systems import Systems
from samzapy.container.task_collector import MessageInProgress, TaskCollector
from samzapy.container.task_instance import TaskInstance
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.reconcile import TaskControl, saved_epochs
from samzapy.control.rewind import rewind_control
from samzapy.metrics import Health, MetricsRegistry
from samzapy.storage.task_stores import TaskStores
from samzapy.system.ports import SystemProducer

log = structlog.get_logger("samzapy.container")

#: How long a batch of an intermediate (framed) stream is held open by default, in ms
#: (Kafka Streams' producers linger 100 ms).
FRAMED_LINGER_MS = 50


def task_factory_of(config: ResolvedConfig, given: Callable[[], Any] | None) -> Callable[[], Any]:
    """What makes each task's object: ``given``, else ``task.class``."""
    if given is not None:
        return given
    if config.task.task_class is None:
        raise ConfigError(
            "task.class is required: an application (app.class) runs through "
            "samzapy.operators, which gives the container its task factory",
            key="task.class",
        )
    return load_task_class(config.task.task_class)


@dataclass(frozen=True)
class InputSide:
    """Each task's input queues, the consumers that fill them, and the run loop."""

    queues: dict[TaskName, dict[SystemStreamPartition, InputQueue]]
    consumers: SystemConsumers
    run_loop: RunLoop


def assemble_inputs(
    config: ResolvedConfig,
    plan: ContainerPlan,
    systems: Systems,
    serdes: StreamSerdes,
    *,
    clock: Clock,
    health: Health,
    checkpoints: ContainerCheckpoints,
    on_dropped: Callable[[], None],
) -> InputSide:
    """The input side of ``plan``; ``on_dropped``: a message was dropped as undecodable.
    Each consumer is told the IDs of its streams that the checkpoints record
    (``expect_stream_ids``)."""
    cfg = config
    checkpointing = checkpoints.manager is not None
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
        on_dropped=lambda ssp: on_dropped(),
        dead_letters=cfg.task.dead_letter_stream is not None,
        heads=plan.heads,
        now=clock.now,
        readers={ssp: [name for name, qs in queues.items() if ssp in qs] for ssp in by_ssp},
    )
    if cfg.task.dead_letter_stream is not None:
        for consumer in systems.consumers.values():
            consumer.keep_raw()
    for system, consumer in systems.consumers.items():
        ids = checkpoints.topic_ids
        consumer.expect_stream_ids({s.stream: i for s, i in ids.items() if s.system == system})
    names = sorted(systems.consumers)
    run_loop = RunLoop(
        consumers=[functools.partial(consumers.run, s) for s in names],
        clock=clock,
        window_ms=cfg.task.window_ms,
        commit_ms=cfg.task.commit_ms,
        callback_timeout_ms=cfg.task.callback_timeout_ms,
        shutdown_ms=cfg.task.shutdown_ms,
        progress_interval_ms=cfg.task.progress_interval_ms,
        checkpointing=checkpointing,
        stall_timeout_ms=cfg.task.stall_timeout_ms,
        stall_fail=cfg.task.stall_fail,
        health=health,
    )
    if checkpointing and cfg.task.checkpoint_factory != "memory":
        run_loop.drain = _memory_drain(cfg, names, by_ssp)
    return InputSide(queues, consumers, run_loop)


def _memory_drain(
    config: ResolvedConfig, names: Sequence[str], ssps: Iterable[SystemStreamPartition]
) -> Drain | None:
    """The drain before a stop of a job whose intermediate streams are in memory, when its
    checkpoints outlive the process (``run_loop.py``); None for any other job."""
    memory = {name for name in names if config.systems[name].factory == "memory"}
    drained = frozenset(
        ssp
        for ssp in ssps
        if ssp.system in memory and config.stream(ssp.system_stream).intermediate
    )
    if not drained:
        return None
    return Drain(frozenset(i for i, name in enumerate(names) if name in memory), drained)


@dataclass(frozen=True)
class TaskAssembly:
    """What every task instance of one container is built from."""

    config: ResolvedConfig
    systems: Systems
    checkpoints: ContainerCheckpoints
    serdes: StreamSerdes
    clock: Clock
    metrics: MetricsRegistry
    listener: TaskListener
    fail: Callable[[BaseException], None]
    space_freed: Callable[[], None]
    partition_counts: Mapping[SystemStream, int]
    job_task_count: int
    executor: concurrent.futures.Executor | None
    #: Each task's input partitions' lag readers, filled as the tasks are made.
    lags: dict[TaskName, dict[SystemStreamPartition, Callable[[], float]]] = field(
        default_factory=dict
    )

    def routers(self, tasks: Sequence[TaskPlan]) -> dict[TaskName, OutputRouter]:
        """One router for all tasks, or under exactly-once one per task, over its producers."""
        cfg, systems = self.config, self.systems
        serdes, metrics = self.serdes, self.metrics

        def router(producers: Mapping[str, SystemProducer]) -> OutputRouter:
            return OutputRouter(
                producers,
                systems.admins,
                serdes.output,
                lambda ss: cfg.stream(ss).partitions or 1,
                replication_for_new=lambda ss: cfg.stream(ss).replication_factor,
                stream_id=lambda ss: cfg.stream(ss).stream_id,
                framed=serdes.framed,
                linger_ms=lambda ss: linger_ms(cfg, ss, serdes.framed(ss)),
                origins=lambda ss: cfg.stream(ss).origins,
                drop_errors=cfg.task.drop_producer_errors,
                on_dropped=lambda n: metrics.counter(CONTAINER, "producer-errors").inc(n),
                on_error=self.fail,
                connect=systems.connect,
                connectable=systems.factories,
                held=systems.held,
            )

        if self.checkpoints.transactional_system is None:
            shared = router(systems.producers)
            return {t.name: shared for t in tasks}
        return {
            t.name: router(self.checkpoints.producers(t.name, systems.producers)) for t in tasks
        }

    def task(
        self,
        plan: TaskPlan,
        task: Any,
        queues: Mapping[SystemStreamPartition, InputQueue],
        router: OutputRouter,
    ) -> TaskInstance:
        """The instance of ``plan``'s task, running ``task`` (the user's object)."""
        cfg, systems = self.config, self.systems
        control = self._control(plan)
        trackers = {ssp: OffsetTracker(last) for ssp, last in plan.last_processed.items()}
        consumers = systems.consumers
        readers = [
            (ssp, consumers[ssp.system], tracker, queues[ssp])
            for ssp, tracker in trackers.items()
            if ssp.system in consumers
        ]
        writer = self.checkpoints.writer(
            plan.name, plan.checkpoint, fetched=fetched_positions(readers)
        )
        loop = asyncio.get_running_loop()
        current = MessageInProgress(
            is_async=isinstance(task, AsyncStreamTask),
            on_dropped=lambda: self.metrics.counter(CONTAINER, "sends-dropped").inc(),
        )
        collector = TaskCollector(router, loop, plan.name, current)
        sends: MessageCollector = collector
        if control.writer is not None and self.tags_origins(plan):
            sends = OriginCollector(
                router,
                loop,
                plan.name,
                control.writer,
                is_async=isinstance(task, AsyncStreamTask),
                concurrent=isinstance(task, AsyncStreamTask) and cfg.task.max_concurrency > 1,
                current=current,
                pooled=self.executor is not None,
            )
        stores = TaskStores(
            task_name=plan.name,
            partition=plan.model.partition,
            configs=cfg.stores,
            base_dir=job_store_directory(cfg),
            serde=self.serdes.store,
            send=collector.send,
            flush=router.flush,
            factories=systems.factories,
            admins=systems.admins,
            snapshots=cfg.task.store_snapshots,
        )
        instance = TaskInstance(
            name=plan.name,
            task=task,
            inputs=TaskInputs(queues.values(), space_freed=self.space_freed, ended=control.ended),
            trackers=trackers,
            collector=sends,
            router=router,
            clock=self.clock,
            checkpoints=writer,
            listener=self.listener,
            max_concurrency=cfg.task.max_concurrency,
            executor=self.executor,
            current=current,
            stores=stores,
            control=control,
            task_count=self.job_task_count,
            partition_counts=self.partition_counts,
            latency=self.metrics.timer(task_group(plan.name), "process-latency"),
            commit_latency=self.metrics.timer(CONTAINER, "commit-latency"),
            track_call_starts=cfg.task.callback_timeout_ms > 0,
            drops=task_drops(
                cfg.task,
                plan.name,
                self.checkpoints.producers(plan.name, systems.producers),
                functools.partial(self.metrics.counter, CONTAINER, "process-errors"),
            ),
            # A partition that had ended (the checkpoint says so) is not read again.
            bootstrap=TaskBootstrap(plan.bootstrap, set(plan.lagging) - set(control.ended))
            if plan.bootstrap
            else None,
            commit_within=systems.commit_wait_s,
        )
        self.lags[plan.name] = register_task_metrics(self.metrics, instance, writer, readers)
        return instance

    def _control(self, plan: TaskPlan) -> TaskControl:
        """The task's control bookkeeping, with its origins as a writer of framed streams
        and a reader of them, taken up from its checkpoint."""
        cfg, framed = self.config, self.serdes.framed
        control = TaskControl(carrying=plan.carrying, outputs=plan.outputs)
        ssps, checkpoint = plan.model.ssps, plan.checkpoint
        reset = [ssp for ssp in ssps if cfg.stream(ssp.system_stream).reset_offset]
        saved = saved_epochs(checkpoint.control) if checkpoint is not None else None
        if self._writes_framed(plan) or saved:
            # Kept whenever the task has epochs, so that they never go back.
            control.writer = WriterOrigins.starting(
                f"{cfg.job.name}-{cfg.job.id}/{plan.name}",
                ssps,
                saved=saved,
                checkpointed=checkpoint.offsets if checkpoint is not None else {},
                reset=reset,
            )
        framed_inputs = [ssp for ssp in ssps if framed(ssp.system_stream)]
        if framed_inputs:
            control.reader = ReaderOrigins(framed_inputs)
        if checkpoint is not None:
            # A reset partition is read afresh: its end-of-stream and watermark reports and
            # the origins applied from it go with its offset (its epoch moved above).
            control.restore(rewind_control(checkpoint.control, reset, epochs=False)[0])
            if control.ended and not control.ended >= set(ssps):
                log.info(
                    "partitions_ended_before_restart",
                    task=plan.name,
                    ssps=sorted(str(ssp) for ssp in control.ended),
                    reason="their end is checkpointed (a watermark's at the end of time too): "
                    "nothing appended since is read; samzapy checkpoint set --to oldest "
                    "--reset-stores reads them again",
                )
        return control

    def tags_origins(self, plan: TaskPlan) -> bool:
        """Whether the task's sends carry origins: it may write a framed stream, and the
        guarantee is at-least-once (under exactly-once, transactions already hide what a
        dead writer sent)."""
        return self._writes_framed(plan) and not self.config.task.exactly_once

    def _writes_framed(self, plan: TaskPlan) -> bool:
        """Whether the task may send to a framed stream."""
        return bool(plan.outputs) or self.framed_outputs

    @functools.cached_property
    def framed_outputs(self) -> bool:
        """Whether the job may send to a framed stream it does not read (``samza.framed``)."""
        inputs = set(self.config.task.inputs)
        return any(
            entry.framed
            and entry.system is not None
            and SystemStream(entry.system, entry.physical_name) not in inputs
            for entry in self.config.streams.values()
        )

    def context(self, model: TaskModel, instance: TaskInstance) -> TaskContextImpl:
        """What ``init`` gets."""
        return TaskContextImpl(
            task_name=model.name,
            config=self.config.raw,
            system_stream_partitions=frozenset(model.ssps),
            metrics=self.metrics,
            stores=instance.stores.stores if instance.stores else None,
            time_ms=getattr(self.clock, "time_ms", None),  # a clock of one's own may lack it
            now=self.clock.now,
            before_commit=instance.stores.before_flush.append if instance.stores else None,
        )


def linger_ms(cfg: ResolvedConfig, ss: SystemStream, framed: bool) -> int | None:
    """How long the producer holds a batch of ``ss`` open: the stream's
    ``producer.linger.ms``, else ``FRAMED_LINGER_MS`` for a framed (intermediate) stream,
    which the job or another reads back: at a few thousand messages a second per partition,
    the system's 5 ms makes batches of a dozen records, each written, fetched and decoded
    on its own; else the system's own."""
    own = cfg.stream(ss).linger_ms
    if own is not None:
        return own
    return FRAMED_LINGER_MS if framed else None


__all__ = ["FRAMED_LINGER_MS", "TaskAssembly", "linger_ms"]
