"""A pane's stored value that its window's value serde cannot read as a later message of its
key comes (a serde changed since it was written, say): under ``task.drop.process.errors`` it
is let go once (logged with the key and window, counted) and the message starts a fresh pane;
without the key the task fails, naming the store, the key and the serde. Before, each later
message of that key failed on it and was dropped under its own offset: one bad stored entry
ate every later message of its key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_window_unreadable_panes import CannotReadPoison
from test_windows_time import Live, S, events, window_app

from samzapy import TaskError, Triggers, Windows

_DROP = "task.drop.process.errors"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


class ChangedSerde(CannotReadPoison):
    """JSON, until ``changed``: then it cannot read a pane holding 'poison'."""

    changed = False

    def from_bytes(self, data: bytes) -> Any:
        return super().from_bytes(data) if self.changed else json.loads(data)


def values_window(kind: str, serde: Any) -> Any:
    """A window by ``k`` collecting the ``v`` of its messages (an aggregator; ``list``: none,
    its panes held as lists; ``early``: with an early count trigger of 10), whose serde cannot
    read back a pane holding 'poison' once changed."""
    if kind == "list":
        window = Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, value_serde=serde)
        return window.with_event_time()
    if kind == "session list":
        window = Windows.keyed_session_window(lambda x: x["k"], 10 * S, value_serde=serde)
        return window.with_event_time()
    functions: dict[str, Any] = {
        "initial_value": list,
        "aggregator": lambda x, acc: [*acc, x["v"]],
        "value_serde": serde,
    }
    if kind == "session":
        functions["merger"] = lambda a, b: a + b
        return Windows.keyed_session_window(lambda x: x["k"], 10 * S, **functions).with_event_time()
    window = Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, **functions)
    window = window.set_early_trigger(Triggers.count(10)) if kind == "early" else window
    return window.with_event_time()


def mv(v: str, t: int) -> dict[str, Any]:
    return {"k": "a", "v": v, "t": t}


async def _stored_unreadable(kind: str, **config: Any) -> Live:
    """The pane of 'a' stored holding 'poison' (a list window's written back by a commit),
    then the serde changed so that it cannot read it, and two more messages of 'a' in the
    same pane."""
    source = events()
    serde = ChangedSerde()
    live = Live(window_app(values_window(kind, serde), source), {source: 1}, **config)
    live.send(source, mv("poison", 1_000))
    await asyncio.sleep(0.3)  # its commits (task.commit.ms: 20)
    serde.changed = True
    live.send(source, mv("x", 2_000), mv("y", 3_000))
    return live


def _values(live: Live) -> list[Any]:
    return [(key, [x["v"] if isinstance(x, dict) else x for x in v]) for key, _, v, _ in live.panes]


@pytest.mark.parametrize("kind", ["tumbling", "early", "list", "session", "session list"])
async def test_a_stored_pane_the_serde_cannot_read_is_let_go_once(kind: str) -> None:
    config = {_DROP: True, "task.commit.ms": 20}
    with capture_logs() as logs:
        live = await _stored_unreadable(kind, **config)
        result = await live.end()
    assert _values(live) == [("a", ["x", "y"])]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
    (dropped,) = [e for e in logs if e["event"] in ("message_dropped", "stored_pane_dropped")]
    assert dropped["event"] == "stored_pane_dropped"
    assert dropped["operator"] == "w" and dropped["key"] == "'a'"
    assert "cannot read poison" in dropped["error"]


@pytest.mark.parametrize("kind", ["tumbling", "list", "session", "session list"])
async def test_a_stored_pane_the_serde_cannot_read_fails_the_task_without_the_drop_key(
    kind: str,
) -> None:
    live = await _stored_unreadable(kind, **{"task.commit.ms": 20})
    with pytest.raises(TaskError) as failed:
        await live.end()
    cause = failed.value.__cause__
    text = f"{failed.value} {cause!r} {getattr(cause, '__notes__', [])}"
    assert "store 'w'" in text and "key 'a'" in text and "ChangedSerde" in text
    assert _DROP in text


async def test_an_early_count_trigger_counts_only_what_the_fresh_pane_holds() -> None:
    source = events()
    serde = ChangedSerde()
    functions: dict[str, Any] = {
        "initial_value": list,
        "aggregator": lambda x, acc: [*acc, x["v"]],
        "value_serde": serde,
    }
    window = Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, **functions)
    window = window.set_early_trigger(Triggers.count(2)).with_event_time()
    live = Live(window_app(window, source), {source: 1}, **{_DROP: True})
    live.send(source, mv("poison", 1_000))
    await asyncio.sleep(0.1)
    serde.changed = True
    live.send(source, mv("x", 2_000), mv("y", 3_000))
    await live.end()
    assert [(v, firing.name) for _, _, v, firing in live.panes][:1] == [(["x", "y"], "EARLY")]
