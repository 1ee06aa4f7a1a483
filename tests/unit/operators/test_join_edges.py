"""Stream-stream joins at the edges docs/tables.md draws: two messages exactly the ttl apart,
a message whose event time equals the watermark, an older message that comes later, a key or
a result that is None, and processing time read from the container's clock. Each test quotes
the sentence it proves.

The event-time tests read both sides from one input (split by a filter), so the order in which
the join takes the messages, and so the watermark each one meets, is the input's.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_apps import flat, run
from test_windows_time import Live

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplicationDescriptor,
    TaskError,
)
from samzapy.testing import ManualClock

KAFKA = KafkaSystemDescriptor("kafka")
PAIRS = KAFKA.get_output_descriptor("pairs", "json")
TTL = timedelta(seconds=10)


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the join's RocksDB stores go under ./state


class ById:
    """Joins two messages (dicts) by their ``id``; the result is their two times, or None
    when the second says ``skip``."""

    def get_first_key(self, message: Any) -> Any:
        return message["id"]

    def get_second_key(self, message: Any) -> Any:
        return message["id"]

    def apply(self, first: Any, second: Any) -> Any:
        return None if second.get("skip") else [first["t"], second["t"]]


def one_input_join(out_of_orderness: timedelta) -> tuple[Any, Any]:
    """An input whose messages with side L join those with side R, in event time (the input's
    watermarks: the largest time seen less ``out_of_orderness``); the application and it."""
    events = (
        KAFKA.get_input_descriptor("events", "json")
        .with_timestamp(lambda message: message["t"])
        .with_watermarks(out_of_orderness)
    )

    def app(d: StreamApplicationDescriptor) -> None:
        stream = d.get_input_stream(events)
        stream.filter(lambda message: message["side"] == "L").join(
            stream.filter(lambda message: message["side"] == "R"),
            ById(),
            "string",
            "json",
            "json",
            TTL,
            "j",
        ).send_to(d.get_output_stream(PAIRS))

    return app, events


def side(name: str, key: str | None, t: int) -> dict[str, Any]:
    return {"side": name, "id": key, "t": t}


def test_two_messages_exactly_the_ttl_apart_join_in_either_order_and_not_a_ms_more() -> None:
    """docs/tables.md: "A message joins the other side's message of its key when their times
    are at most ``ttl`` apart"; "the ttl is measured between the two messages' event times, in
    either direction"; "a message whose event time the watermark already passed is late and
    dropped". Out-of-orderness 0, so the watermark is the largest time seen: a message at the
    watermark is not late (it joins later), one a millisecond behind it is."""
    app, events = one_input_join(timedelta(0))
    messages = [
        side("L", "a", 1_000),
        side("R", "a", 11_000),  # exactly the ttl after: joins; W = 11 s
        side("L", "b", 11_000),  # at W: kept
        side("R", "b", 21_001),  # a ms more than the ttl after it: no
        side("R", "c", 21_001),  # at W: kept
        side("L", "c", 31_001),  # the ttl after the right one, which came first: joins
        side("R", "a", 31_000),  # behind W = 31.001 s: late, dropped
        side("L", "a", 31_001),  # so the right a of 31 s is not there to join
    ]
    result = run(app, [(events, messages)], {PAIRS: 1})
    assert flat(result.outputs(PAIRS)) == [[1_000, 11_000], [31_001, 21_001]]
    assert result.metrics.snapshot()["task.Partition 0"]["j-late-messages"] == 1


def test_an_older_message_that_comes_later_joins_and_does_not_replace_the_newer() -> None:
    """docs/tables.md: "a side keeps, per key, the message with the latest event time (an older
    one that comes later still joins, and does not replace it)". Left 12 s, then left 10 s:
    both join right 20 s (10 s is exactly the ttl away), and right 22 s joins the left of 12 s
    that was kept (the one of 10 s would be 12 s away)."""
    app, events = one_input_join(timedelta(hours=1))  # nothing late
    messages = [
        side("R", "k", 20_000),
        side("L", "k", 12_000),
        side("L", "k", 10_000),
        side("R", "k", 22_000),
    ]
    result = run(app, [(events, messages)], {PAIRS: 1})
    assert flat(result.outputs(PAIRS)) == [[12_000, 20_000], [10_000, 20_000], [12_000, 22_000]]


def test_a_none_key_joins_nothing_and_a_none_result_is_dropped() -> None:
    """docs/tables.md: "a None result is dropped; a message whose key is None joins nothing".
    Both sides have a message of key None (in processing time, with a ttl far longer than the
    test), and the pair of key x makes None: only y's pair goes out, counted as the join's one
    message out."""
    orders = KAFKA.get_input_descriptor("orders", "json")
    payments = KAFKA.get_input_descriptor("payments", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(orders).join(
            d.get_input_stream(payments), ById(), "string", "json", "json", TTL * 360, "j"
        ).send_to(d.get_output_stream(PAIRS))

    orders_in = [{"id": None, "t": 1}, {"id": "x", "t": 2}, {"id": "y", "t": 3}]
    payments_in = [{"id": None, "t": 4}, {"id": "x", "t": 5, "skip": True}, {"id": "y", "t": 6}]
    result = run(app, [(orders, orders_in), (payments, payments_in)], {PAIRS: 1})
    assert flat(result.outputs(PAIRS)) == [[3, 6]]
    assert result.metrics.snapshot()["task.Partition 0"]["j-messages-out"] == 1


async def test_a_processing_time_join_measures_the_ttl_on_the_containers_clock() -> None:
    """docs/tables.md: "The time is processing time (when the message arrived), as in Samza";
    "What expired (processing time: older than the ttl ...) never joins". On a ManualClock: a
    payment exactly the ttl after its order joins it; one 10.125 s after its order does not,
    nor does a payment of an order that was swept at the ticks since."""
    orders = KAFKA.get_input_descriptor("orders", "json")
    payments = KAFKA.get_input_descriptor("payments", "json")
    clock = ManualClock(1_000.0)
    seen: list[Any] = []
    pairs: list[Any] = []

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        first, second = [
            d.get_input_stream(s).map(lambda m: seen.append(m) or m) for s in (orders, payments)
        ]
        first.join(second, ById(), "string", "json", "json", TTL, "j").sink(
            lambda r, c, k: pairs.append(r)
        )

    live = Live(build, {orders: 1, payments: 1}, clock=clock)

    async def send(descriptor: Any, message: Any) -> None:
        live.send(descriptor, message)
        count = len(seen) + 1
        assert await live.wait(0, until=lambda _: len(seen) == count)
        await asyncio.sleep(0.05)  # the message is through the join, not only the map

    await send(orders, {"id": "a", "t": "1,000 s"})
    await send(orders, {"id": "b", "t": "1,000 s"})
    clock.advance(10.0)  # ticks: nothing expired yet (the ttl, not more)
    await asyncio.sleep(0.05)
    await send(payments, {"id": "a", "t": "1,010 s"})
    assert pairs == [["1,000 s", "1,010 s"]]
    await send(orders, {"id": "c", "t": "1,010 s"})
    clock.advance(10.125)
    await asyncio.sleep(0.05)
    await send(payments, {"id": "c", "t": "1,020.125 s"})  # 10.125 s after its order
    await send(payments, {"id": "b", "t": "1,020.125 s"})  # its order was swept
    result = await live.end()
    assert pairs == [["1,000 s", "1,010 s"]]
    assert result.metrics.snapshot()["task.Partition 0"]["j-messages-out"] == 1


@pytest.mark.parametrize("which", ["first", "second"])
def test_a_side_whose_serde_does_not_give_back_its_kvs_fails_saying_to_use_a_kvserde(
    which: str,
) -> None:
    """docs/tables.md: "The serdes store the keys and each side's messages (a `KVSerde` for a
    stream of `KV`s ...)". A stream of KVs given ``json`` would have its kept messages come
    back as lists, so that ``apply`` got a KV or a list depending on which side came first:
    the join fails at that side's first message, naming it and the remedy."""
    orders = KAFKA.get_input_descriptor("orders", KVSerde("string", "json"))
    payments = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
    pair = KVSerde("string", "json")

    class ByKey:
        def get_first_key(self, message: KV) -> Any:
            return message.key

        def get_second_key(self, message: KV) -> Any:
            return message.key

        def apply(self, order: KV, payment: KV) -> Any:
            return [order.value, payment.value]

    def app(d: StreamApplicationDescriptor) -> None:
        serdes = ("json", pair) if which == "first" else (pair, "json")
        d.get_input_stream(orders).join(
            d.get_input_stream(payments), ByKey(), "string", *serdes, TTL, "j"
        ).send_to(d.get_output_stream(PAIRS))

    messages = [KV("o1", 1)]
    with pytest.raises(TaskError) as failed:
        run(app, [(orders, messages), (payments, messages)], {PAIRS: 1})
    assert "the message serde of operator 'j' (join) failed" in str(failed.value)
    assert f"the {which} stream's messages are KVs" in str(failed.value.__cause__)
    assert "KVSerde(key_serde, value_serde)" in str(failed.value.__cause__)

    # a KVSerde (or None) on each side gives the KVs back: they join
    def fine(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(orders).join(
            d.get_input_stream(payments), ByKey(), "string", pair, None, TTL, "j"
        ).send_to(d.get_output_stream(PAIRS))

    result = run(fine, [(orders, messages), (payments, messages)], {PAIRS: 1})
    assert flat(result.outputs(PAIRS)) == [[1, 1]]
