"""The less used operators at their edges, run through ``TestRunner``: ``broadcast``,
``merge``, ``flat_map_async``, ``sink`` and ``send_to`` given odd values, and the event
time they carry."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from samzapy import (
    KafkaSystemDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
    Windows,
)
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
PANES = KAFKA.get_output_descriptor("panes", "json")


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


@pytest.mark.parametrize("through", ["broadcast", "partition_by"])
def test_an_intermediate_stream_carries_with_timestamps_event_time(through: str) -> None:
    """A message keeps its event time through a ``broadcast`` as through a ``partition_by``:
    the window after it puts it in the pane of its ``with_timestamp`` time."""
    views = KAFKA.get_input_descriptor("views", "json").with_timestamp(lambda ms: ms)
    views = views.with_watermarks()

    class TenSecondCounts(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            stream = app_desc.get_input_stream(views)
            if through == "broadcast":
                stream = stream.broadcast("json", "all")
            else:
                stream = stream.partition_by(lambda ms: "k", lambda ms: ms, "json", "by-k")
            window = Windows.tumbling_window(
                timedelta(seconds=10), lambda: 0, lambda ms, n: n + 1
            ).with_event_time()
            stream.window(window, "per-10s").map(
                lambda pane: [pane.key.pane_id, pane.message]
            ).send_to(app_desc.get_output_stream(PANES))

    result = (
        TestRunner.of(TenSecondCounts)
        .add_input_stream(views, [1_000, 2_000, 12_000, 25_000])
        .add_output_stream(PANES)
        .run(timeout=10)
    )
    assert result.outputs(PANES) == {0: [[0, 2], [10_000, 1], [20_000, 1]]}
