"""A window before a ``partition_by`` or ``broadcast`` fires its last panes at end-of-stream
(docs/api.md, Windows: "At end-of-stream (every input of the task ended) every open window
fires its DEFAULT pane, in both time domains"), and the intermediate stream after it carries
them: its end-of-stream, which the task sends once the window's inputs ended (while it still
reads the intermediate stream itself), follows them, as every message the task sent before it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from samzapy import KV, KafkaSystemDescriptor, KVSerde, StreamApplication, Windows
from samzapy.testing import ManualClock, TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
TOTALS = KAFKA.get_output_descriptor("totals", KVSerde("string", "long"))
#: Each input partition's views: key k<i % 4> at i seconds, i = the partition's, 40 in all.
VIEWS = {p: [{"k": f"k{i % 4}", "t": 1_000 * i} for i in range(p, 40, 3)] for p in range(3)}


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the windows' RocksDB stores go under ./state


def _app(views: Any, event_time: bool, through: str) -> type[StreamApplication]:
    class CountThenSum(StreamApplication):
        """Per task, each key's count per minute; then, per key, the sum of those counts."""

        def describe(self, app_desc: Any) -> None:
            first = Windows.keyed_tumbling_window(
                lambda v: v["k"], timedelta(minutes=1), lambda: 0, lambda v, n: n + 1
            )
            if event_time:
                first = first.with_event_time()
            panes = app_desc.get_input_stream(views).window(first, "counts")
            if through == "partition_by":
                counted = panes.partition_by(
                    lambda p: p.key.key, lambda p: p.message, KVSerde("string", "long"), "by-key"
                )
            else:  # every task reads every pane: the sums are the job's times three
                counted = panes.map(lambda p: [p.key.key, p.message]).broadcast("json", "all")
                counted = counted.map(lambda kv: KV(kv[0], kv[1]))
            second = Windows.keyed_tumbling_window(
                lambda kv: kv.key, timedelta(minutes=1), lambda: 0, lambda kv, n: n + kv.value
            )
            (
                counted.window(second, "sums")
                .map(lambda p: KV(p.key.key, p.message))
                .send_to(app_desc.get_output_stream(TOTALS))
            )

    return CountThenSum


@pytest.mark.parametrize("through", ["partition_by", "broadcast"])
@pytest.mark.parametrize(
    "event_time",
    [False, True],
    ids=["processing time", "event time, an input without watermarks"],
)
def test_panes_a_window_fires_at_end_of_stream_reach_the_stage_after_it(
    event_time: bool, through: str
) -> None:
    views = KAFKA.get_input_descriptor("views", "json")
    if event_time:
        views = views.with_timestamp(lambda v: v["t"])  # no watermarks: fires at the end only
    result = (
        # A clock that stands still: processing-time panes all fall in one minute.
        TestRunner.of(_app(views, event_time, through), clock=ManualClock(0.0))
        .add_input_stream(views, VIEWS)
        .add_output_stream(TOTALS, partitions=3)
        .run(timeout=20)
    )
    sums = sorted(kv for records in result.keyed_outputs(TOTALS).values() for kv in records)
    per_task = 1 if through == "partition_by" else 3
    assert sums == sorted(KV(f"k{k}", 10) for k in range(4) for _ in range(per_task))
