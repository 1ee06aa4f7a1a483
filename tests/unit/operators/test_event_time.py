"""``Watermarks``, the event-time bookkeeping of one task's operator graph: the minimum over
the streams that reach a window, watermarks generated per message (``with_watermarks``), idle
streams that stop holding the minimum back and hold it again, and the container's watermarks
of streams whose watermarks are generated in the task, and the operator a failure as windows
fire is named after. Pure logic: plain objects, a fake time."""

from __future__ import annotations

import pytest

from samzapy.api.errors import OperatorError, WatermarkFiringError
from samzapy.api.system import SystemStream
from samzapy.api.task import END_WATERMARK
from samzapy.operators.event_time import Watermarks, firing_failed
from samzapy.operators.impl import InputOperator

A = SystemStream("kafka", "a")
B = SystemStream("kafka", "b")
C = SystemStream("kafka", "c")


class Window:
    """A window's ``advance``: every watermark it was given, in order."""

    def __init__(self) -> None:
        self.given: list[int] = []

    def __call__(self, watermark: int) -> None:
        self.given.append(watermark)

    @property
    def at(self) -> int | None:
        """The window's watermark: the largest it was given (a window never goes back)."""
        return max(self.given, default=None)


def test_a_window_waits_for_every_stream_then_gets_their_minimum() -> None:
    marks, window = Watermarks(), Window()
    marks.add_window(window, [A, B])

    marks.received(A, 5_000)
    assert window.given == []  # B has said nothing yet: nothing is complete
    marks.received(B, 3_000)
    assert window.at == 3_000
    marks.received(A, 9_000)
    assert window.at == 3_000  # B holds it back
    marks.received(B, 7_000)
    assert window.at == 7_000
    marks.received(B, 6_000)  # a stream's watermark never goes back
    assert marks.streams[B] == 7_000
    assert window.at == 7_000


def test_each_window_gets_the_minimum_of_its_own_streams() -> None:
    marks, both, only_c = Watermarks(), Window(), Window()
    marks.add_window(both, [A, C])
    marks.add_window(only_c, [C])

    marks.received(C, 8_000)
    assert (both.at, only_c.at) == (None, 8_000)
    marks.received(A, 2_000)
    assert (both.at, only_c.at) == (2_000, 8_000)
    marks.received(B, 99_000)  # a stream no window reads changes nothing
    assert (both.at, only_c.at) == (2_000, 8_000)


def test_generated_watermarks_move_with_each_message_by_the_largest_time_seen() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 1_000, None)  # max_out_of_orderness 1 s
    marks.add_window(window, [A])
    observe = marks.observer(A)
    assert observe is not None
    assert marks.observer(B) is None  # B's watermarks are not generated here

    observe(5_000)
    assert window.given == [4_000]
    observe(4_500)  # out of order: the largest time seen stays 5 s
    observe(5_000)
    assert window.given == [4_000]
    observe(7_250)
    assert window.given == [4_000, 6_250]
    observe(None)  # a message without a time moves nothing
    assert window.given == [4_000, 6_250]


def test_the_containers_watermark_of_a_generated_stream_is_ignored() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, None)
    marks.add_window(window, [A])

    marks.received(A, 50_000)  # derived from record times, per poll batch: not the task's
    assert window.given == []
    observer = marks.observer(A)
    assert observer is not None
    observer(2_000)
    assert window.given == [2_000]
    marks.received(A, 60_000)
    assert window.given == [2_000]


def test_an_idle_stream_stops_holding_the_minimum_back_and_holds_it_again_with_data() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 1_000)  # idle after 1 s without a message
    marks.generate(B, 0, None)  # never idle
    marks.add_window(window, [A, B])
    see_a, see_b = marks.observer(A), marks.observer(B)
    assert see_a is not None and see_b is not None

    see_a(1_000)
    see_b(5_000)
    assert window.at == 1_000
    marks.tick(10.0)  # both had messages since the last tick
    see_b(6_000)
    marks.tick(10.5)
    assert window.at == 1_000  # A quiet for 0.5 s: not idle yet
    see_b(7_000)
    marks.tick(11.0)  # A quiet for 1 s: idle, B alone holds the minimum
    assert window.at == 7_000
    see_b(8_000)
    assert window.at == 8_000

    see_a(2_000)  # A is back: it holds the minimum again (the window does not go back)
    see_b(12_000)
    assert window.at == 8_000
    see_a(9_500)
    assert window.at == 9_500
    marks.tick(11.5)
    marks.tick(12.0)
    assert window.at == 9_500  # A just had a message: not idle
    marks.tick(13.0)
    assert window.at == 12_000


def test_a_stream_that_never_sends_a_message_goes_idle_after_its_timeout() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 500)
    marks.generate(B, 0, None)
    marks.add_window(window, [A, B])
    see_b = marks.observer(B)
    assert see_b is not None

    see_b(3_000)
    marks.tick(0.0)
    assert window.given == []  # A has no watermark and is not idle yet
    marks.tick(0.4)
    assert window.given == []
    marks.tick(0.5)
    assert window.at == 3_000


def test_when_every_stream_is_idle_the_window_gets_the_highest_of_them() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 1_000)
    marks.generate(B, 0, 1_000)
    marks.add_window(window, [A, B])
    see_a, see_b = marks.observer(A), marks.observer(B)
    assert see_a is not None and see_b is not None

    see_a(2_000)
    see_b(4_000)
    marks.tick(0.0)
    assert window.at == 2_000
    marks.tick(1.0)  # both idle (as Flink: the largest of the idle inputs' watermarks)
    assert window.at == 4_000


def test_a_stream_that_ended_is_not_taken_for_the_highest_of_the_idle_ones() -> None:
    """An ended stream holds nothing back, and is no idle stream: with the others idle, the
    window gets the highest of the idle ones (as ``TaskControl`` through an intermediate
    stream), not the ended one's end of time, which would make every later message late;
    once every stream ended, the end of time."""
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 1_000)
    marks.generate(B, 0, None)  # no idle timeout
    marks.add_window(window, [A, B])
    see_a, see_b = marks.observer(A), marks.observer(B)
    assert see_a is not None and see_b is not None

    see_a(2_000)
    see_b(4_000)
    marks.received(B, END_WATERMARK)  # B ended
    assert window.at == 2_000
    marks.tick(0.0)
    marks.tick(1.0)  # A idle
    assert window.at == 2_000
    see_a(3_000)  # A back, on time
    assert window.at == 3_000
    marks.received(A, END_WATERMARK)
    assert window.at == END_WATERMARK

    # An idle stream that never had a watermark holds nothing back beside an ended one.
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 1_000)
    marks.add_window(window, [A, B])
    marks.received(B, END_WATERMARK)
    marks.tick(0.0)
    assert window.given == []  # A has none yet, and is not idle
    marks.tick(1.0)
    assert window.at == END_WATERMARK


def test_a_stream_from_the_container_is_never_idle() -> None:
    marks, window = Watermarks(), Window()
    marks.generate(A, 0, 100)
    marks.add_window(window, [A, C])  # C: an intermediate stream, watermarks in-band
    see_a = marks.observer(A)
    assert see_a is not None

    see_a(9_000)
    marks.received(C, 1_000)
    assert window.at == 1_000
    for now in (0.0, 1.0, 2.0):
        marks.tick(now)
    marks.received(C, 4_000)
    assert window.at == 4_000  # C still holds it: idleness is for generated streams


def test_a_firing_failure_outside_any_operator_names_the_input_whose_message_moved_it() -> None:
    """A window's failure as it fires names the window (an OperatorError); anything else
    failed between the input and its windows, and names the input, not a made-up "window"."""
    entry = InputOperator("events", A, keyed=False)
    with pytest.raises(WatermarkFiringError, match=r"^lost, on what the windows fired") as info:
        firing_failed(RuntimeError("lost"), entry)
    assert (info.value.op_id, info.value.kind) == ("events", "input")
    assert isinstance(info.value.__cause__, RuntimeError)
    window = OperatorError("the firing of operator 'w' (window) failed", op_id="w", kind="window")
    with pytest.raises(WatermarkFiringError) as info:
        firing_failed(window, entry)
    assert (info.value.op_id, info.value.kind) == ("w", "window")
