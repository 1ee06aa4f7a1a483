"""What a window's held pane trimmed under ``task.drop.process.errors`` leaves
(``operators/refusals.py``): an early count trigger counts the messages the pane still holds,
and a pane that grew too large between write-backs is trimmed of its own last messages, not
blamed on the message whose call finds it so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_window_lists import times
from test_window_write_backs import until_checkpointed
from test_windows_time import Live, S, events, window_app

from samzapy import AccumulationMode, FiringType, Triggers, Windows

DEFAULT, EARLY, LATE = FiringType.DEFAULT, FiringType.EARLY, FiringType.LATE
WEIGHTS = [(1_000, 5), (2_000, 5), (3_000, 5), (4_000, 0), (5_000, 0)]


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def w(t: int, weight: int) -> dict[str, Any]:
    return {"k": "a", "t": t, "w": weight}


class Weighs:
    """A value serde (JSON) refusing a list whose messages weigh more than ``most`` in all:
    a pane too large to keep, which a lighter message may still fit into."""

    def __init__(self, most: int) -> None:
        self.most = most

    def to_bytes(self, value: list[Any]) -> bytes:
        if sum(x["w"] for x in value) > self.most:
            raise ValueError("the pane weighs too much")
        return json.dumps([[x["t"], x["w"]] for x in value]).encode()

    def from_bytes(self, data: bytes) -> list[Any]:
        return [w(t, weight) for t, weight in json.loads(data)]


def early_window(count: int) -> Any:
    window = Windows.tumbling_window(10 * S, value_serde=Weighs(10)).with_event_time()
    return window.set_early_trigger(Triggers.count(count))


async def test_an_early_count_counts_the_messages_a_trimmed_pane_still_holds() -> None:
    """Three messages held, the commit's write-back keeps two (the third is dropped): the
    trigger, due at four, fires with the fourth message the pane holds, not the third."""
    source = events()
    config = {"task.drop.process.errors": True, "task.commit.ms": 20}
    live = Live(window_app(early_window(4), source), {source: 1}, **config)
    live.send(source, w(1_000, 5), w(2_000, 5), w(3_000, 5))
    assert await until_checkpointed(live, "2")
    live.send(source, w(4_000, 0), w(5_000, 0))
    result = await live.end()
    assert times(live.panes) == [(None, 0, [1_000, 2_000, 4_000, 5_000], EARLY)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("kind", ["early trigger", "tumbling write-back", "session write-back"])
async def test_a_pane_grown_too_large_before_a_message_is_not_blamed_on_it(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three messages held make the pane too large; the fourth, which would fit beside the
    two the serde keeps, finds it so, as it makes the early trigger fire or at the write-back
    every WRITE_BACK_EVERY (4 here) messages: the third is dropped (no partition nor offset),
    the fourth and fifth are kept and the pane fires with them."""
    monkeypatch.setattr("samzapy.operators.windows.WRITE_BACK_EVERY", 4)
    source, first, firing = events(), 0, DEFAULT
    if kind == "early trigger":
        window, firing = early_window(4), EARLY
    elif kind == "tumbling write-back":
        window = Windows.tumbling_window(10 * S, value_serde=Weighs(10)).with_event_time()
    else:
        window = Windows.session_window(10 * S, value_serde=Weighs(10)).with_event_time()
        first = 1_000
    live = Live(window_app(window, source), {source: 1}, **{"task.drop.process.errors": True})
    with capture_logs() as logs:
        live.send(source, *[w(t, weight) for t, weight in WEIGHTS])
        result = await live.end()
    assert times(live.panes) == [(None, first, [1_000, 2_000, 4_000, 5_000], firing)]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
    dropped = [e for e in logs if e["event"] == "message_dropped"]
    assert [(e.get("messages"), e.get("offset")) for e in dropped] == [(1, None)]


async def test_a_late_message_is_not_blamed_for_another_held_session_grown_too_large() -> None:
    """A late message joins a fired session of its key while the key's open session, held,
    has grown too large: that session loses its last message, and the LATE pane goes on."""
    source = events()
    window = Windows.keyed_session_window(lambda x: x["k"], 1 * S, value_serde=Weighs(10))
    window = window.with_event_time(allowed_lateness=60 * S)
    window = window.set_accumulation_mode(AccumulationMode.ACCUMULATING)
    live = Live(window_app(window, source), {source: 1}, **{"task.drop.process.errors": True})
    live.send(source, w(0, 1), w(5_000, 5))
    assert await live.wait(1)  # the watermark passed [0, 1 s): it fired
    live.send(source, w(5_500, 5), w(5_800, 5), w(500, 0))
    result = await live.end()
    assert times(live.panes) == [
        ("a", 0, [0], DEFAULT),
        ("a", 0, [0, 500], LATE),
        ("a", 5_000, [5_000, 5_500], DEFAULT),
    ]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1
