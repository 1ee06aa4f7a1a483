"""The container's plan, decided before any task exists: pure, no I/O.

From the config and the facts start-up gathered (the inputs' partition counts, the
checkpoints read), it decides:

1. the job model: the job's tasks (group-by-partition: task ``Partition k`` reads partition k
   of every input that has one, so the job has as many tasks as its widest input has
   partitions; broadcast partitions go to every task), and which of them this container runs;
2. per task: where each input partition's offset bookkeeping resumes, which partitions carry
   watermarks, which intermediate streams it writes with the partitions upstream of each, and
   which of its bootstrap partitions are behind their head (``bootstrap.py``);
3. per input partition: the offset its consumer starts at (after the checkpointed one, else
   the stream's offset default as the partition stood at start-up) and, for a partition
   several tasks share, where each task picks up. A partition started at its default is
   recorded as processed up to the offset before that start (``SystemAdmin.offset_before``),
   so that the task's checkpoints cover it before it delivers anything: a restart resumes
   there, and reads what arrived while the job was down (an ``upcoming`` start resolved
   again at the restart would skip it);
4. the size of each input queue (the system's fetch threshold split over its partitions), and
   the queues themselves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import ResolvedConfig
from samzapy.container.bootstrap import Heads, lagging
from samzapy.container.grouper import TaskModel, group_by_partition
from samzapy.container.inputs import InputQueue
from samzapy.system.ports import OffsetBounds, OffsetDefault, SystemAdmin

log = structlog.get_logger("samzapy.container")


@dataclass(frozen=True)
class TaskPlan:
    """How to start one task."""

    model: TaskModel
    checkpoint: Checkpoint | None
    #: Each input partition's last processed offset to resume after: the checkpointed one,
    #: else the one before the start its offset default resolved to (None: the system has
    #: no offset before it, the partition starts at its default).
    last_processed: Mapping[SystemStreamPartition, str | None]
    #: The partitions whose watermarks count, and the intermediate streams the task writes,
    #: each with the task's partitions of its upstream inputs.
    carrying: tuple[SystemStreamPartition, ...]
    outputs: Mapping[SystemStream, tuple[SystemStreamPartition, ...]]
    #: The partitions of the task's bootstrap streams, and those of them behind their head,
    #: each with its head (the upcoming offset at start-up).
    bootstrap: tuple[SystemStreamPartition, ...] = ()
    lagging: Mapping[SystemStreamPartition, str] = field(default_factory=dict)

    @property
    def name(self) -> TaskName:
        return self.model.name


@dataclass(frozen=True)
class ConsumerStart:
    """Where a consumer starts reading one partition."""

    ssp: SystemStreamPartition
    #: The first offset to read (None: ``default``, the stream's offset default).
    offset: str | None
    default: str
    #: For a partition several tasks share: the tasks that resume past ``offset``, and from
    #: where (messages before it were already processed by that task).
    skip_to: Mapping[TaskName, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerPlan:
    tasks: tuple[TaskPlan, ...]
    starts: tuple[ConsumerStart, ...]
    #: The capacity of each input queue, per system.
    queue_capacity: Mapping[str, int]
    #: The bootstrap partitions some task is behind on, each with its head: the consumers'
    #: bookkeeping of where to mark them caught up (None: no task is behind).
    heads: Heads | None = None


def job_model(
    config: ResolvedConfig,
    counts: Mapping[SystemStream, int],
    runs: Callable[[int], bool] | None = None,
) -> tuple[list[TaskModel], int]:
    """Step 1: the tasks this container runs (``runs(k)`` says whether it runs task k; None:
    all), and the job's task count (every container's tasks)."""
    inputs = list(dict.fromkeys(config.task.inputs))
    broadcast = [(b.system_stream, b.partitions) for b in config.task.broadcast_inputs]
    models = group_by_partition(
        {ss: counts[ss] for ss in inputs},
        broadcast,
        {ss: counts[ss] for ss, _ in broadcast if ss in counts},
    )
    task_count = len(models)
    if runs is not None:
        models = [m for m in models if runs(m.partition)]
    return models, task_count


def plan_container(
    config: ResolvedConfig,
    models: Sequence[TaskModel],
    checkpoints: Mapping[TaskName, Checkpoint],
    *,
    admins: Mapping[str, SystemAdmin],
    default_offsets: Mapping[str, str],
    carries_watermarks: Callable[[SystemStreamPartition], bool],
    bounds: Mapping[SystemStreamPartition, OffsetBounds] | None = None,
) -> ContainerPlan:
    """Steps 2 to 4. Of ``admins`` only the offset arithmetic is used (``offset_after``,
    ``offset_before``, ``compare_offsets``); ``default_offsets``: each system's offset
    default; ``bounds``: what each partition of a bootstrap input, each partition several of
    ``models`` share and each one a task starts at its default held at start-up
    (``start_bounds``; None: there is none)."""
    outputs = intermediate_outputs(config)
    compare = {name: admin.compare_offsets for name, admin in admins.items()}

    def default_of(ssp: SystemStreamPartition) -> str:
        return config.stream(ssp.system_stream).offset_default or default_offsets[ssp.system]

    behind: dict[SystemStreamPartition, str] = {}
    tasks: list[TaskPlan] = []
    resume: dict[SystemStreamPartition, dict[TaskName, str | None]] = defaultdict(dict)
    for model in models:
        checkpoint = checkpoints.get(model.name)
        last: dict[SystemStreamPartition, str | None] = {}
        for ssp in model.ssps:
            reset = config.stream(ssp.system_stream).reset_offset
            offset = None if checkpoint is None or reset else checkpoint.offsets.get(ssp)
            if offset is None and (held := (bounds or {}).get(ssp)) is not None:
                start = default_position(held, default_of(ssp))
                offset = admins[ssp.system].offset_before(start)
            last[ssp] = offset
            resume[ssp][model.name] = (
                None if offset is None else admins[ssp.system].offset_after(offset)
            )
        bootstrap = tuple(s for s in model.ssps if config.stream(s.system_stream).bootstrap)
        task_lagging = lagging(
            {s: resume[s][model.name] for s in bootstrap},
            {s: default_of(s) for s in bootstrap},
            bounds or {},
            compare,
        )
        behind.update(task_lagging)
        tasks.append(
            TaskPlan(
                model=model,
                checkpoint=checkpoint,
                last_processed=last,
                carrying=tuple(ssp for ssp in model.ssps if carries_watermarks(ssp)),
                outputs={
                    stream: tuple(ssp for ssp in model.ssps if ssp.system_stream in upstream)
                    for stream, upstream in outputs.items()
                },
                bootstrap=bootstrap,
                lagging=task_lagging,
            )
        )
    starts = [
        _start(ssp, by_task, compare[ssp.system], default_of(ssp), (bounds or {}).get(ssp))
        for ssp, by_task in resume.items()
    ]
    return ContainerPlan(
        tuple(tasks),
        tuple(starts),
        _queue_capacity(config, models),
        Heads(behind, admins) if behind else None,
    )


def _start(
    ssp: SystemStreamPartition,
    by_task: Mapping[TaskName, str | None],
    compare: Callable[[str, str], int],
    default: str,
    bounds: OffsetBounds | None,
) -> ConsumerStart:
    """Read from the earliest offset any task resumes at; the tasks that resume later skip
    what they had processed. On a shared partition, a task that resumes at the offset
    default while another resumes after its checkpoint starts where the default is in
    ``bounds`` (what the partition held at start-up)."""
    known = [o for o in by_task.values() if o is not None]
    if not known:
        return ConsumerStart(ssp, None, default)
    if len(known) < len(by_task):
        assert bounds is not None, f"no start-up bounds of the shared partition {ssp}"
        at = default_position(bounds, default)
        by_task = {name: at if o is None else o for name, o in by_task.items()}
        known.append(at)
    start = known[0]
    for offset in known[1:]:
        if compare(offset, start) < 0:
            start = offset
    skip_to = {
        name: offset
        for name, offset in by_task.items()
        if len(by_task) > 1 and offset is not None and compare(offset, start) > 0
    }
    return ConsumerStart(ssp, start, default, skip_to)


def default_position(bounds: OffsetBounds, default: str) -> str:
    """Where a partition holding ``bounds`` starts at its offset ``default``: its oldest
    offset, or its upcoming one (also the oldest's place in an empty partition)."""
    if bounds.oldest is None or default == OffsetDefault.UPCOMING:
        return bounds.upcoming
    return bounds.oldest


def _queue_capacity(config: ResolvedConfig, models: Sequence[TaskModel]) -> dict[str, int]:
    per_system: dict[str, int] = defaultdict(int)
    for model in models:
        for ssp in model.ssps:
            per_system[ssp.system] += 1
    return {
        name: max(1, config.systems[name].fetch_threshold // n) for name, n in per_system.items()
    }


def input_queues(plan: ContainerPlan) -> dict[TaskName, dict[SystemStreamPartition, InputQueue]]:
    """One bounded queue per input partition of each task; on a partition several tasks
    share, a task that resumes later than the consumer starts skips what it processed."""
    skip = {(name, s.ssp): offset for s in plan.starts for name, offset in s.skip_to.items()}
    return {
        task.name: {
            ssp: InputQueue(ssp, plan.queue_capacity[ssp.system], skip.get((task.name, ssp)))
            for ssp in task.model.ssps
        }
        for task in plan.tasks
    }


def intermediate_outputs(config: ResolvedConfig) -> dict[SystemStream, frozenset[SystemStream]]:
    """The intermediate streams the job writes, each with its upstream inputs: those
    configured, else every input that is not an intermediate stream the job reads. A job
    with no upstream input for a stream (a downstream job that only reads it) does not
    write it."""
    inputs = list(dict.fromkeys(config.task.inputs))
    read_intermediate = {ss for ss in inputs if config.stream(ss).intermediate}
    outputs: dict[SystemStream, frozenset[SystemStream]] = {}
    for entry in config.streams.values():
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


__all__ = [
    "ConsumerStart",
    "ContainerPlan",
    "TaskPlan",
    "default_position",
    "input_queues",
    "intermediate_outputs",
    "job_model",
    "plan_container",
]
