"""Messages given with a timestamp (``samzapy.testing.Message``): the record's time, from which
an input with ``samza.watermark.lateness.ms`` makes the watermarks a task is called with."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from samzapy import (
    KafkaSystemDescriptor,
    StreamApplication,
    StreamTask,
    WatermarkListenerTask,
    Windows,
)
from samzapy.testing import Message, TestRunner

#: What the task was called with, in order.
calls: list[tuple[Any, ...]] = []


class Watches(StreamTask, WatermarkListenerTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        calls.append(("message", envelope.key, envelope.message, envelope.timestamp))

    def on_watermark(self, watermark, collector, coordinator):  # type: ignore[no-untyped-def]
        calls.append(("watermark", watermark))


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    calls.clear()


def test_a_watermark_aware_task_gets_the_watermarks_of_the_timestamps_given() -> None:
    config = {"streams.in.samza.watermark.lateness.ms": 100, "streams.in.samza.key.serde": "json"}
    messages = [
        Message("a", timestamp=1_000),
        Message("b", key={"user": 7}, timestamp=2_000),
        Message("c", timestamp=1_500),  # below the watermark of the messages before it
        Message("d", timestamp=5_000),
    ]
    TestRunner(Watches, config).add_input("in", messages).run(timeout=10)
    assert [c for c in calls if c[0] == "message"] == [
        ("message", None, "a", 1_000),
        ("message", {"user": 7}, "b", 2_000),
        ("message", None, "c", 1_500),
        ("message", None, "d", 5_000),
    ]
    # The watermark comes before the message below it, and the last after the largest time.
    assert calls.index(("watermark", 1_900)) < calls.index(("message", None, "c", 1_500))
    assert calls[-1] == ("watermark", 4_900)


def test_a_message_without_a_timestamp_gives_no_watermark() -> None:
    config = {"streams.in.samza.watermark.lateness.ms": 0}
    TestRunner(Watches, config).add_input("in", ["a", Message("b")]).run(timeout=10)
    assert [c[0] for c in calls] == ["message", "message"]


def test_a_timestamp_that_is_not_an_int_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match=r"Message timestamp: expected an int .* got str '5'"):
        Message("a", timestamp="5")  # type: ignore[arg-type]


def test_an_application_windows_by_the_timestamps_given() -> None:
    kafka = KafkaSystemDescriptor("kafka")
    views = kafka.get_input_descriptor("views", "json").with_watermarks()  # record timestamps
    counts = kafka.get_output_descriptor("counts", "json")

    class Counts(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            window = Windows.tumbling_window(
                timedelta(seconds=10), lambda: 0, lambda m, n: n + 1
            ).with_event_time()
            (
                app_desc.get_input_stream(views)
                .window(window, "per-10s")
                .map(lambda pane: [pane.key.pane_id, pane.message])
                .send_to(app_desc.get_output_stream(counts))
            )

    given = [Message("v", timestamp=t) for t in (1_000, 2_000, 12_000)]
    result = (
        TestRunner.of(Counts)
        .add_input_stream(views, given)
        .add_output_stream(counts)
        .run(timeout=10)
    )
    assert result.outputs(counts) == {0: [[0, 2], [10_000, 1]]}
