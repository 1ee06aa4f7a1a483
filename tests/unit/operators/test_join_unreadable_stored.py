"""A stream-stream join's stored message that its side's serde cannot read as a message of its
key comes from the other side (a serde changed since it was written, say): under
``task.drop.process.errors`` it is let go once (logged with the join, store and key, as the
windows' stored panes are, and counted) and the message joins as if the other side held
nothing for its key: it is kept, and joins the other side's later messages. Without the key
the task fails, naming the join, the store, the key, the serde and the key that would let it
go. Before, each later message of that key failed on it and was dropped under its own offset,
until the ttl passed or the other side wrote again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_apps import flat, run
from test_join_drops import EVENTS, PAIRS, ev, join_app
from test_window_unreadable_panes import CannotReadPoison

from samzapy import TaskError

_DROP = "task.drop.process.errors"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the join's RocksDB stores go under ./state


def _dropped(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] in ("message_dropped", "stored_message_dropped")]


def test_a_stored_message_the_serde_cannot_read_is_let_go_once() -> None:
    """L poison is stored; R x cannot read it: it is let go, and R x kept; R y replaces x (L
    holds nothing now); L z joins y, and R w joins z."""
    messages = [ev("L", "poison"), ev("R", "x"), ev("R", "y"), ev("L", "z"), ev("R", "w")]
    app = join_app("none", CannotReadPoison())
    with capture_logs() as logs:
        result = run(app, [(EVENTS, messages)], {PAIRS: 1}, **{_DROP: True})
    assert flat(result.outputs(PAIRS)) == [["z", "y"], ["z", "w"]]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
    (dropped,) = _dropped(logs)
    assert dropped["event"] == "stored_message_dropped"
    assert (dropped["operator"], dropped["store"], dropped["key"]) == ("j", "j-L", "'a'")
    assert "cannot read poison" in dropped["error"] and _DROP in dropped["reason"]


def test_each_stored_message_let_go_is_counted_and_logged_at_most_once_a_minute() -> None:
    messages = [ev("L", "poison", "a"), ev("L", "poison", "b"), ev("R", "x", "a")]
    messages += [ev("R", "x", "b"), ev("L", "z", "b")]
    app = join_app("none", CannotReadPoison())
    with capture_logs() as logs:
        result = run(app, [(EVENTS, messages)], {PAIRS: 1}, **{_DROP: True})
    assert flat(result.outputs(PAIRS)) == [["z", "x"]]
    assert result.metrics.snapshot()["container"]["process-errors"] == 2
    (dropped,) = _dropped(logs)
    assert dropped["key"] == "'a'" and dropped["not_logged"] == 0


def test_a_stored_message_the_serde_cannot_read_fails_the_task_without_the_drop_key() -> None:
    messages = [ev("L", "poison"), ev("R", "x")]
    with pytest.raises(TaskError) as failed:
        run(join_app("none", CannotReadPoison()), [(EVENTS, messages)], {PAIRS: 1})
    cause = failed.value.__cause__
    text = f"{failed.value} {cause!r} {getattr(cause, '__notes__', [])}"
    assert "join 'j'" in text and "store 'j-L'" in text and "key 'a'" in text
    assert "CannotReadPoison" in text and _DROP in text
