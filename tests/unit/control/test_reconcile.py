"""Reconciliation of end-of-stream and watermark messages per partition and per task."""

from __future__ import annotations

import json
from typing import Any

from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.api.task import END_WATERMARK
from samzapy.control.reconcile import PartitionControl, TaskControl
from samzapy.control.wire import EndOfStreamMessage, WatermarkMessage

A0 = SystemStreamPartition("kafka", "shuffle-a", 0)
A1 = SystemStreamPartition("kafka", "shuffle-a", 1)
B0 = SystemStreamPartition("kafka", "shuffle-b", 0)
PLAIN = SystemStreamPartition("kafka", "plain", 0)

OUT_X = SystemStream("kafka", "out-x")
OUT_Y = SystemStream("kafka", "out-y")


def eos(task: str, count: int) -> EndOfStreamMessage:
    return EndOfStreamMessage(task, count)


def wm(task: str, count: int, timestamp: int) -> WatermarkMessage:
    return WatermarkMessage(task, count, timestamp)


def roundtrip(control: TaskControl) -> dict[str, Any]:
    """The checkpoint as it comes back from storage: through JSON text."""
    data: dict[str, Any] = json.loads(json.dumps(control.to_json()))
    return data


# -- PartitionControl: end-of-stream -------------------------------------------------------------


def test_partition_ends_only_when_all_upstream_tasks_sent_end_of_stream() -> None:
    state = PartitionControl()

    assert state.end_of_stream(eos("t1", 3)) is False
    assert state.end_of_stream(eos("t2", 3)) is False
    assert state.ended is False
    assert state.end_of_stream(eos("t3", 3)) is True
    assert state.ended is True
    assert state.eos_tasks == {"t1", "t2", "t3"}


def test_single_upstream_task_ends_the_partition_at_once() -> None:
    state = PartitionControl()

    assert state.end_of_stream(eos("t1", 1)) is True
    assert state.ended is True


def test_duplicate_end_of_stream_counts_once() -> None:
    state = PartitionControl()

    assert state.end_of_stream(eos("t1", 2)) is False
    assert state.end_of_stream(eos("t1", 2)) is False
    assert state.end_of_stream(eos("t1", 2)) is False
    assert state.ended is False
    assert state.eos_tasks == {"t1"}
    assert state.end_of_stream(eos("t2", 2)) is True


def test_end_of_stream_after_the_end_is_ignored() -> None:
    state = PartitionControl()
    state.end_of_stream(eos("t1", 1))

    assert state.end_of_stream(eos("t1", 1)) is False
    assert state.end_of_stream(eos("t2", 2)) is False
    assert state.eos_tasks == {"t1"}
    assert state.ended is True


# -- PartitionControl: watermarks ----------------------------------------------------------------


def test_watermark_stays_none_until_all_tasks_reported_then_is_the_minimum() -> None:
    state = PartitionControl()

    assert state.watermark_from("t1", 3, 10) is False
    assert state.watermark is None
    assert state.watermark_from("t2", 3, 20) is False
    assert state.watermark is None
    assert state.watermark_from("t3", 3, 30) is True
    assert state.watermark == 10


def test_watermark_follows_the_minimum_as_tasks_advance() -> None:
    state = PartitionControl()
    for task, ts in [("t1", 10), ("t2", 20), ("t3", 30)]:
        state.watermark_from(task, 3, ts)
    assert state.watermark == 10

    assert state.watermark_from("t2", 3, 40) is False  # t1 still holds the minimum
    assert state.watermark == 10
    assert state.watermark_from("t1", 3, 35) is True
    assert state.watermark == 30
    assert state.watermark_from("t3", 3, 50) is True
    assert state.watermark == 35
    assert state.watermark_from("t1", 3, 60) is True
    assert state.watermark == 40


def test_same_task_reporting_twice_does_not_complete_the_count() -> None:
    state = PartitionControl()

    assert state.watermark_from("t1", 2, 10) is False
    assert state.watermark_from("t1", 2, 20) is False
    assert state.watermark is None
    assert state.watermark_from("t2", 2, 15) is True
    assert state.watermark == 15


def test_task_reporting_an_older_timestamp_does_not_move_the_watermark_back() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 2, 100)
    state.watermark_from("t2", 2, 200)
    assert state.watermark == 100

    assert state.watermark_from("t1", 2, 50) is False
    assert state.watermark == 100
    assert state.wm_tasks == {"t1": 100, "t2": 200}


def test_restarted_task_starting_over_does_not_move_the_watermark_back() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 2, 100)
    state.watermark_from("t2", 2, 200)

    # t2 restarted from an older checkpoint and reports from the beginning again.
    for ts in (0, 50, 150):
        assert state.watermark_from("t2", 2, ts) is False
        assert state.watermark == 100
    assert state.watermark_from("t1", 2, 300) is True
    assert state.watermark == 200


def test_equal_reconciled_watermark_is_not_a_move() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 2, 10)
    state.watermark_from("t2", 2, 10)

    assert state.watermark_from("t1", 2, 10) is False
    assert state.watermark_from("t2", 2, 20) is False
    assert state.watermark == 10


def test_new_upstream_task_with_older_watermark_does_not_move_it_back() -> None:
    state = PartitionControl()
    assert state.watermark_from("t1", 1, 100) is True

    assert state.watermark_from("t2", 2, 50) is False
    assert state.watermark == 100


def test_watermark_after_the_end_is_ignored() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 1, 10)
    state.end_of_stream(eos("t1", 1))

    assert state.watermark_from("t1", 1, 99) is False
    assert state.watermark == 10
    assert state.wm_tasks == {"t1": 10}


def test_partition_to_json_round_trips() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 3, 10)
    state.watermark_from("t2", 3, 20)
    state.end_of_stream(eos("t2", 3))
    state.watermark_from("t3", 3, 30)

    data = json.loads(json.dumps(state.to_json()))
    assert data == {
        "eos": {"taskCount": 3, "tasks": ["t2"]},
        "watermarks": {"taskCount": 3, "tasks": {"t1": 10, "t2": END_WATERMARK, "t3": 30}},
        "watermark": 10,
        "ended": False,
    }
    restored = PartitionControl.from_json(data)
    assert restored.to_json() == state.to_json()
    assert restored.end_of_stream(eos("t2", 3)) is False
    assert restored.end_of_stream(eos("t1", 3)) is False
    assert restored.watermark == 30
    assert restored.end_of_stream(eos("t3", 3)) is True


# -- TaskControl: receiving ----------------------------------------------------------------------


def test_receive_returns_true_only_for_the_message_that_ends_the_partition() -> None:
    control = TaskControl(carrying=[A0, A1])

    assert control.receive(A0, eos("t1", 2)) is False
    assert control.receive(A0, eos("t2", 2)) is True
    assert control.receive(A0, eos("t2", 2)) is False
    assert control.ended == {A0}


def test_receive_of_a_watermark_returns_false() -> None:
    control = TaskControl(carrying=[A0])

    assert control.receive(A0, wm("t1", 1, 10)) is False
    assert control.partitions[A0].watermark == 10


def test_partitions_not_carried_are_ignored() -> None:
    control = TaskControl(carrying=[A0])

    assert control.receive(PLAIN, eos("t1", 1)) is False
    assert control.receive(PLAIN, wm("t1", 1, 10)) is False
    assert control.ended == set()
    assert set(control.partitions) == {A0}
    control.receive(A0, wm("t1", 1, 5))
    assert control.advance_input_watermark() == 5


# -- TaskControl: input watermark ----------------------------------------------------------------


def test_no_input_watermark_without_carrying_partitions() -> None:
    control = TaskControl(carrying=[])

    assert control.advance_input_watermark() is None
    assert control.input_watermark is None


def test_input_watermark_is_none_while_a_partition_lacks_one() -> None:
    control = TaskControl(carrying=[A0, A1])
    control.receive(A0, wm("t1", 1, 10))

    assert control.advance_input_watermark() is None
    assert control.input_watermark is None

    # A1's watermark is not reconciled yet: one of its two upstream tasks reported.
    control.receive(A1, wm("t1", 2, 20))
    assert control.advance_input_watermark() is None

    control.receive(A1, wm("t2", 2, 5))
    assert control.advance_input_watermark() == 5
    assert control.input_watermark == 5


def test_input_watermark_is_the_minimum_over_carrying_partitions() -> None:
    control = TaskControl(carrying=[A0, A1, B0])
    control.receive(A0, wm("t1", 1, 30))
    control.receive(A1, wm("t1", 1, 10))
    control.receive(B0, wm("t1", 1, 20))

    assert control.advance_input_watermark() == 10
    control.receive(A1, wm("t1", 1, 40))
    assert control.advance_input_watermark() == 20
    control.receive(B0, wm("t1", 1, 50))
    assert control.advance_input_watermark() == 30
    assert control.input_watermark == 30


def test_three_upstream_tasks_reconcile_to_the_minimum_then_follow_it() -> None:
    control = TaskControl(carrying=[A0])
    for task, ts in [("t1", 10), ("t2", 20), ("t3", 30)]:
        control.receive(A0, wm(task, 3, ts))

    assert control.advance_input_watermark() == 10
    control.receive(A0, wm("t1", 3, 25))
    assert control.advance_input_watermark() == 20
    control.receive(A0, wm("t2", 3, 40))
    assert control.advance_input_watermark() == 25
    control.receive(A0, wm("t1", 3, 45))
    assert control.advance_input_watermark() == 30


def test_advance_input_watermark_returns_a_value_only_when_it_moves_forward() -> None:
    control = TaskControl(carrying=[A0])
    control.receive(A0, wm("t1", 1, 10))

    assert control.advance_input_watermark() == 10
    assert control.advance_input_watermark() is None
    control.receive(A0, wm("t1", 1, 10))
    assert control.advance_input_watermark() is None
    control.receive(A0, wm("t1", 1, 5))
    assert control.advance_input_watermark() is None
    control.receive(A0, wm("t1", 1, 11))
    assert control.advance_input_watermark() == 11
    assert control.input_watermark == 11


def test_ended_partitions_drop_out_of_the_minimum() -> None:
    control = TaskControl(carrying=[A0, A1])
    control.receive(A0, wm("t1", 1, 10))
    control.receive(A1, wm("t1", 1, 50))
    assert control.advance_input_watermark() == 10

    assert control.receive(A0, eos("t1", 1)) is True
    assert control.advance_input_watermark() == 50


def test_ended_partition_without_a_watermark_no_longer_holds_the_input_back() -> None:
    control = TaskControl(carrying=[A0, A1])
    control.receive(A1, wm("t1", 1, 50))
    assert control.advance_input_watermark() is None

    control.receive(A0, eos("t1", 1))
    assert control.advance_input_watermark() == 50


def test_input_watermark_stays_when_every_partition_ended() -> None:
    control = TaskControl(carrying=[A0])
    control.receive(A0, wm("t1", 1, 10))
    assert control.advance_input_watermark() == 10

    control.receive(A0, eos("t1", 1))
    assert control.advance_input_watermark() is None
    assert control.input_watermark == 10


def test_partition_ended_without_a_control_message() -> None:
    control = TaskControl(carrying=[A0, A1], outputs={OUT_X: [A0, PLAIN]})
    control.receive(A0, wm("t1", 1, 10))
    control.receive(A1, wm("t1", 1, 20))
    assert control.advance_input_watermark() == 10

    control.partition_ended(A0)
    assert control.partitions[A0].ended is True
    assert control.receive(A0, eos("t1", 1)) is False
    assert control.advance_input_watermark() == 20

    # A plain (non-carrying) partition's end counts towards its output's end.
    assert control.take_ended_outputs() == []
    control.partition_ended(PLAIN)
    assert control.ended == {A0, PLAIN}
    assert PLAIN not in control.partitions
    assert control.take_ended_outputs() == [OUT_X]


# -- TaskControl: outputs ------------------------------------------------------------------------


def test_output_ends_once_when_all_its_upstream_partitions_ended() -> None:
    control = TaskControl(carrying=[A0, A1, B0], outputs={OUT_X: [A0, A1], OUT_Y: [B0]})

    assert control.take_ended_outputs() == []
    control.receive(A0, eos("t1", 1))
    assert control.take_ended_outputs() == []
    control.receive(A1, eos("t1", 1))
    assert control.take_ended_outputs() == [OUT_X]
    assert control.take_ended_outputs() == []
    control.receive(B0, eos("t1", 1))
    assert control.take_ended_outputs() == [OUT_Y]
    assert control.take_ended_outputs() == []


def test_output_without_upstream_partitions_ends_at_once() -> None:
    control = TaskControl(carrying=[A0], outputs={OUT_X: [], OUT_Y: [A0]})

    assert control.take_ended_outputs() == [OUT_X]
    assert control.take_ended_outputs() == []


def test_output_watermarks_are_per_output_and_only_move_forward() -> None:
    control = TaskControl(carrying=[A0, A1, B0], outputs={OUT_X: [A0, A1], OUT_Y: [B0]})
    assert control.advance_output_watermarks() == {}

    control.receive(A0, wm("t1", 1, 10))
    control.receive(B0, wm("t1", 1, 7))
    assert control.advance_output_watermarks() == {OUT_Y: 7}  # OUT_X waits for A1

    control.receive(A1, wm("t1", 1, 30))
    assert control.advance_output_watermarks() == {OUT_X: 10}
    assert control.advance_output_watermarks() == {}

    control.receive(A0, wm("t1", 1, 40))
    control.receive(B0, wm("t1", 1, 8))
    assert control.advance_output_watermarks() == {OUT_X: 30, OUT_Y: 8}
    assert control.output_watermarks == {OUT_X: 30, OUT_Y: 8}

    control.receive(B0, wm("t1", 1, 3))
    assert control.advance_output_watermarks() == {}
    assert control.output_watermarks == {OUT_X: 30, OUT_Y: 8}


def test_output_watermark_ignores_non_carrying_upstream_partitions() -> None:
    control = TaskControl(carrying=[A0], outputs={OUT_X: [A0, PLAIN]})
    control.receive(A0, wm("t1", 1, 10))

    assert control.advance_output_watermarks() == {OUT_X: 10}


def test_output_watermark_drops_ended_upstream_partitions() -> None:
    control = TaskControl(carrying=[A0, A1], outputs={OUT_X: [A0, A1]})
    control.receive(A0, wm("t1", 1, 10))
    control.receive(A1, wm("t1", 1, 20))
    assert control.advance_output_watermarks() == {OUT_X: 10}

    control.receive(A0, eos("t1", 1))
    assert control.advance_output_watermarks() == {OUT_X: 20}


def test_no_output_watermark_after_that_outputs_end_was_taken() -> None:
    control = TaskControl(carrying=[A0, B0], outputs={OUT_X: [A0], OUT_Y: [B0]})
    control.receive(A0, wm("t1", 2, 10))
    control.receive(B0, wm("t1", 1, 10))
    control.receive(A0, eos("t1", 2))
    # A0 has not ended (one of two tasks): a later watermark still counts, and t1, which
    # ended, no longer holds it back.
    control.receive(A0, wm("t2", 2, 20))
    assert control.advance_output_watermarks() == {OUT_X: 20, OUT_Y: 10}

    control.receive(B0, eos("t1", 1))
    assert control.take_ended_outputs() == [OUT_Y]
    control.receive(A0, wm("t2", 2, 30))
    assert control.advance_output_watermarks() == {OUT_X: 30}
    assert control.output_watermarks == {OUT_X: 30, OUT_Y: 10}


def test_output_with_no_upstream_gets_no_watermark() -> None:
    control = TaskControl(carrying=[A0], outputs={OUT_X: []})
    control.receive(A0, wm("t1", 1, 10))

    assert control.advance_output_watermarks() == {}
    assert control.take_ended_outputs() == [OUT_X]
    assert control.advance_output_watermarks() == {}


# -- idleness -------------------------------------------------------------------------------------


def idle(task: str, count: int, timestamp: int = -1) -> WatermarkMessage:
    return WatermarkMessage(task, count, timestamp, idle=True)


def test_an_idle_upstream_task_is_left_out_of_the_partitions_minimum_until_it_is_not() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 2, 10)
    state.watermark_from("t2", 2, 50)
    assert state.watermark == 10
    assert state.watermark_from("t1", 2, 10, idle=True) is True
    assert (state.watermark, state.idle) == (50, False)
    state.watermark_from("t1", 2, 20)  # back, behind: the watermark does not go back
    state.watermark_from("t2", 2, 60)
    assert state.watermark == 50
    state.watermark_from("t1", 2, 55)
    assert state.watermark == 55


def test_a_partition_whose_upstream_tasks_are_all_idle_is_idle_at_the_highest() -> None:
    state = PartitionControl()
    state.watermark_from("t1", 3, 10, idle=True)
    state.watermark_from("t2", 3, 30, idle=True)
    assert (state.watermark, state.idle) == (None, False)  # t3 has not reported
    state.end_of_stream(eos("t3", 3))  # ended: it holds nothing back
    assert (state.watermark, state.idle) == (30, True)
    state.watermark_from("t1", 3, 12)
    assert (state.watermark, state.idle) == (30, False)


def test_an_idle_partition_is_left_out_of_the_tasks_minimum_and_outputs_are_told() -> None:
    control = TaskControl(carrying=[A0, A1, B0], outputs={OUT_X: [A0, A1], OUT_Y: [B0]})
    for ssp, ts in ((A0, 10), (A1, 40), (B0, 20)):
        control.receive(ssp, wm("t1", 1, ts))
    assert control.advance_input_watermark() == 10
    assert control.advance_output_watermarks() == {OUT_X: 10, OUT_Y: 20}

    control.receive(A0, idle("t1", 1, 10))
    assert control.advance_input_watermark() == 20  # min(A1 40, B0 20)
    assert control.advance_output_watermarks() == {OUT_X: 40}
    assert control.advance_output_idleness() == {}

    control.receive(A1, idle("t1", 1, 40))
    assert control.advance_output_watermarks() == {}
    assert control.advance_output_idleness() == {OUT_X: 40}  # every upstream idle: told once
    assert control.advance_output_idleness() == {}
    control.receive(B0, idle("t1", 1, 20))
    assert control.advance_input_watermark() == 40  # all idle: the highest
    assert control.advance_output_idleness() == {OUT_Y: 20}

    control.receive(A0, wm("t1", 1, 12))  # A0 is back: OUT_X is not idle any more
    assert control.advance_output_idleness() == {}
    assert control.advance_output_watermarks() == {OUT_X: 40}  # its last, not idle
    assert control.idle_outputs == {OUT_Y}
    control.receive(A0, wm("t1", 1, 45))
    assert control.advance_output_watermarks() == {OUT_X: 45}


def test_a_stream_whose_partitions_are_all_idle_or_ended_is_told_idle_once() -> None:
    """``advance_stream_idleness``: what reads the streams leaves an idle one out beside
    others (its watermark, the highest of its idle partitions', would hold them back)."""
    control = TaskControl(carrying=[A0, A1, B0])
    for ssp, ts in ((A0, 10), (A1, 40), (B0, 20)):
        control.receive(ssp, wm("t1", 1, ts))
    assert control.advance_stream_idleness() == {}
    control.receive(A0, idle("t1", 1, 10))
    assert control.advance_stream_idleness() == {}  # A1 is not idle
    control.receive(A1, eos("t1", 1))  # ended: holds nothing, idle or not
    assert control.advance_stream_idleness() == {A0.system_stream: True}
    assert control.advance_stream_idleness() == {}  # told once
    control.receive(A0, wm("t1", 1, 12))  # back
    assert control.advance_stream_idleness() == {A0.system_stream: False}
    control.receive(A0, eos("t1", 1))  # every partition ended: not idle
    assert control.advance_stream_idleness() == {}
    assert control.idle_streams == set()


def test_which_upstream_tasks_are_idle_is_checkpointed() -> None:
    control = TaskControl(carrying=[A0, B0])
    control.receive(A0, wm("t1", 2, 10))
    control.receive(A0, wm("t2", 2, 30))
    control.receive(A0, idle("t1", 2, 10))
    control.receive(B0, wm("t1", 1, 20))
    assert control.advance_input_watermark() == 20
    data = roundtrip(control)
    assert data["partitions"]["kafka.shuffle-a#0"]["idle"] == ["t1"]

    restored = TaskControl(carrying=[A0, B0])
    restored.restore(data)
    assert restored.partitions[A0].idle_tasks == {"t1"}
    restored.receive(B0, wm("t1", 1, 50))
    assert restored.advance_input_watermark() == 30  # t1 still left out: A0 is t2's 30
    restored.receive(A0, wm("t1", 2, 40))
    restored.receive(A0, wm("t2", 2, 45))
    assert restored.advance_input_watermark() == 40


def test_an_idle_partition_with_a_lower_watermark_does_not_make_the_outputs_go_back() -> None:
    control = TaskControl(carrying=[A0], outputs={OUT_X: [A0]})
    control.receive(A0, wm("t1", 1, 30))
    assert control.advance_output_watermarks() == {OUT_X: 30}
    control.receive(A0, idle("t1", 1, 30))
    assert control.advance_output_idleness() == {OUT_X: 30}
    control.receive(A0, wm("t1", 1, 5))
    assert control.advance_output_watermarks() == {OUT_X: 30}


# -- TaskControl: checkpoint ---------------------------------------------------------------------


def busy_control() -> TaskControl:
    """A0 ended, A1 half-ended with watermark 20 (t2's: t1 ended), B0 with watermark 15;
    watermarks emitted."""
    control = TaskControl(carrying=[A0, A1, B0], outputs={OUT_X: [A0, A1], OUT_Y: [B0]})
    control.receive(A0, wm("t1", 1, 5))
    control.receive(A0, eos("t1", 1))
    control.receive(A1, wm("t1", 2, 15))
    control.receive(A1, wm("t2", 2, 20))
    control.receive(A1, eos("t1", 2))
    control.receive(B0, wm("t1", 1, 15))
    assert control.advance_input_watermark() == 15
    assert control.advance_output_watermarks() == {OUT_X: 20, OUT_Y: 15}
    return control


def fresh_control() -> TaskControl:
    return TaskControl(carrying=[A0, A1, B0], outputs={OUT_X: [A0, A1], OUT_Y: [B0]})


def test_to_json_is_plain_json_keyed_by_ssp_and_stream_names() -> None:
    data = roundtrip(busy_control())

    assert data == {
        "partitions": {
            "kafka.shuffle-a#0": {
                "eos": {"taskCount": 1, "tasks": ["t1"]},
                "watermarks": {"taskCount": 1, "tasks": {"t1": 5}},
                "watermark": 5,
                "ended": True,
            },
            "kafka.shuffle-a#1": {
                "eos": {"taskCount": 2, "tasks": ["t1"]},
                "watermarks": {"taskCount": 2, "tasks": {"t1": END_WATERMARK, "t2": 20}},
                "watermark": 20,
                "ended": False,
            },
            "kafka.shuffle-b#0": {
                "eos": {"taskCount": 0, "tasks": []},
                "watermarks": {"taskCount": 1, "tasks": {"t1": 15}},
                "watermark": 15,
                "ended": False,
            },
        },
        "inputWatermark": 15,
        "outputWatermarks": {"kafka.out-x": 20, "kafka.out-y": 15},
    }


def test_restore_gives_the_same_state() -> None:
    original = busy_control()
    restored = fresh_control()
    restored.restore(roundtrip(original))

    assert restored.to_json() == original.to_json()
    assert restored.ended == {A0}
    assert restored.input_watermark == 15
    assert restored.output_watermarks == {OUT_X: 20, OUT_Y: 15}


def test_restored_state_behaves_like_the_original() -> None:
    original = busy_control()
    restored = fresh_control()
    restored.restore(roundtrip(original))

    for control in (original, restored):
        assert control.advance_input_watermark() is None
        assert control.advance_output_watermarks() == {}
        control.receive(B0, wm("t1", 1, 22))
        assert control.advance_input_watermark() == 20
        assert control.advance_output_watermarks() == {OUT_Y: 22}
        assert control.receive(A1, eos("t2", 2)) is True
        assert control.advance_input_watermark() == 22
        assert control.take_ended_outputs() == [OUT_X]
    assert restored.to_json() == original.to_json()


def test_ended_partition_stays_ended_after_restore() -> None:
    restored = fresh_control()
    restored.restore(roundtrip(busy_control()))

    assert restored.partitions[A0].ended is True
    assert restored.receive(A0, eos("t9", 1)) is False
    restored.receive(A0, wm("t1", 1, 1))
    assert restored.partitions[A0].watermark == 5
    assert restored.advance_input_watermark() is None  # A0 is out of the minimum


def test_duplicate_end_of_stream_after_restore_does_not_double_count() -> None:
    restored = fresh_control()
    restored.restore(roundtrip(busy_control()))

    assert restored.receive(A1, eos("t1", 2)) is False
    assert restored.partitions[A1].ended is False
    assert restored.partitions[A1].eos_tasks == {"t1"}
    assert restored.receive(A1, eos("t2", 2)) is True


def test_watermark_does_not_regress_below_the_restored_one() -> None:
    restored = fresh_control()
    restored.restore(roundtrip(busy_control()))

    # Upstream tasks restarted and report older watermarks again.
    restored.receive(A1, wm("t1", 2, 3))
    restored.receive(A1, wm("t2", 2, 4))
    restored.receive(B0, wm("t1", 1, 1))
    assert restored.partitions[A1].watermark == 20
    assert restored.partitions[B0].watermark == 15
    assert restored.advance_input_watermark() is None
    assert restored.advance_output_watermarks() == {}
    assert restored.input_watermark == 15


def test_restored_input_watermark_suppresses_re_emission_of_an_equal_value() -> None:
    original = TaskControl(carrying=[A0])
    original.receive(A0, wm("t1", 1, 10))
    assert original.advance_input_watermark() == 10

    # After a restart the partition state is rebuilt from scratch but the task was told 10.
    restored = TaskControl(carrying=[A0])
    restored.restore({"inputWatermark": 10})
    restored.receive(A0, wm("t1", 1, 10))
    assert restored.advance_input_watermark() is None
    restored.receive(A0, wm("t1", 1, 11))
    assert restored.advance_input_watermark() == 11


def test_restored_output_watermark_suppresses_re_emission_of_an_equal_value() -> None:
    restored = TaskControl(carrying=[A0], outputs={OUT_X: [A0]})
    restored.restore({"outputWatermarks": {"kafka.out-x": 10}})
    restored.receive(A0, wm("t1", 1, 10))

    assert restored.advance_output_watermarks() == {}
    restored.receive(A0, wm("t1", 1, 12))
    assert restored.advance_output_watermarks() == {OUT_X: 12}


def test_restore_of_nothing_leaves_the_state_fresh() -> None:
    expected = fresh_control().to_json()
    for data in (None, {}):
        control = fresh_control()
        control.restore(data)
        assert control.to_json() == expected
        assert control.ended == set()
        assert control.input_watermark is None
        assert control.output_watermarks == {}
        control.receive(B0, wm("t1", 1, 3))
        assert control.advance_output_watermarks() == {OUT_Y: 3}


def test_restore_ignores_partitions_and_outputs_not_carried_now() -> None:
    restored = TaskControl(carrying=[B0], outputs={OUT_Y: [B0]})
    restored.restore(roundtrip(busy_control()))

    assert set(restored.partitions) == {B0}
    assert restored.ended == set()
    assert restored.output_watermarks == {OUT_Y: 15}
    assert restored.partitions[B0].watermark == 15
    assert restored.receive(A0, eos("t1", 1)) is False
    assert list(roundtrip(restored)["partitions"]) == ["kafka.shuffle-b#0"]


def test_restore_keeps_fresh_state_for_partitions_missing_from_the_checkpoint() -> None:
    restored = TaskControl(carrying=[B0, PLAIN])
    restored.restore(roundtrip(busy_control()))

    assert restored.partitions[B0].watermark == 15
    assert restored.partitions[PLAIN].watermark is None
    assert restored.advance_input_watermark() is None
