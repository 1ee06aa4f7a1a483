"""An input without watermarks that reaches an event-time window through a ``partition_by``
holds the window back as it does when merged straight into it (docs/api.md, Event time and
watermarks: such a window "fires only at end-of-stream", which ``window_without_watermarks``
says): the writers' watermarks leave that input out, so following them would make its
messages late, dropped, where the same graph without the ``partition_by`` counts them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from samzapy import KV, KafkaSystemDescriptor, KVSerde, StreamApplication, Windows
from samzapy.testing import ManualClock, TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
PANES = KAFKA.get_output_descriptor("panes", "json")
TIMED = KAFKA.get_input_descriptor("timed", "json")
UNTIMED = KAFKA.get_input_descriptor("untimed", "json")


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the window's RocksDB store goes under ./state


def _app(through: bool) -> type[StreamApplication]:
    class Counts(StreamApplication):
        def describe(self, app_desc: Any) -> None:
            timed = app_desc.get_input_stream(
                TIMED.with_timestamp(lambda v: v["t"]).with_watermarks()
            )
            untimed = app_desc.get_input_stream(UNTIMED.with_timestamp(lambda v: v["t"]))
            views = timed.merge([untimed]).map(lambda v: KV(v["k"], v))
            if through:
                views = views.partition_by(
                    lambda kv: kv.key, lambda kv: kv.value, KVSerde("string", "json"), "by-key"
                )
            window = Windows.keyed_tumbling_window(
                lambda kv: kv.key, timedelta(seconds=10), lambda: 0, lambda kv, n: n + 1
            ).with_event_time()
            (
                views.window(window, "counts")
                .map(lambda p: [p.key.pane_id, p.message])
                .send_to(app_desc.get_output_stream(PANES))
            )

    return Counts


async def _panes(through: bool) -> tuple[list[Any], list[Any]]:
    """The panes fired before the untimed input's message came, and in all."""
    runner = TestRunner.of(_app(through), clock=ManualClock(0.0))
    runner.add_input_stream(TIMED, {0: [{"k": "x", "t": 1_000 * i} for i in range(30)]}, end=False)
    runner.add_input_stream(UNTIMED, {0: []}, end=False)
    runner.add_output_stream(PANES)
    job = asyncio.ensure_future(runner.run_async(timeout=20))
    for _ in range(40):  # real time: the timed input is read (and, through, its writer's marks)
        await asyncio.sleep(0.01)
    early = [m for _, m in runner.broker.records("panes", 0)]
    runner.broker.append("untimed", 0, None, {"k": "x", "t": 5_000})
    for _ in range(20):
        await asyncio.sleep(0.01)
    runner.broker.end_stream("timed")
    runner.broker.end_stream("untimed")
    await job
    return early, [m for _, m in runner.broker.records("panes", 0)]


@pytest.mark.parametrize("through", [False, True], ids=["merged", "through partition_by"])
async def test_an_input_without_watermarks_holds_the_window_through_partition_by_too(
    through: bool,
) -> None:
    early, panes = await _panes(through)
    assert early == []  # held back until the end
    assert panes == [[0, 11], [10_000, 10], [20_000, 10]]  # the untimed message counted
