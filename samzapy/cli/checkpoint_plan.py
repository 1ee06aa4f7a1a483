"""Planning ``samzapy checkpoint``: the lines ``show`` prints, and what ``set`` will write.

Pure, no I/O: ``checkpoint_tool.py`` gathers the facts (the job's tasks, the partitions'
offsets, the checkpoints read) and writes what the plan says.

A checkpoint holds each input partition's *last processed* offset, and a task resumes at the
offset after it. So a partition that should start at offset ``n`` gets ``n - 1``: ``-1`` for a
partition whose first message is at 0, which is also what a task that has processed nothing
of it yet would write. Leaving the partition out instead would not do: the task would then
start at the stream's ``samza.offset.default``, which may well be ``upcoming``.

A partition moved back (to an offset below the one checkpointed) must really be processed
again, so ``set`` also rewinds the task's control bookkeeping for it (``rewind_control``,
``samzapy/control/rewind.py``: its end-of-stream and watermark reports and the origins it
applied are forgotten, its writer epoch goes up). With ``oldest``, ``upcoming`` or a
time, an intermediate stream goes to its end: what the inputs' new offsets make the job read
again, it writes there again (a file of offsets moves it where its lines say).

The task's changelog offsets, snapshots and partition counts stay as they were, so its stores
keep their state; ``--reset-stores`` drops the changelog offsets and snapshots, naming an
empty snapshot (``snapshots.EMPTY``) for each store without changelog, and the restart then
empties every store of the task. The topic IDs of the inputs it moves are dropped: their new
offsets hold for the topics as they are now, recreated or not, whose IDs the restart records
(``container/stale_offsets.py``; ``describe`` says so); the others' stay.

The new checkpoint's owner epoch is two above the checkpoint's (``FIRST_EPOCH``, 2, for a
task that has none), not one as a container taking the task claims: a container that read
the same checkpoint (one that started as ``set`` wrote, or that started the task from none
and owns it under epoch 1 without having written anything) claims the one above, and its
claim and commits must not count over the move (a file checkpoint of a higher epoch refuses
them, other readers keep the highest epoch; on a tie they would keep the latest record).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config.validate import parse_system_stream
from samzapy.container.grouper import TaskModel
from samzapy.control.rewind import Rewound, rewind_control
from samzapy.storage.snapshots import EMPTY

#: The keys of a line ``show`` prints; ``set --to FILE`` reads ``task`` and ``offsets``.
LINE_KEYS = ("task", "epoch", "offsets", "changelog_offsets", "snapshots", "topic_ids")
OLDEST = "oldest"
UPCOMING = "upcoming"
TIME = "time"
FILE = "file"
STDIN = "-"  # ``--to -``: the lines come from standard input
#: The owner epoch of the checkpoint ``set`` writes for a task that had none (see above).
FIRST_EPOCH = 2
_INTEGER = re.compile(r"-?[0-9]+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class PlanError(Exception):
    """What the operator asked for cannot be done as asked; nothing was written (exit 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def read_lines(path: str) -> list[str]:
    """The lines of ``--to``'s file (``-``: standard input); PlanError if it is not UTF-8
    text (standard input too, where the locale decodes strictly) or cannot be read."""
    try:
        if path == STDIN:
            return sys.stdin.read().splitlines()
        with open(path, encoding="utf-8") as file:
            return file.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        where = "standard input" if path == STDIN else repr(path)
        raise PlanError([f"--to: cannot read {where}: {exc}"]) from exc


def show_line(task: TaskName, checkpoint: Checkpoint) -> str:
    """One task's checkpoint as the JSON line ``show`` prints (``set --to FILE`` reads it)."""
    offsets = {str(ssp): offset for ssp, offset in sorted(checkpoint.offsets.items())}
    return json.dumps(
        {
            "task": str(task),
            "epoch": checkpoint.epoch,
            "offsets": offsets,
            "changelog_offsets": dict(sorted(checkpoint.changelog_offsets.items())),
            "snapshots": dict(sorted(checkpoint.snapshots.items())),
            "topic_ids": {str(ss): i for ss, i in sorted(checkpoint.topic_ids.items())},
        }
    )


def parse_ssp(text: str) -> SystemStreamPartition | None:
    """``kafka.page-views#2`` (as ``show`` prints it) -> its partition; None if malformed."""
    name, hash_, number = text.rpartition("#")
    ss = parse_system_stream(name)
    if not hash_ or ss is None or not number.isdigit():
        return None
    return SystemStreamPartition(ss.system, ss.stream, int(number))


# -- --to ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where ``--to`` moves the offsets: ``kind`` is oldest, upcoming, time or file."""

    kind: str
    timestamp_ms: int | None = None
    path: str | None = None


def parse_target(text: str, *, is_file: bool) -> Target:
    """``--to``'s value; ``is_file``: whether it names an existing file (checked by the
    caller). The keywords win over a file of the same name (write ``./oldest`` for that)."""
    if text in (OLDEST, UPCOMING):
        return Target(text)
    if text == STDIN or is_file:
        return Target(FILE, path=text)
    try:
        moment: datetime | None = datetime.fromisoformat(text)
    except ValueError as exc:  # a date, not a valid one, when it starts as one: say why
        moment, invalid = None, f"{text!r} is no valid ISO 8601 time ({exc})"
    if moment is not None and moment.tzinfo is not None:
        return Target(TIME, timestamp_ms=(moment - _EPOCH) // timedelta(milliseconds=1))
    if moment is not None:
        why = f"the time {text!r} has no time zone: add Z (UTC) or an offset such as +02:00"
    elif re.match(r"[0-9]{4}-[0-9]", text):
        why = f"{invalid}: write a time as 2024-05-01T12:00:00Z or with an offset (+02:00)"
    else:
        why = (
            "expected oldest, upcoming, an ISO 8601 time with a time zone (2024-05-01T12:00:00Z)"
            " or a file of JSON lines as `samzapy checkpoint show` prints them (- for standard "
            f"input), got {text!r}, which is none of these (no file has that name)"
        )
    raise PlanError([f"--to: {why}"])


# -- --to FILE ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    """One line of a positions file: a task's new last processed offsets, by partition."""

    task: TaskName
    line: int
    offsets: Mapping[SystemStreamPartition, int]


def parse_positions(
    lines: Iterable[str],
    source: str,
    models: Sequence[TaskModel],
    counts: Mapping[SystemStream, int],
) -> tuple[list[FileEntry], list[tuple[int, str]]]:
    """The good entries of a positions file, checked against the job's tasks and the inputs'
    partition counts, and the problems of the others: (line number, ``SOURCE:LINE: what``)."""
    owners = {ssp: model.name for model in models for ssp in model.ssps}
    tasks = {model.name: model for model in models}
    entries: list[FileEntry] = []
    seen: dict[TaskName, int] = {}
    problems: list[tuple[int, str]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source}:{number}"
        try:
            entry = _entry(raw, number, tasks, owners, counts, seen)
        except PlanError as exc:
            problems.extend((number, f"{where}: {p}") for p in exc.problems)
            continue
        seen[entry.task] = number
        entries.append(entry)
    return entries, problems


def _entry(
    raw: str,
    number: int,
    tasks: Mapping[TaskName, TaskModel],
    owners: Mapping[SystemStreamPartition, TaskName],
    counts: Mapping[SystemStream, int],
    seen: Mapping[TaskName, int],
) -> FileEntry:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise PlanError([f"not a JSON object: {exc}"]) from None
    if not isinstance(data, dict):
        raise PlanError([f"not a JSON object: {raw.strip()[:60]!r}"])
    unknown = sorted(set(data) - set(LINE_KEYS))
    if unknown:
        raise PlanError(
            [
                f"unknown key(s) {', '.join(map(repr, unknown))}: a line holds 'task' and "
                "'offsets' (and what else `samzapy checkpoint show` prints, which is ignored)"
            ]
        )
    task = data.get("task")
    if not isinstance(task, str):
        raise PlanError([f"'task' must be a task name such as 'Partition 0', got {task!r}"])
    name = TaskName(task)
    if name not in tasks:
        known = ", ".join(repr(str(t)) for t in list(tasks)[:4]) + (
            " ..." if len(tasks) > 4 else ""
        )
        raise PlanError([f"unknown task {task!r}: the job's tasks are {known or 'none'}"])
    if name in seen:
        raise PlanError([f"task {task!r} again (first on line {seen[name]})"])
    offsets = data.get("offsets")
    if not isinstance(offsets, dict):
        raise PlanError(
            [
                f'\'offsets\' must map partitions to offsets, like {{"kafka.in#0": "41"}}, '
                f"got {offsets!r}"
            ]
        )
    problems: list[str] = []
    parsed: dict[SystemStreamPartition, int] = {}
    for key, value in offsets.items():
        ssp = parse_ssp(key)
        problem = _partition_problem(key, ssp, name, owners, counts)
        if problem is None:
            assert ssp is not None
            offset = _offset(value)
            if offset is None:
                problem = (
                    f"the offset of {key} must be an integer >= -1 (the last processed "
                    f"offset; -1: nothing processed), got {value!r}"
                )
            else:
                parsed[ssp] = offset
        if problem is not None:
            problems.append(problem)
    if problems:
        raise PlanError(problems)
    return FileEntry(name, number, parsed)


def _partition_problem(
    key: str,
    ssp: SystemStreamPartition | None,
    task: TaskName,
    owners: Mapping[SystemStreamPartition, TaskName],
    counts: Mapping[SystemStream, int],
) -> str | None:
    if ssp is None:
        return f"{key!r} is not a partition: expected SYSTEM.STREAM#PARTITION, like kafka.in#0"
    count = counts.get(ssp.system_stream)
    if count is None:
        inputs = ", ".join(sorted(str(ss) for ss in counts))
        return f"{ssp.system_stream} is not an input of the job (its inputs: {inputs})"
    if ssp.partition >= count:
        return (
            f"partition {ssp.partition} of {ssp.system_stream} does not exist: the stream has "
            f"partitions 0..{count - 1}"
        )
    owner = owners.get(ssp)
    if owner != task:
        return f"{ssp} is read by task {str(owner)!r}, not by {str(task)!r}"
    return None


def _offset(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
    else:
        return None
    return number if number >= -1 else None


def high_watermark_problems(
    entries: Sequence[FileEntry], upcoming: Mapping[SystemStreamPartition, int], source: str
) -> list[tuple[int, str]]:
    """The offsets past a partition's last message: a checkpoint holds the last processed
    offset, at most the high watermark (the next message's offset) minus one. A partition
    ``upcoming`` leaves out is not checked."""
    problems = []
    for entry in entries:
        for ssp, offset in entry.offsets.items():
            high = upcoming.get(ssp)
            if high is not None and offset >= high:
                problems.append(
                    (
                        entry.line,
                        f"{source}:{entry.line}: offset {offset} of {ssp} is past the partition's "
                        f"end: its high watermark is {high}, so a checkpoint can hold at most "
                        f"{high - 1} (the last processed offset)",
                    )
                )
    return problems


# -- the plan -----------------------------------------------------------------------------------


def last_processed(first_to_read: int) -> str:
    """The checkpoint offset of a partition whose next message to read is ``first_to_read``."""
    return str(first_to_read - 1)


@dataclass(frozen=True)
class PartitionMove:
    ssp: SystemStreamPartition
    old: str | None
    new: str
    #: Moved below the checkpointed offset.
    back: bool
    #: What of the control bookkeeping was rewound for it (``rewind_control``).
    rewound: Rewound | None = None


@dataclass(frozen=True)
class TaskMove:
    task: TaskName
    old: Checkpoint | None
    new: Checkpoint
    moves: tuple[PartitionMove, ...]
    #: The stores whose changelog offsets and snapshots ``--reset-stores`` dropped.
    reset_stores: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return any(m.old != m.new for m in self.moves) or bool(self.reset_stores)


def plan_task(
    task: TaskName,
    old: Checkpoint | None,
    targets: Mapping[SystemStreamPartition, str],
    counts: Mapping[SystemStream, int],
    *,
    reset_stores: bool = False,
    unlogged: Collection[str] = (),
) -> TaskMove:
    """The checkpoint that moves ``task``'s partitions to ``targets`` (last processed
    offsets), keeping everything else of ``old``, two owner epochs up. ``unlogged``:
    the job's stores without changelog, which ``reset_stores`` empties too."""
    offsets = dict(old.offsets) if old is not None else {}
    back = [
        ssp
        for ssp, new in targets.items()
        if (before := _number(offsets.get(ssp))) is not None and int(new) < before
    ]
    control, rewound = rewind_control(old.control if old is not None else None, back)
    moves = tuple(
        PartitionMove(ssp, offsets.get(ssp), new, ssp in back, rewound.get(ssp))
        for ssp, new in sorted(targets.items())
    )
    offsets.update(targets)
    # Two up: a container that read ``old`` too claims the one above it (module docstring).
    epoch = (old.epoch or 0) + 2 if old is not None else FIRST_EPOCH
    if old is None:  # no checkpoint covered its stores: the restart empties them, as before
        empty = dict.fromkeys(sorted(unlogged), EMPTY)
        new = Checkpoint(offsets, dict(counts), epoch=epoch, snapshots=empty)
        return TaskMove(task, None, new, moves, tuple(empty) if reset_stores else ())
    # A store without changelog starts empty from a checkpoint naming an empty snapshot.
    blank = {*unlogged, *(k for k in old.snapshots if k not in old.changelog_offsets)}
    dropped = tuple(sorted({*old.changelog_offsets, *blank})) if reset_stores else ()
    moved = {m.ssp.system_stream for m in moves if m.old != m.new}
    new = dataclasses.replace(
        old,
        offsets=offsets,
        topic_ids={ss: i for ss, i in old.topic_ids.items() if ss not in moved},
        control=control,
        epoch=epoch,
        changelog_offsets={} if reset_stores else old.changelog_offsets,
        snapshots=dict.fromkeys(sorted(blank), EMPTY) if reset_stores else old.snapshots,
    )
    return TaskMove(task, old, new, moves, dropped)


def _number(offset: str | None) -> int | None:
    return int(offset) if offset is not None and _INTEGER.fullmatch(offset) else None


def describe(move: TaskMove) -> list[str]:
    """What ``set`` changes for one task, a line per partition (saying when the topic ID of
    its input is dropped, ``plan_task``), and one for its stores."""
    lines = []
    old_ids = move.old.topic_ids if move.old is not None else {}
    for m in move.moves:
        if m.old == m.new:
            lines.append(f"{move.task}  {m.ssp}  {m.new}  (unchanged)")
            continue
        notes = [f"resumes at offset {int(m.new) + 1}"]
        if m.rewound is not None:
            notes.extend(m.rewound.notes())
        if (ss := m.ssp.system_stream) in old_ids and ss not in move.new.topic_ids:
            it = "the restart takes the offset as the current topic's"
            notes.append(f"topic ID {old_ids[ss]} dropped: {it}")
        old = "none" if m.old is None else m.old
        lines.append(f"{move.task}  {m.ssp}  {old} -> {m.new}  ({'; '.join(notes)})")
    if move.reset_stores:
        lines.append(
            f"{move.task}  stores {', '.join(move.reset_stores)}: changelog offsets and "
            "snapshots dropped (the restart empties them)"
        )
    return lines


__all__ = [
    "FIRST_EPOCH",
    "FileEntry",
    "PartitionMove",
    "PlanError",
    "Rewound",
    "Target",
    "TaskMove",
    "describe",
    "high_watermark_problems",
    "last_processed",
    "parse_positions",
    "parse_ssp",
    "parse_target",
    "plan_task",
    "rewind_control",
    "show_line",
]
