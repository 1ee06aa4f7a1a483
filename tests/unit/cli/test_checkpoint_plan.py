"""`samzapy checkpoint`'s pure part: the lines show prints, --to, the positions file and its
problems by line, the checkpoints set plans, and the control bookkeeping it rewinds (checked
against the real TaskControl and origins, which must take the rewound state up)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from samzapy import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint
from samzapy.cli.checkpoint_plan import (
    FILE,
    FIRST_EPOCH,
    OLDEST,
    TIME,
    UPCOMING,
    FileEntry,
    PlanError,
    Rewound,
    Target,
    describe,
    high_watermark_problems,
    last_processed,
    parse_positions,
    parse_ssp,
    parse_target,
    plan_task,
    read_lines,
    rewind_control,
    show_line,
)
from samzapy.cli.main import main
from samzapy.container.grouper import group_by_partition
from samzapy.control import EndOfStreamMessage
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.reconcile import TaskControl, saved_epochs
from samzapy.storage.snapshots import EMPTY

IN = SystemStream("kafka", "page.views")
SIDE = SystemStream("kafka", "side")
COUNTS = {IN: 3, SIDE: 2}
MODELS = group_by_partition(COUNTS)
P0, P1 = TaskName("Partition 0"), TaskName("Partition 1")


def ssp(ss: SystemStream, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(ss.system, ss.stream, partition)


# -- show ---------------------------------------------------------------------------------------


def test_a_show_line_holds_the_checkpoint_and_its_partitions_parse_back() -> None:
    checkpoint = Checkpoint(
        {ssp(SIDE, 0): "7", ssp(IN, 0): "41"},
        {IN: 3},
        changelog_offsets={"counts": "120"},
        control={"inputWatermark": 5},
        epoch=4,
        snapshots={"counts": "120"},
        topic_ids={SIDE: "b", IN: "vKlMTtsYQrWCVh3lu1ap7g"},
    )
    line = show_line(P0, checkpoint)
    assert json.loads(line) == {
        "task": "Partition 0",
        "epoch": 4,
        "offsets": {"kafka.page.views#0": "41", "kafka.side#0": "7"},
        "changelog_offsets": {"counts": "120"},
        "snapshots": {"counts": "120"},
        "topic_ids": {"kafka.page.views": "vKlMTtsYQrWCVh3lu1ap7g", "kafka.side": "b"},
    }
    # As read back by ``set --to FILE``: the topic IDs are shown, not taken.
    [entry], problems = parse_positions([line], "f", MODELS, COUNTS)
    assert problems == [] and entry.offsets == {ssp(IN, 0): 41, ssp(SIDE, 0): 7}
    assert "\n" not in line
    assert parse_ssp("kafka.page.views#0") == ssp(IN, 0)
    for bad in ("kafka.in", "kafka#0", "kafka.in#x", ".in#0", "kafka.in#-1"):
        assert parse_ssp(bad) is None


# -- --to ---------------------------------------------------------------------------------------


def test_to_is_a_keyword_a_file_or_a_time_with_a_zone() -> None:
    assert parse_target("oldest", is_file=True) == Target(OLDEST)  # the keyword wins
    assert parse_target("upcoming", is_file=False) == Target(UPCOMING)
    assert parse_target("positions.jsonl", is_file=True) == Target(FILE, path="positions.jsonl")
    assert parse_target("-", is_file=False) == Target(FILE, path="-")
    assert parse_target("2020-09-13T12:26:40Z", is_file=False) == Target(
        TIME, timestamp_ms=1_600_000_000_000
    )
    assert parse_target("2020-09-13T14:26:40.5+02:00", is_file=False) == Target(
        TIME, timestamp_ms=1_600_000_000_500
    )
    with pytest.raises(PlanError, match=r"no time zone: add Z \(UTC\) or an offset"):
        parse_target("2020-09-13T12:26:40", is_file=False)
    with pytest.raises(PlanError, match=r"expected oldest, upcoming, an ISO 8601 time .* 'olde'"):
        parse_target("olde", is_file=False)
    # A file name mistyped, or a file not there: which the message says.
    with pytest.raises(PlanError, match=r"got 'moved\.jsonl', which is none of these \(no file "):
        parse_target("moved.jsonl", is_file=False)
    # A time mistyped: why it is no time, not that no file has that name.
    with pytest.raises(
        PlanError, match=r"'2024-13-01T00:00:00Z' is no valid ISO 8601 time \(.*month"
    ):
        parse_target("2024-13-01T00:00:00Z", is_file=False)


def test_a_partition_starting_at_n_is_checkpointed_as_n_minus_one() -> None:
    assert last_processed(0) == "-1"
    assert last_processed(42) == "41"


# -- --to FILE ----------------------------------------------------------------------------------


def line(task: str, offsets: dict[str, object], **extra: object) -> str:
    return json.dumps({"task": task, "offsets": offsets, **extra})


def test_a_positions_file_gives_each_named_task_its_offsets() -> None:
    lines = [
        line("Partition 0", {"kafka.page.views#0": "41", "kafka.side#0": 3}, epoch=4),
        "",
        line("Partition 2", {"kafka.page.views#2": "-1"}, changelog_offsets={}, snapshots={}),
    ]
    entries, problems = parse_positions(lines, "f", MODELS, COUNTS)
    assert problems == []
    assert entries == [
        FileEntry(P0, 1, {ssp(IN, 0): 41, ssp(SIDE, 0): 3}),
        FileEntry(TaskName("Partition 2"), 3, {ssp(IN, 2): -1}),
    ]


def test_every_bad_line_is_named_and_the_good_ones_kept() -> None:
    lines = [
        line("Partition 0", {"kafka.page.views#0": "41"}),
        line("Partition 9", {"kafka.page.views#0": "1"}),
        line("Partition 1", {"kafka.page.views#7": "1"}),
        line("Partition 1", {"kafka.other#0": "1"}),
        line("Partition 1", {"kafka.page.views#0": "1"}),
        line("Partition 1", {"page-views": "1"}),
        line("Partition 1", {"kafka.side#1": "-2", "kafka.page.views#1": True}),
        line("Partition 0", {}),
        '["Partition 1"]',
        '{"task": "Partition 1",',
        line("Partition 2", {}, offset={}),
        json.dumps({"task": 2, "offsets": {}}),
        json.dumps({"task": "Partition 2", "offsets": ["kafka.page.views#2", "1"]}),
    ]
    entries, problems = parse_positions(lines, "pos.jsonl", MODELS, COUNTS)
    assert [e.line for e in entries] == [1]
    assert [p[0] for p in problems] == [2, 3, 4, 5, 6, 7, 7, 8, 9, 10, 11, 12, 13]
    text = [p[1] for p in problems]
    assert text[0] == (
        "pos.jsonl:2: unknown task 'Partition 9': the job's tasks are 'Partition 0', "
        "'Partition 1', 'Partition 2'"
    )
    assert text[1] == (
        "pos.jsonl:3: partition 7 of kafka.page.views does not exist: the stream has "
        "partitions 0..2"
    )
    assert text[2] == (
        "pos.jsonl:4: kafka.other is not an input of the job (its inputs: kafka.page.views, "
        "kafka.side)"
    )
    assert (
        text[3]
        == "pos.jsonl:5: kafka.page.views#0 is read by task 'Partition 0', not by 'Partition 1'"
    )
    assert text[4].startswith("pos.jsonl:6: 'page-views' is not a partition: expected SYSTEM.")
    assert text[5].startswith("pos.jsonl:7: the offset of kafka.side#1 must be an integer >= -1")
    assert text[5].endswith("got '-2'")
    assert text[6].endswith("got True")
    assert text[7] == "pos.jsonl:8: task 'Partition 0' again (first on line 1)"
    assert text[8].startswith("pos.jsonl:9: not a JSON object: '[\"Partition 1\"]'")
    assert text[9].startswith("pos.jsonl:10: not a JSON object: Expecting")
    assert text[10].startswith("pos.jsonl:11: unknown key(s) 'offset': a line holds 'task'")
    assert text[11].startswith("pos.jsonl:12: 'task' must be a task name")
    assert text[12].startswith("pos.jsonl:13: 'offsets' must map partitions to offsets")


def test_an_offset_must_be_below_the_high_watermark() -> None:
    entries = [FileEntry(P0, 3, {ssp(IN, 0): 9}), FileEntry(P1, 4, {ssp(IN, 1): 10})]
    upcoming = {ssp(IN, 0): 10, ssp(IN, 1): 10}
    assert high_watermark_problems(entries, upcoming, "f") == [
        (
            4,
            "f:4: offset 10 of kafka.page.views#1 is past the partition's end: its high "
            "watermark is 10, so a checkpoint can hold at most 9 (the last processed offset)",
        )
    ]


# -- the plan -----------------------------------------------------------------------------------


def test_a_task_without_a_checkpoint_gets_its_first_one() -> None:
    """Under epoch 2: a container running the task from no checkpoint owns it under epoch 1
    without having written it, and its next commit must not count over the move."""
    move = plan_task(P0, None, {ssp(IN, 0): "-1", ssp(SIDE, 0): "-1"}, COUNTS)
    assert FIRST_EPOCH == 2
    assert move.new == Checkpoint({ssp(IN, 0): "-1", ssp(SIDE, 0): "-1"}, COUNTS, epoch=2)
    assert move.changed
    assert describe(move) == [
        "Partition 0  kafka.page.views#0  none -> -1  (resumes at offset 0)",
        "Partition 0  kafka.side#0  none -> -1  (resumes at offset 0)",
    ]


def test_a_task_without_a_checkpoint_gets_its_stores_without_changelog_emptied() -> None:
    """A checkpoint naming no snapshot keeps such a store as it is, which no checkpoint
    covered (without one the restart empties it, as it does a logged store that the new
    checkpoint gives no changelog offset): the first checkpoint names the empty snapshot,
    with or without ``--reset-stores``."""
    for reset in (False, True):
        move = plan_task(P0, None, {ssp(IN, 0): "-1"}, COUNTS, reset_stores=reset, unlogged=["w"])
        assert move.new.snapshots == {"w": EMPTY}
        assert move.reset_stores == (("w",) if reset else ())


def test_only_the_input_offsets_move_and_the_epoch_goes_up_by_two() -> None:
    """Two: a container that read the same checkpoint claims the next one (module docstring;
    tests/unit/cli/test_checkpoint_set_race.py)."""
    old = Checkpoint(
        {ssp(IN, 0): "41", ssp(SIDE, 0): "7"},
        {IN: 3, SIDE: 2},
        changelog_offsets={"counts": "120"},
        control=None,
        epoch=4,
        snapshots={"counts": "120"},
    )
    move = plan_task(P0, old, {ssp(IN, 0): "50"}, COUNTS)
    assert move.new == Checkpoint(
        {ssp(IN, 0): "50", ssp(SIDE, 0): "7"},
        {IN: 3, SIDE: 2},
        changelog_offsets={"counts": "120"},
        epoch=6,
        snapshots={"counts": "120"},
    )
    assert [m.back for m in move.moves] == [False]
    same = plan_task(P0, old, {ssp(IN, 0): "41", ssp(SIDE, 0): "7"}, COUNTS)
    assert not same.changed
    assert describe(same) == [
        "Partition 0  kafka.page.views#0  41  (unchanged)",
        "Partition 0  kafka.side#0  7  (unchanged)",
    ]


def test_the_topic_ids_of_the_inputs_moved_are_dropped_the_others_kept() -> None:
    """The new offsets hold for the topics as they are now (recreated, say): with the old
    IDs kept the restart would forget them as offsets of the deleted topics."""
    old = Checkpoint(
        {ssp(IN, 0): "41", ssp(SIDE, 0): "7"}, COUNTS, epoch=1, topic_ids={IN: "a", SIDE: "b"}
    )
    moved = plan_task(P0, old, {ssp(IN, 0): "-1"}, COUNTS)
    assert moved.new.topic_ids == {SIDE: "b"}
    assert describe(moved) == [
        "Partition 0  kafka.page.views#0  41 -> -1  (resumes at offset 0; topic ID a dropped: "
        "the restart takes the offset as the current topic's)"
    ]
    unchanged = plan_task(P0, old, {ssp(IN, 0): "41"}, COUNTS)
    assert unchanged.new.topic_ids == {IN: "a", SIDE: "b"}
    assert describe(unchanged) == ["Partition 0  kafka.page.views#0  41  (unchanged)"]


def test_reset_stores_drops_the_changelog_offsets_and_snapshots() -> None:
    old = Checkpoint(
        {ssp(IN, 0): "41"}, {IN: 3}, {"b": "5", "a": "9"}, epoch=1, snapshots={"a": "9"}
    )
    move = plan_task(P0, old, {ssp(IN, 0): "41"}, COUNTS, reset_stores=True)
    assert move.new.changelog_offsets == {} and move.new.snapshots == {}
    assert move.changed  # the offsets stay, the stores do not
    assert describe(move)[-1] == (
        "Partition 0  stores a, b: changelog offsets and snapshots dropped (the restart "
        "empties them)"
    )


# -- moving back: the control bookkeeping -------------------------------------------------------

WRITER = "job-1/Partition 0"
MID = SystemStreamPartition("kafka", "mid", 0)
SRC = SystemStreamPartition("kafka", "src", 0)


def running_task() -> tuple[TaskControl, bytes]:
    """A task that reads the framed stream MID (which has ended) and the plain SRC, and
    writes a framed stream; and a record it applied from MID."""
    control = TaskControl(carrying=[MID], outputs={SystemStream("kafka", "next"): [SRC]})
    control.writer = WriterOrigins.starting(
        WRITER, [MID, SRC], saved={str(SRC): 2}, checkpointed={SRC: "41", MID: "9"}
    )
    control.reader = ReaderOrigins([MID])
    record = WriterOrigins("upstream/Partition 0", {SRC: 0}).tag(SRC, "7", 0, b"payload")
    assert control.reader.admit(MID, record)
    assert control.receive(MID, EndOfStreamMessage("Partition 0", 1))
    return control, record


def restarted(
    saved: dict[str, object], checkpointed: dict[SystemStreamPartition, str]
) -> TaskControl:
    """The task's control as the container takes it up from a checkpoint (assembly.py)."""
    control = TaskControl(carrying=[MID], outputs={SystemStream("kafka", "next"): [SRC]})
    control.writer = WriterOrigins.starting(
        WRITER, [MID, SRC], saved=saved_epochs(saved), checkpointed=checkpointed
    )
    control.reader = ReaderOrigins([MID])
    control.restore(saved)
    return control


def test_a_partition_moved_back_is_read_afresh_and_written_under_the_next_epoch() -> None:
    task, record = running_task()
    saved = task.to_json()
    # Not rewound, the restart would skip the ended MID and drop the record read again.
    as_was = restarted(saved, {SRC: "-1", MID: "-1"})
    assert MID in as_was.ended
    assert not as_was.reader.admit(MID, record)  # type: ignore[union-attr]

    rewound, what = rewind_control(saved, [MID, SRC])
    assert what == {
        MID: Rewound(reports=True, applied=True, epochs=(0, 1)),
        SRC: Rewound(reports=False, applied=False, epochs=(2, 3)),
    }
    again = restarted(dict(rewound or {}), {SRC: "-1", MID: "-1"})
    assert MID not in again.ended
    assert again.reader.admit(MID, record)  # type: ignore[union-attr]
    assert again.writer.epochs == {MID: 1, SRC: 3}  # type: ignore[union-attr]
    assert saved == task.to_json(), "the checkpoint read is left as it was"


def test_only_the_partitions_moved_back_are_rewound() -> None:
    task, _ = running_task()
    old = Checkpoint({SRC: "41", MID: "9"}, {}, control=task.to_json(), epoch=2)
    move = plan_task(P0, old, {SRC: "50", MID: "3"}, COUNTS)
    assert [(m.ssp, m.back) for m in move.moves] == [(MID, True), (SRC, False)]
    assert saved_epochs(move.new.control) == {str(MID): 1, str(SRC): 2}
    assert describe(move) == [
        "Partition 0  kafka.mid#0  9 -> 3  (resumes at offset 4; its end-of-stream and "
        "watermark reports forgotten; the origins it applied forgotten; writer epoch 0 -> 1)",
        "Partition 0  kafka.src#0  41 -> 50  (resumes at offset 51)",
    ]


def test_a_task_without_control_or_epochs_has_nothing_to_rewind() -> None:
    assert rewind_control(None, [SRC]) == (None, {})
    control = {"partitions": {}, "inputWatermark": None, "outputWatermarks": {}}
    assert rewind_control(control, [SRC]) == (control, {})


# -- the command line ---------------------------------------------------------------------------


def test_set_needs_to_and_the_tool_needs_show_or_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checkpoint", "set", "job.yaml"]) == 2
    assert "the following arguments are required: --to" in capsys.readouterr().err
    assert main(["checkpoint", "job.yaml"]) == 2
    assert "invalid choice: 'job.yaml'" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_to_a_file_that_is_not_utf8_is_a_problem_not_a_traceback(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/deploy.md: a bad file is refused, exit 2 (here before its lines are read). Standard
    input too, which Python decodes strictly under a locale such as en_US.UTF-8."""
    data = b'{"task": "Partition 0", "offsets": {}}\n\xff\n'
    path = tmp_path / "positions.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    name = "-" if source == "stdin" else str(path)
    where = "standard input" if source == "stdin" else repr(str(path))
    with pytest.raises(PlanError) as raised:
        read_lines(name)
    assert raised.value.problems == [
        f"--to: cannot read {where}: 'utf-8' codec can't decode byte 0xff in position 39: "
        "invalid start byte"
    ]
