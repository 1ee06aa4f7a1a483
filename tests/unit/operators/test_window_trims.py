"""What a window's held pane trimmed under ``task.drop.process.errors`` leaves
(``operators/refusals.py``): an early count trigger counts the messages the pane still
holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_window_lists import times
from test_window_write_backs import until_checkpointed
from test_windows_time import Live, S, events, window_app

from samzapy import FiringType, Triggers, Windows

DEFAULT, EARLY = FiringType.DEFAULT, FiringType.EARLY


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
