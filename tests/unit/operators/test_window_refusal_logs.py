"""What a window drops under ``task.drop.process.errors`` (``operators/refusals.py``) is
logged as the container's drops are: at most once a minute per window and kind of line, the
next line saying how many were not logged, while ``process-errors`` counts every one (a
steady stream of refusals flooded the log, one line each)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_window_unreadable_panes import keys_window
from test_windows_time import Live, events, m, window_app

from samzapy.metrics.registry import MetricsRegistry
from samzapy.operators.refusals import Refusals

_DROP = "task.drop.process.errors"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_panes_the_serde_cannot_read_are_logged_once_and_all_counted(kind: str) -> None:
    source = events()
    live = Live(window_app(keys_window(kind), source), {source: 1}, **{_DROP: True})
    with capture_logs() as logs:
        live.send(source, *(m(f"poison{i}", 1_000 + i) for i in range(5)), m("a", 2_000))
        result = await live.end()
    assert [(key, value) for key, _, value, _ in live.panes] == [("a", ["a"])]
    assert result.metrics.snapshot()["container"]["process-errors"] == 5
    (dropped,) = [e for e in logs if e["event"] == "message_dropped"]
    assert dropped["operator"] == "w" and dropped["not_logged"] == 0


class _Window:
    """What ``Refusals`` reads of its window operator."""

    op_id = "w"
    window = SimpleNamespace(value_serde=None, key_serde=None)

    def trim_held(self, skey: bytes, value: Any) -> tuple[bytes | None, int]:
        return None, len(value)


class _Context:
    def __init__(self) -> None:
        self.config = {_DROP: True}
        self.task_name = "Partition 0"
        self.metrics = MetricsRegistry()


def test_a_refusal_after_the_interval_is_logged_with_how_many_were_not() -> None:
    context = _Context()
    refusals = Refusals(_Window(), context)
    now = [100.0]
    refusals.limit.clock = lambda: now[0]
    error = ValueError("refused")
    with capture_logs() as logs:
        for pane in range(3):
            refusals.unreadable(error, "k", pane)
        refusals(b"T", ["x", "y"], error)  # a held list, two messages lost
        refusals.unreadable_key(error, b"k", 4)  # the same line: one more
        refusals.unreadable_trigger_key(error, b"k", 5)  # a line of its own kind
        refusals.unreadable_trigger_key(error, b"k", 6)
        now[0] += 59.0
        refusals.unreadable(error, "k", 7)
        now[0] += 1.0
        refusals.unreadable(error, "k", 8)
        refusals.unreadable_trigger_key(error, b"k", 9)
    lines = [(e["event"], e.get("pane_id"), e["not_logged"]) for e in logs]
    assert lines == [
        ("message_dropped", 0, 0),
        ("trigger_state_dropped", 5, 0),
        ("message_dropped", 8, 5),
        ("trigger_state_dropped", 9, 1),
    ]
    snapshot = context.metrics.snapshot()
    assert snapshot["container"]["process-errors"] == 3 + 2 + 1 + 2
