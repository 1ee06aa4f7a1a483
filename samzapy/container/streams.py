"""Preparing a job's streams before its tasks start (I/O through the systems' admins).

``prepare_streams`` creates the intermediate streams that are missing, checks that every input
exists and returns the inputs' partition counts: what a container needs before it plans its
tasks, and what the JobRunner needs before it joins a group that hands out those partitions.
``prepare_changelogs`` creates the stores' missing changelogs, one partition per task, and
checks the settings of those that exist (``changelog_config.py``).
``start_bounds`` reads what the partitions of the bootstrap inputs, those several tasks share
and those a task starts at its offset default hold at start-up.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping

import structlog

from samzapy.api.errors import ConfigError, InputMissingError, StoreError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import ResolvedConfig
from samzapy.container.changelog_config import CHANGELOG_CONFIG, check_changelog_configs
from samzapy.container.grouper import TaskModel
from samzapy.system.ports import OffsetBounds, SystemAdmin

log = structlog.get_logger("samzapy.container")


async def prepare_streams(
    config: ResolvedConfig, admins: Mapping[str, SystemAdmin]
) -> dict[SystemStream, int]:
    """Create the missing intermediate streams; return the partition count of every input
    (broadcast inputs included). An input that does not exist is an error naming it."""
    inputs = list(dict.fromkeys(config.task.inputs))
    await _create_intermediate_streams(config, admins, inputs)
    broadcast = [b.system_stream for b in config.task.broadcast_inputs]
    return await partition_counts(admins, [*inputs, *broadcast], config)


async def memory_intermediate_streams(
    config: ResolvedConfig, admins: Mapping[str, SystemAdmin]
) -> None:
    """Make the job's intermediate streams on memory systems in this process, empty, as the
    job's own process makes them at start-up (for the tools: they live in the job's)."""
    memory = [name for name, s in config.systems.items() if s.factory == "memory"]
    if memory:
        await _create_intermediate_streams(config, admins, list(config.task.inputs), memory)


def how_to_create(config: ResolvedConfig | None, system: str, stream: str) -> str:
    """What to do about a missing input: for a kafka system, the command that creates it."""
    system_config = config.systems.get(system) if config is not None else None
    # An application names its inputs in its descriptors (task.inputs is made of them).
    where = "task.inputs" if config is None or config.task.app_class is None else "its name"
    if system_config is not None and system_config.factory == "kafka":
        servers = system_config.servers_text()
        return (
            f"create it first: kafka-topics.sh --bootstrap-server {servers} --create "
            f"--topic {stream} --partitions <N>; or correct {where}"
        )
    return f"create it on system {system!r} first, or correct {where}"


async def partition_counts(
    admins: Mapping[str, SystemAdmin],
    streams: Iterable[SystemStream],
    config: ResolvedConfig | None = None,
    *,
    missing_ok: bool = False,
) -> dict[SystemStream, int]:
    """The partition count of each of ``streams``; InputMissingError (a configuration
    problem, with how to create it when ``config`` says) if one is missing, unless
    ``missing_ok`` (then it is left out)."""
    by_system: dict[str, list[str]] = defaultdict(list)
    for ss in dict.fromkeys(streams):
        by_system[ss.system].append(ss.stream)
    counts: dict[SystemStream, int] = {}
    for system, names in by_system.items():
        found = await admins[system].partition_counts(names)
        for name in names:
            if name not in found:
                if missing_ok:
                    continue
                hint = how_to_create(config, system, name)
                raise InputMissingError(
                    f"input stream {system}.{name} does not exist on system {system!r}: {hint}",
                    system=system,
                    stream=name,
                    hint=hint,
                )
            counts[SystemStream(system, name)] = found[name]
    return counts


async def _create_intermediate_streams(
    config: ResolvedConfig,
    admins: Mapping[str, SystemAdmin],
    inputs: list[SystemStream],
    systems: Collection[str] | None = None,
) -> None:
    """Create the intermediate streams that do not exist yet (on ``systems`` only, when
    given), with ``partitions`` or else the largest partition count of the job's other
    inputs (Samza's default)."""
    every = [
        (s.stream_id, SystemStream(s.system, s.physical_name))
        for s in config.streams.values()
        if s.intermediate and s.system is not None
    ]
    wanted = [(i, ss) for i, ss in every if systems is None or ss.system in systems]
    if not wanted:
        return
    intermediate = {ss for _, ss in every}
    others = [ss for ss in inputs if ss not in intermediate]
    for stream_id, ss in wanted:
        admin = admins[ss.system]
        partitions = config.streams[stream_id].partitions
        existing = (await admin.partition_counts([ss.stream])).get(ss.stream)
        if existing is not None:
            if partitions is not None and partitions != existing:
                log.warning(
                    "intermediate_partitions_kept",
                    stream=str(ss),
                    partitions=existing,
                    configured=partitions,
                    reason="the stream exists: samzapy creates intermediate streams, never "
                    "changes them; delete it (and what it holds) for the new count",
                )
            continue
        if partitions is None:
            if not others:
                raise ConfigError(
                    f"streams.{stream_id}.partitions must be set: the intermediate stream "
                    f"{ss} does not exist yet and the job has no other input to size it by",
                    key=f"streams.{stream_id}.partitions",
                )
            partitions = max((await partition_counts(admins, others, config)).values())
        await admin.create_stream(
            ss.stream,
            partitions,
            replication_factor=config.streams[stream_id].replication_factor,
        )
        log.info("stream_created", stream=str(ss), partitions=partitions, intermediate=True)


async def start_bounds(
    config: ResolvedConfig,
    admins: Mapping[str, SystemAdmin],
    models: Iterable[TaskModel],
    checkpoints: Mapping[TaskName, Checkpoint],
) -> dict[SystemStreamPartition, OffsetBounds]:
    """What each input partition of the tasks ``models`` holds now that belongs to a
    bootstrap input (``samza.bootstrap``: its head is the upcoming offset), that several of
    them share (a broadcast input), or that a task starts at its offset default (no offset
    in its checkpoint ``checkpoints``, or ``samza.reset.offset``): where such a task starts,
    resolved once for the plan. Empty when none does."""
    readers: dict[SystemStreamPartition, int] = defaultdict(int)
    at_default: set[SystemStreamPartition] = set()
    for model in models:
        checkpoint = checkpoints.get(model.name)
        for ssp in model.ssps:
            readers[ssp] += 1
            stream = config.stream(ssp.system_stream)
            if checkpoint is None or stream.reset_offset or ssp not in checkpoint.offsets:
                at_default.add(ssp)
    by_system: dict[str, list[SystemStreamPartition]] = defaultdict(list)
    for ssp, n in readers.items():
        if n > 1 or ssp in at_default or config.stream(ssp.system_stream).bootstrap:
            by_system[ssp.system].append(ssp)
    heads: dict[SystemStreamPartition, OffsetBounds] = {}
    for system, ssps in by_system.items():
        heads.update(await admins[system].offset_bounds(ssps))
    return heads


async def prepare_changelogs(
    config: ResolvedConfig, admins: Mapping[str, SystemAdmin], task_count: int
) -> None:
    """Create the stores' missing changelogs (compacted, one partition per task). Task N's
    store restores from partition N: a changelog with fewer partitions than the job has tasks
    is an error, and so is one with more whose extra partitions hold records (state no task
    would restore); empty extra partitions are only logged (``changelog_partitions_unused``).
    The changelogs that exist have their settings checked, all at once, at the end."""
    existing: dict[str, SystemStream] = {}
    for name, store in config.stores.items():
        changelog = store.changelog
        if changelog is None:
            continue
        admin = admins[changelog.system]
        found = (await admin.partition_counts([changelog.stream])).get(changelog.stream)
        if found is None:
            await admin.create_stream(
                changelog.stream,
                task_count,
                replication_factor=config.stream(changelog).replication_factor,
                config=dict(CHANGELOG_CONFIG),
            )
            log.info("stream_created", stream=str(changelog), partitions=task_count, store=name)
            continue
        existing[name] = changelog
        if found < task_count:
            raise StoreError(
                f"the changelog {changelog} of store {name!r} has {_count(found, 'partition')}; "
                f"the job has {task_count} tasks and needs one partition per task"
            )
        elif found > task_count:
            await _check_extra_partitions(admin, name, changelog, found, task_count)
    await check_changelog_configs(config, admins, existing)


async def _check_extra_partitions(
    admin: SystemAdmin, store: str, changelog: SystemStream, found: int, task_count: int
) -> None:
    extra = [
        SystemStreamPartition(changelog.system, changelog.stream, p)
        for p in range(task_count, found)
    ]
    bounds = await admin.offset_bounds(extra)
    held = [
        f"{ssp.partition} (offsets {b.oldest} to {b.upcoming})"
        for ssp, b in bounds.items()
        if b.oldest is not None
    ]
    if held:
        which = "partition {} holds" if len(held) == 1 else "partitions {} hold"
        raise StoreError(
            f"the changelog {changelog} of store {store!r} has {found} partitions; the job "
            f"has {_count(task_count, 'task')}, whose stores restore from partitions 0 to "
            f"{task_count - 1}, but {which.format(', '.join(held))} records no task would "
            "restore (the state of tasks the job no longer has, or another job's): give the "
            f"store a changelog of its own with {task_count} partitions, or run the job with "
            "the inputs it had"
        )
    log.warning(
        "changelog_partitions_unused",
        store=store,
        changelog=str(changelog),
        partitions=found,
        tasks=task_count,
        reason=f"task N's store restores from partition N: partitions {task_count} to "
        f"{found - 1} are empty and stay unused",
    )


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def declared_outputs(config: ResolvedConfig) -> list[SystemStream]:
    """The streams the job declares (``streams.<id>`` on a system) and its dead-letter
    stream: what the routers look up before the tasks start, so a send to one is routed at
    once."""
    declared = [
        SystemStream(s.system, s.physical_name) for s in config.streams.values() if s.system
    ]
    if config.task.dead_letter_stream is not None:
        declared.append(config.task.dead_letter_stream)
    return declared


__all__ = [
    "CHANGELOG_CONFIG",
    "declared_outputs",
    "partition_counts",
    "prepare_changelogs",
    "prepare_streams",
    "start_bounds",
]
