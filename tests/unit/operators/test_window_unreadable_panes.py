"""A pane its window's value serde cannot read as it fires outside a message's call (a tick,
a watermark, end-of-stream; ``operators/refusals.py``), or whose key its key serde cannot
read: under ``task.drop.process.errors`` it is dropped and counted, and the other panes fire;
without it the task fails, naming the window and its serde (before, it failed either way, and
again after each restart)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_windows_time import Live, S, crash_after_commit, events, m, window_app

from samzapy import FiringType, TaskError, Triggers, Windows

DEFAULT = FiringType.DEFAULT


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


class Json:
    def to_bytes(self, value: Any) -> bytes:
        return json.dumps(value).encode()

    def from_bytes(self, data: bytes) -> Any:
        return json.loads(data)


class CannotReadPoison(Json):
    """A value serde (JSON) that writes a pane holding 'poison' but cannot read it back (as
    a serde changed since the pane was stored may not)."""

    def from_bytes(self, data: bytes) -> Any:
        if b"poison" in data:
            raise ValueError("cannot read poison")
        return json.loads(data)


class CannotReadPoisonKey(CannotReadPoison):
    """A key serde (JSON) that writes the key 'poison' but cannot read it back."""


def keys_window(kind: str, key_serde: Any = None) -> Any:
    """A keyed event-time window collecting its messages' keys (an aggregator: each message's
    pane is written as it comes, and read only as it fires); its value serde cannot read a
    pane of 'poison', or, given ``key_serde``, its key serde cannot read that key."""
    functions: dict[str, Any] = {
        "initial_value": list,
        "aggregator": lambda x, acc: [*acc, x["k"]],
    }
    if key_serde is None:
        functions["value_serde"] = CannotReadPoison()
    else:
        functions["key_serde"] = key_serde
    if kind == "tumbling":
        window = Windows.keyed_tumbling_window(lambda x: x["k"], 10 * S, **functions)
    else:
        functions["merger"] = lambda a, b: a + b
        window = Windows.keyed_session_window(lambda x: x["k"], 10 * S, **functions)
    return window.with_event_time()


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_the_serde_cannot_read_at_end_of_stream_is_dropped(kind: str) -> None:
    source = events()
    config = {"task.drop.process.errors": True}
    live = Live(window_app(keys_window(kind), source), {source: 1}, **config)
    live.send(source, m("poison", 1_000), m("a", 2_000), m("b", 3_000))
    result = await live.end()
    assert sorted((key, value) for key, _, value, _ in live.panes) == [("a", ["a"]), ("b", ["b"])]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_the_serde_cannot_read_as_a_watermark_fires_it_is_dropped(kind: str) -> None:
    source = events()
    config = {"task.drop.process.errors": True}
    live = Live(window_app(keys_window(kind), source), {source: 1}, **config)
    live.send(source, m("poison", 1_000), m("a", 2_000), m("a", 60_000))
    assert await live.wait(1)  # the watermark passed the first panes: a's fired
    result = await live.end()
    assert [(key, value, firing) for key, _, value, firing in live.panes] == [
        ("a", ["a"], DEFAULT),
        ("a", ["a"], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_the_serde_cannot_read_fails_the_task_without_the_drop_key(kind: str) -> None:
    source = events()
    live = Live(window_app(keys_window(kind), source), {source: 1})
    live.send(source, m("poison", 1_000))
    with pytest.raises(TaskError) as failed:
        await live.end()
    cause = failed.value.__cause__
    text = f"{failed.value} {cause!r} {getattr(cause, '__notes__', [])}"
    assert "'w'" in text and "CannotReadPoison" in text and "cannot read poison" in text


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_whose_key_the_serde_cannot_read_as_it_fires_is_dropped(kind: str) -> None:
    source = events()
    config = {"task.drop.process.errors": True}
    window = keys_window(kind, CannotReadPoisonKey())
    live = Live(window_app(window, source), {source: 1}, **config)
    with capture_logs() as logs:
        live.send(source, m("poison", 1_000), m("a", 2_000), m("a", 60_000), m("b", 61_000))
        assert await live.wait(1)  # the watermark passed the first panes: a's fired
        result = await live.end()
    assert [(key, value) for key, _, value, _ in live.panes] == [
        ("a", ["a"]),
        ("a", ["a"]),
        ("b", ["b"]),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
    (dropped,) = [e for e in logs if e["event"] == "message_dropped"]
    assert dropped["operator"] == "w" and "cannot read poison" in dropped["error"]
    assert "CannotReadPoisonKey" in dropped["reason"] and "offset" not in dropped


@pytest.mark.parametrize("kind", ["tumbling", "session"])
async def test_a_pane_whose_key_the_serde_cannot_read_fails_the_task_without_the_drop_key(
    kind: str,
) -> None:
    source = events()
    live = Live(window_app(keys_window(kind, CannotReadPoisonKey()), source), {source: 1})
    live.send(source, m("poison", 1_000))
    with pytest.raises(TaskError) as failed:
        await live.end()
    cause = failed.value.__cause__
    text = f"{failed.value} {cause!r} {getattr(cause, '__notes__', [])}"
    assert "'w'" in text and "CannotReadPoisonKey" in text and '"poison"' in text
    assert "cannot read poison" in text


async def test_a_trigger_state_whose_key_the_serde_cannot_read_at_a_restart_is_let_go() -> None:
    """A restart with a key serde that cannot read a key the trigger state was kept under
    (changed since): under the drop key the task starts, the key's pane is dropped as it
    fires, and the other keys' triggers go on."""
    source = events()
    config = {"task.drop.process.errors": True, "task.commit.ms": 20}

    def window(key_serde: Any) -> Any:
        trigger = Triggers.count(2)
        return keys_window("tumbling", key_serde).set_early_trigger(trigger)

    first = Live(window_app(window(Json()), source), {source: 1}, **config)
    first.send(source, m("poison", 1_000), m("a", 2_000))
    namespace = await crash_after_commit(first, "1")
    again = Live(
        window_app(window(CannotReadPoisonKey()), source), {source: 1}, namespace, **config
    )
    again.send(source, m("a", 3_000))
    result = await again.end()
    assert [(key, value, firing) for key, _, value, firing in again.panes] == [
        ("a", ["a", "a"], FiringType.EARLY)
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
