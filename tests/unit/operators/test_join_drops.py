"""A stream-stream join under ``task.drop.process.errors``: a message whose processing fails
after the join took it (its ``apply``, an operator after the join, synchronous or not) is
dropped by the container, and leaves nothing in the join's stores: it joins no later message
of the other side, and what its side held for its key before it is still held.

Both sides are read from one input (split by a filter), so that the join takes the messages
in the input's order, with a ttl far longer than the test (in processing time, and in event
time where the test says so).
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_apps import flat, run

from samzapy import KafkaSystemDescriptor, StreamApplicationDescriptor
from samzapy.api.system import TaskName
from samzapy.operators.awaiting import let_go
from samzapy.operators.stream_joins import JoinOperator
from samzapy.storage.inmemory import InMemoryStorageEngine
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import SerdeRegistry

KAFKA = KafkaSystemDescriptor("kafka")
EVENTS = KAFKA.get_input_descriptor("events", "json")
#: The same input in event time: the join too (the watermark far behind, nothing late).
TIMED = (
    KAFKA.get_input_descriptor("events", "json")
    .with_timestamp(lambda message: message["t"])
    .with_watermarks(timedelta(hours=1))
)
PAIRS = KAFKA.get_output_descriptor("pairs", "json")
TTL = timedelta(hours=1)
_DROP = "task.drop.process.errors"


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the join's RocksDB stores go under ./state


def _refuse(pair: list[str]) -> list[str]:
    if "boom" in pair:
        raise ValueError(f"refused {pair}")
    return pair


class ByKey:
    """Joins two messages (dicts) by their ``k``, into the pair of their ``v``; ``apply``
    raises on a pair with 'boom' when ``refuses``."""

    def __init__(self, refuses: bool) -> None:
        self.refuses = refuses

    def get_first_key(self, message: Any) -> Any:
        return message["k"]

    def get_second_key(self, message: Any) -> Any:
        return message["k"]

    def apply(self, first: Any, second: Any) -> Any:
        pair = [first["v"], second["v"]]
        return _refuse(pair) if self.refuses else pair


def join_app(fails_in: str, first_serde: Any = "json", events: Any = EVENTS) -> Any:
    """The ``events`` of side L joined with those of side R; a pair with 'boom' fails in
    ``fails_in``: the join's ``apply``, a ``map`` after it, a ``flat_map_async`` after it,
    or nowhere (``none``)."""

    async def refuse_later(pair: list[str]) -> list[list[str]]:
        return [_refuse(pair)]

    def app(d: StreamApplicationDescriptor) -> None:
        stream = d.get_input_stream(events)
        joined = stream.filter(lambda message: message["side"] == "L").join(
            stream.filter(lambda message: message["side"] == "R"),
            ByKey(fails_in == "apply"),
            "string",
            first_serde,
            "json",
            TTL,
            "j",
        )
        if fails_in == "map":
            joined = joined.map(_refuse)
        elif fails_in == "flat_map_async":
            joined = joined.flat_map_async(refuse_later)
        joined.send_to(d.get_output_stream(PAIRS))

    return app


#: The events' times: one second apart, in the input's order.
_TIMES = itertools.count(1_000, 1_000)


def ev(side: str, v: str, k: str = "a") -> dict[str, Any]:
    return {"side": side, "k": k, "v": v, "t": next(_TIMES)}


@pytest.mark.parametrize("fails_in", ["apply", "map", "flat_map_async"])
@pytest.mark.parametrize("events", [EVENTS, TIMED], ids=["processing", "event"])
def test_a_message_dropped_after_the_join_took_it_is_not_kept(fails_in: str, events: Any) -> None:
    """R y1 joins L x and is kept; R boom fails and is dropped (before, it replaced y1 in the
    store): L z joins y1, the message R held before it, and R w comes after it."""
    messages = [
        ev("L", "x"),
        ev("R", "y1"),
        ev("R", "boom"),
        ev("L", "z"),
        ev("R", "w"),
    ]
    app = join_app(fails_in, events=events)
    result = run(app, [(events, messages)], {PAIRS: 1}, **{_DROP: True})
    assert flat(result.outputs(PAIRS)) == [["x", "y1"], ["z", "y1"], ["z", "w"]]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


@pytest.mark.parametrize("fails_in", ["apply", "map", "flat_map_async"])
def test_a_dropped_first_message_of_its_key_leaves_the_key_empty(fails_in: str) -> None:
    """L boom is kept (no R yet); R y fails on it and is dropped: its side holds nothing for
    the key, so the next L joins nothing until an R comes."""
    messages = [ev("L", "boom"), ev("R", "y"), ev("L", "z"), ev("R", "w")]
    result = run(join_app(fails_in), [(EVENTS, messages)], {PAIRS: 1}, **{_DROP: True})
    assert flat(result.outputs(PAIRS)) == [["z", "w"]]
    assert result.metrics.snapshot()["container"]["process-errors"] == 1


def test_a_join_whose_results_go_on_keeps_every_message() -> None:
    """The same messages without a failure: each is kept as it comes (the latest per key)."""
    messages = [ev("L", "x"), ev("R", "y1"), ev("R", "y2"), ev("L", "z"), ev("R", "w")]
    result = run(join_app("none"), [(EVENTS, messages)], {PAIRS: 1})
    assert flat(result.outputs(PAIRS)) == [
        ["x", "y1"],
        ["x", "y2"],
        ["z", "y2"],
        ["z", "w"],
    ]


class _Context:
    """A task's context as a join opens it: its two stores, in memory."""

    def __init__(self) -> None:
        raw = SerdeRegistry({}).get("bytes")
        self.config: dict[str, Any] = {}
        self.stores = {
            name: SerializedKeyValueStore(InMemoryStorageEngine(name, TaskName("t")), raw, raw)
            for name in ("j-L", "j-R")
        }

    def get_store(self, name: str) -> Any:
        return self.stores[name]


async def test_a_failed_result_does_not_take_out_a_later_message_of_its_key() -> None:
    """Two results of R's key still owed at once (``task.max.concurrency`` above 1): the
    first fails once the second's message replaced it in R's store, which keeps the second."""
    join = JoinOperator("j", ByKey(False), ("string", "json", "json"), ttl_ms=3_600_000)
    context = _Context()
    join.open(context)

    async def fails() -> None:
        raise ValueError("refused")

    join.left.emit = join.emit = lambda result: fails()
    assert join.left.on_message(ev("L", "x")) is None  # nothing to join: kept at once
    first = join.right.on_message(ev("R", "y1"))
    second = join.right.on_message(ev("R", "y2"))
    assert first is not None and second is not None
    with pytest.raises(ValueError):
        await first
    (kept,) = list(context.stores["j-R"].all())
    assert json.loads(kept.value[8:])["v"] == "y2"
    with pytest.raises(ValueError):
        await second


@pytest.mark.parametrize("owes", ["task", "coroutine"])
async def test_a_result_given_up_before_it_started_lets_go_of_what_it_awaits(owes: str) -> None:
    """The task stops while a join's result is still owed, its coroutine not started: letting
    it go (``let_go``) cancels the Task the operators after the join started, or closes their
    coroutine, rather than leaving one running on its own or the other never awaited."""
    join = JoinOperator("j", ByKey(False), ("string", "json", "json"), ttl_ms=3_600_000)
    join.open(_Context())
    started: list[asyncio.Task[None]] = []

    async def later() -> None:
        await asyncio.sleep(10)

    def emit(result: Any) -> Any:
        if owes == "coroutine":
            return later()
        started.append(asyncio.ensure_future(later()))
        return started[-1]

    join.left.emit = join.emit = emit
    assert join.left.on_message(ev("L", "x")) is None
    owed = join.right.on_message(ev("R", "y"))
    assert owed is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        let_go(owed)
        del owed
        gc.collect()
        await asyncio.sleep(0)
    assert all(task.cancelled() for task in started)
    assert not [w for w in caught if "never awaited" in str(w.message)]
