"""``samzapy checkpoint show|set JOB_YAML``: read a job's checkpoints, or move its inputs.

``show`` prints each task's last checkpoint as one JSON object per line on stdout (task,
owner epoch, input offsets, changelog offsets, snapshots, topic IDs), tasks without one left out.

``set --to oldest|upcoming|TIME|FILE`` writes a new checkpoint of input offsets for the
job's tasks, Samza's checkpoint tool in samzapy's terms:

1. refuse unless the job keeps its checkpoints where this process can reach them (not
   ``memory``) and, under ``kafka-group``, the job's consumer group has no live member
   (they are named; exit 1);
2. read the checkpoints, as ``show`` does (creating no checkpoint stream or directory and
   claiming none; one whose owner record or file names another job is refused, exit 1);
3. work out each partition's new offset: ``oldest`` and ``upcoming`` from the partition's
   bounds, a time from the broker's offsets for it (Kafka's ListOffsets by time), with the
   job's intermediate streams at their end for all three; a file line by line (every
   problem named by its line; exit 2 before anything is written);
4. plan each task's checkpoint (``checkpoint_plan.plan_task``) and print what changes, one
   line per task and partition, ``old -> new``; ``--dry-run`` stops here;
5. write the checkpoints of the tasks that change through the job's own path
   (``ContainerCheckpoints``, under exactly-once the task's transactional producer, which
   fences any producer of the task still alive), two owner epochs up (``checkpoint_plan``:
   above the one a container that read the same checkpoints claims). If the checkpoints
   read again there differ from those planned from, nothing is written;
6. look at the group again: a member that joined while ``set`` ran may have read the
   checkpoints before the write, and is named (exit 1: stop the job, run ``set`` again).

Exit codes: 0 done, 1 refused because the job runs or a system failed, 2 a configuration
or usage problem (the job file, ``--to``, a line of the file).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from samzapy.api.errors import CheckpointError, ConfigError, SamzapyError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.registry import checkpoint_manager
from samzapy.checkpoint.stream import StreamCheckpointManager
from samzapy.checkpoint.transactional import checkpoint_streams, reading_existing
from samzapy.cli.checkpoint_members import JobRunningError, joined_error, running_error
from samzapy.cli.checkpoint_plan import (
    FILE,
    OLDEST,
    STDIN,
    TIME,
    PlanError,
    Target,
    TaskMove,
    describe,
    high_watermark_problems,
    last_processed,
    parse_positions,
    parse_target,
    plan_task,
    read_lines,
    show_line,
)
from samzapy.cli.logging import configure_logging, scrub
from samzapy.cli.process import add_working_directory_to_path, command_output, write_output
from samzapy.config import ResolvedConfig
from samzapy.container.checkpoints import ContainerCheckpoints, checkpoint_namespace
from samzapy.container.grouper import TaskModel
from samzapy.container.plan import job_model
from samzapy.container.streams import memory_intermediate_streams, partition_counts
from samzapy.container.systems import system_factory
from samzapy.coordinator.identity import (
    KAFKA_GROUP,
    coordinator_of,
    group_offsets_without_membership,
    job_group_id,
)
from samzapy.system.ports import SystemAdmin, SystemFactory

HELP = "print a job's checkpoints, or move its input offsets (show|set)"

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


def add_arguments(
    parser: argparse.ArgumentParser, job_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    commands = parser.add_subparsers(dest="checkpoint_command", required=True, metavar="show|set")
    show = commands.add_parser("show", help="print each task's last checkpoint as a JSON line")
    move = commands.add_parser(
        "set", help="write a checkpoint of new input offsets for the job's tasks"
    )
    for cmd in (show, move):
        job_arguments(cmd)
    move.add_argument(
        "--to",
        required=True,
        metavar="oldest|upcoming|TIME|FILE",
        help="oldest or upcoming message of every input partition; the first message at or "
        "after an ISO 8601 time with a time zone (with any of these, the job's "
        "intermediate streams go to their end); or a file of JSON lines as `show` prints "
        "them (- for standard input), whose tasks get the offsets on their line",
    )
    move.add_argument("--dry-run", action="store_true", help="print the changes, write nothing")
    move.add_argument(
        "--reset-stores",
        action="store_true",
        help="also drop the tasks' changelog offsets and snapshots: the restart empties "
        "their stores",
    )


def run(args: argparse.Namespace, load: Callable[..., Any]) -> int:
    configure_logging("console", "warning", stream=sys.stderr)  # stdout: the tool's output
    add_working_directory_to_path()
    try:
        with command_output() as out:  # what the job's modules print goes to stderr
            config, _ = load(args.job_yaml, args.overrides)
            if args.checkpoint_command == "show":
                return asyncio.run(_show(config, out))
            target = _target(args.to)
            reset = args.reset_stores
            return asyncio.run(_set(config, target, out, dry_run=args.dry_run, reset=reset))
    except (ConfigError, PlanError) as exc:
        problems = exc.problems if isinstance(exc, PlanError) else list(exc.problems)
        for problem in problems:
            print(scrub(problem), file=sys.stderr)
        return EXIT_USAGE
    except SamzapyError as exc:
        print(f"samzapy checkpoint {args.checkpoint_command}: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_REFUSED


def _target(text: str) -> Target:
    if text not in (OLDEST, "upcoming") and os.path.isdir(text):
        lines = "a file of JSON lines as `samzapy checkpoint show` prints them"
        raise PlanError([f"--to: {text!r} is a directory: give {lines}, or a time"])
    return parse_target(text, is_file=text not in (OLDEST, "upcoming") and os.path.isfile(text))


# -- the job's facts ----------------------------------------------------------------------------


class _Job:
    """A job's systems (admins started), its inputs' partition counts and its tasks."""

    def __init__(self, config: ResolvedConfig) -> None:
        self.config = config
        self.factories: dict[str, SystemFactory] = {
            name: system_factory(config, name) for name in config.systems
        }
        self.admins: dict[str, SystemAdmin] = {}
        self.counts: dict[SystemStream, int] = {}
        self.models: list[TaskModel] = []
        self.task_count = 0

    @property
    def namespace(self) -> str:
        return checkpoint_namespace(self.config)

    async def start(self) -> None:
        self.check_manager()  # before the inputs: a memory job's are not in this process
        for name, factory in self.factories.items():
            self.admins[name] = admin = factory.get_admin()
            await admin.start()
        cfg = self.config
        streams = [*cfg.task.inputs, *(b.system_stream for b in cfg.task.broadcast_inputs)]
        await memory_intermediate_streams(cfg, self.admins)
        self.counts = await partition_counts(self.admins, streams, cfg)
        self.models, self.task_count = job_model(cfg, self.counts)

    async def stop(self) -> None:
        for admin in self.admins.values():
            await admin.stop()

    def check_manager(self) -> None:
        factory = self.config.task.checkpoint_factory
        if factory is None:
            raise PlanError(["task.checkpoint.factory is not set: the job keeps no checkpoints"])
        if factory == "memory":
            raise PlanError(
                [
                    "task.checkpoint.factory is memory: the job's checkpoints live in its own "
                    "process, out of this tool's reach (use file or kafka)"
                ]
            )

    async def read_checkpoints(
        self, unreadable: dict[TaskName, str] | None = None
    ) -> dict[TaskName, Checkpoint]:
        """Every task's last checkpoint, read as the container does, creating no stream or
        directory; an unreadable one raises unless ``unreadable`` takes its task's error."""
        self.check_manager()
        manager = checkpoint_manager(
            self.config, self.factories, self.namespace, task_count=self.task_count
        )
        assert manager is not None
        if isinstance(manager, FileCheckpointManager) and not manager.has_directory():
            return {}
        if isinstance(manager, StreamCheckpointManager):
            admin = self.admins[manager.system_factory.system_name]
            existing = await admin.partition_counts(checkpoint_streams(manager))
            reader = reading_existing(manager, existing)
            if reader is None:
                return {}
            manager = reader
        if isinstance(manager, FileCheckpointManager | StreamCheckpointManager):
            manager.claim_owner = False  # another job's refused, none claimed
        for model in self.models:
            manager.register(model.name)
        await manager.start()
        try:
            found = {}
            for model in self.models:
                try:
                    checkpoint = await manager.read_last(model.name)
                except CheckpointError as exc:
                    if unreadable is None:
                        raise
                    unreadable[model.name] = str(exc)
                    continue
                if checkpoint is not None:
                    found[model.name] = checkpoint
            return found
        finally:
            await manager.stop()

    async def live_members(self) -> list[tuple[str, str, str]]:
        """The members of the job's consumer group (kafka-group only: static containers
        join no group)."""
        cfg = self.config
        if coordinator_of(cfg) != KAFKA_GROUP or not cfg.task.inputs:
            return []
        return await self.admins[cfg.task.inputs[0].system].group_members(job_group_id(cfg))

    async def upcoming_and_oldest(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, tuple[int, int]]:
        """Each partition's (first offset held, upcoming offset); both the upcoming one when
        the partition is empty."""
        out = {}
        for system, wanted in _by_system(ssps).items():
            for ssp, bounds in (await self.admins[system].offset_bounds(wanted)).items():
                upcoming = _integer(system, bounds.upcoming)
                oldest = upcoming if bounds.oldest is None else _integer(system, bounds.oldest)
                out[ssp] = (oldest, upcoming)
        return out

    async def first_at(
        self, ssps: Sequence[SystemStreamPartition], timestamp_ms: int
    ) -> dict[SystemStreamPartition, int | None]:
        out: dict[SystemStreamPartition, int | None] = {}
        for system, wanted in _by_system(ssps).items():
            found = await self.admins[system].offsets_for_time(wanted, timestamp_ms)
            if found is None:
                raise PlanError(
                    [
                        f"--to: system {system!r} cannot find offsets by time (only kafka "
                        "systems can): use oldest, upcoming or a file of offsets"
                    ]
                )
            for ssp, offset in found.items():
                out[ssp] = None if offset is None else _integer(system, offset)
        return out


def _by_system(
    ssps: Iterable[SystemStreamPartition],
) -> dict[str, list[SystemStreamPartition]]:
    by_system: dict[str, list[SystemStreamPartition]] = defaultdict(list)
    for ssp in dict.fromkeys(ssps):
        by_system[ssp.system].append(ssp)
    return by_system


def _integer(system: str, offset: str) -> int:
    try:
        return int(offset)
    except ValueError:
        raise PlanError(
            [
                f"system {system!r} has offsets that are not integers ({offset!r}): this tool "
                "can only move integer offsets"
            ]
        ) from None


# -- show ---------------------------------------------------------------------------------------


async def _show(config: ResolvedConfig, out: TextIO) -> int:
    """Each task's checkpoint, a JSON line each; an unreadable one named on stderr (exit 1)."""
    job = _Job(config)
    unreadable: dict[TaskName, str] = {}
    try:
        await job.start()
        found = await job.read_checkpoints(unreadable)
    finally:
        await job.stop()
    lines = [show_line(m.name, found[m.name]) for m in job.models if m.name in found]
    write_output(out, "".join(f"{line}\n" for line in lines))  # `| head -1`: quietly
    missing = [str(m.name) for m in job.models if m.name not in found and m.name not in unreadable]
    if missing:
        print(f"no checkpoint yet: {', '.join(missing)}", file=sys.stderr)
    for task, error in unreadable.items():
        print(f"samzapy checkpoint show: task {str(task)!r}: {scrub(error)}", file=sys.stderr)
    return EXIT_REFUSED if unreadable else EXIT_OK


# -- set ----------------------------------------------------------------------------------------


async def _set(
    config: ResolvedConfig, target: Target, out: TextIO, *, dry_run: bool, reset: bool
) -> int:
    job = _Job(config)
    try:
        job.check_manager()
        # The file first: its problems are the operator's to fix, whatever the job does.
        lines = read_lines(target.path) if target.path is not None else None
        await job.start()
        # 1. Nobody may be running the job.
        if members := await job.live_members():
            raise running_error(config, members)
        # 2. The checkpoints.
        found = await job.read_checkpoints()
        # 3. The new offsets, by task.
        targets = await _targets(job, target, lines)
        # 4. The plan.
        unlogged = [s.name for s in config.stores.values() if s.changelog is None]
        moves = [
            plan_task(t, found.get(t), offsets, job.counts, reset_stores=reset, unlogged=unlogged)
            for t, offsets in targets.items()
        ]
        for move in moves:
            for line in describe(move):
                _say(out, line)
        changing = [m for m in moves if m.changed]
        if dry_run:
            _say(out, f"dry run: {len(changing)} checkpoint(s) would be written, none was")
            return EXIT_OK
        if not changing:
            _say(out, "nothing to change: no checkpoint written")
            return EXIT_OK
        # 5. Write.
        await _write(job, found, changing)
        epochs = ", ".join(f"{m.task} (epoch {m.new.epoch})" for m in changing)
        _say(out, f"wrote {len(changing)} checkpoint(s): {epochs}")
        # 6. A container that joined meanwhile may have read the checkpoints before the write.
        if members := await job.live_members():
            raise joined_error(config, len(changing), members)
        return EXIT_OK
    finally:
        await job.stop()


def _say(out: TextIO, line: str) -> None:
    """A line of set's output. A reader that closed the pipe (``| head``) does not stop set
    halfway: what was asked is written, the rest of the output goes unseen."""
    write_output(out, line + "\n")


async def _targets(
    job: _Job, target: Target, lines: list[str] | None
) -> dict[TaskName, dict[SystemStreamPartition, str]]:
    """Step 3: each task's new last processed offsets (for a file, only its tasks')."""
    if target.kind == FILE:
        assert lines is not None and target.path is not None
        source = "<stdin>" if target.path == STDIN else target.path
        entries, problems = parse_positions(lines, source, job.models, job.counts)
        # A memory stream lives in the job's process: its partitions here are empty copies,
        # whose ends say nothing of the job's (a restart makes them again anyway).
        memory = {name for name, system in job.config.systems.items() if system.factory == "memory"}
        named = [ssp for entry in entries for ssp in entry.offsets if ssp.system not in memory]
        bounds = await job.upcoming_and_oldest(named)
        upcoming = {ssp: b[1] for ssp, b in bounds.items()}
        problems += high_watermark_problems(entries, upcoming, source)
        if problems:
            # In line order, every one of them: nothing is written.
            raise PlanError([text for _, text in sorted(problems, key=lambda p: p[0])])
        return {e.task: {ssp: str(offset) for ssp, offset in e.offsets.items()} for e in entries}
    ssps = [ssp for model in job.models for ssp in model.ssps]
    bounds = await job.upcoming_and_oldest(ssps)
    # The job writes its intermediate streams itself: they go to their end, whatever the
    # target (as Kafka Streams' reset tool skips its repartition topics). What the inputs'
    # new offsets make the job read again, it writes there again; what they skip, it skips.
    config = job.config
    first = {
        ssp: end
        for ssp, (_, end) in bounds.items()
        if config.stream(ssp.system_stream).intermediate
    }
    inputs = {ssp: b for ssp, b in bounds.items() if ssp not in first}
    if target.kind == OLDEST:
        first.update({ssp: oldest for ssp, (oldest, _) in inputs.items()})
    elif target.kind == TIME:
        assert target.timestamp_ms is not None
        found = await job.first_at(list(inputs), target.timestamp_ms)
        # No message at or after the time: start at the end.
        first.update({ssp: inputs[ssp][1] if o is None else o for ssp, o in found.items()})
    else:
        first.update({ssp: upcoming for ssp, (_, upcoming) in inputs.items()})
    return {
        model.name: {ssp: last_processed(first[ssp]) for ssp in model.ssps} for model in job.models
    }


async def _write(
    job: _Job, planned_from: Mapping[TaskName, Checkpoint], moves: Sequence[TaskMove]
) -> None:
    """Step 5, through the container's own checkpoint path."""
    # The group's offsets follow, so Kafka's tools show the new position at once.
    group = group_offsets_without_membership(job.config)
    checkpoints = ContainerCheckpoints(
        job.config, job.factories, job.namespace, task_count=job.task_count, group=group
    )
    try:
        found = await checkpoints.start([m.name for m in job.models])
        if dict(found) != dict(planned_from):
            changed = sorted(
                str(t)
                for t in set(found) | set(planned_from)
                if found.get(t) != planned_from.get(t)
            )
            raise CheckpointError(
                f"the checkpoints of {', '.join(changed)} changed while this tool planned: "
                "something runs the job; nothing was written"
            )
        for move in moves:
            # Under the plan's epoch, which no container that read ``found`` claims.
            assert move.new.epoch is not None
            last = Checkpoint({}, epoch=move.new.epoch - 1)
            await checkpoints.writer(move.task, last).write(move.new)
    finally:
        await checkpoints.stop()
        if group is not None:
            await group.stop()


__all__ = ["HELP", "JobRunningError", "add_arguments", "run"]
