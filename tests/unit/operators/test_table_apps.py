"""Tables and joins in whole applications through TestRunner.of: stream-table joins on each
kind of table, send_to(table), remote tables (concurrency, order, retries, rate limit,
cache), stream-stream joins in processing and event time, and their errors."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from test_apps import Lambda, flat, run
from test_windows_time import Live

from samzapy import (
    KV,
    CachingTableDescriptor,
    ConfigError,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    StreamApplicationDescriptor,
    TableRetryPolicy,
    TaskError,
    Windows,
)
from samzapy.system.partitioner import partition_for
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
VIEWS = KAFKA.get_input_descriptor("views", KVSerde("string", "json"))
ENRICHED = KAFKA.get_output_descriptor("enriched", KVSerde("string", "json"))
PROFILES = {"ann": {"city": "Oslo"}, "bob": {"city": "Lima"}}


class Enrich:
    """Samza's StreamTableJoinFunction: a view and its member's profile (or None)."""

    def get_message_key(self, message: KV) -> Any:
        return message.key

    def get_record_key(self, record: KV) -> Any:
        return record.key

    def apply(self, message: KV, record: KV | None) -> KV:
        city = None if record is None else record.value["city"]
        return KV(message.key, {"page": message.value, "city": city})


class FillOnInit(Enrich):
    """Puts the profiles into the table when the task starts (context.get_table)."""

    def init(self, context: Any) -> None:
        table = context.get_table("profiles")
        table.put_all(list(PROFILES.items()))


VIEW_MESSAGES = [KV("ann", "/a"), KV("cid", "/b"), KV("bob", "/c"), KV("ann", "/d")]
EXPECTED = [
    KV("ann", {"page": "/a", "city": "Oslo"}),
    KV("cid", {"page": "/b", "city": None}),
    KV("bob", {"page": "/c", "city": "Lima"}),
    KV("ann", {"page": "/d", "city": "Oslo"}),
]


@pytest.mark.parametrize("kind", [InMemoryTableDescriptor, RocksDbTableDescriptor])
def test_a_stream_table_join_on_a_local_table_enriches_and_gives_none_when_absent(
    kind: Any,
) -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(kind("profiles", KVSerde("string", "json")))
        d.get_input_stream(VIEWS).join(table, FillOnInit()).send_to(d.get_output_stream(ENRICHED))

    result = run(app, [(VIEWS, VIEW_MESSAGES)], {ENRICHED: 1})
    assert flat(result.keyed_outputs(ENRICHED)) == EXPECTED


def test_send_to_a_table_writes_kvs_and_a_none_value_deletes_the_key() -> None:
    updates = KAFKA.get_input_descriptor("updates", KVSerde("string", "json"))
    seen = KAFKA.get_output_descriptor("seen", KVSerde("string", "json"))

    class Current(Enrich):
        def apply(self, message: KV, record: KV | None) -> KV:
            return KV(message.key, None if record is None else record.value)

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(InMemoryTableDescriptor("state", KVSerde("string", "json")))
        stream = d.get_input_stream(updates)
        stream.send_to(table)  # first: the join after it sees the write
        stream.join(table, Current()).send_to(d.get_output_stream(seen))

    messages = [KV("a", 1), KV("b", 2), KV("a", None), KV("a", 3)]
    result = run(app, [(updates, messages)], {seen: 1})
    assert flat(result.keyed_outputs(seen)) == [KV("a", 1), KV("b", 2), KV("a", None), KV("a", 3)]


def test_send_to_a_table_refuses_a_message_that_is_not_a_kv_naming_the_operator() -> None:
    lines = KAFKA.get_input_descriptor("lines", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json")))
        d.get_input_stream(lines).send_to(table)

    with pytest.raises(TaskError, match=r"offset 0.*send_to_table-1.*KV\(key, value\)"):
        run(app, [(lines, ["x"])], {})


class Profiles:
    """A remote read function: a dict behind a delay, counting calls and concurrency."""

    #: calls in flight now and at most, over every task's copy
    in_flight: ClassVar[list[int]] = [0, 0]

    def __init__(self, delay: float = 0.002, failures: int = 0) -> None:
        self.delay = delay
        self.failures = failures

    async def get_async(self, key: str) -> Any:
        counts = Profiles.in_flight
        counts[0] += 1
        counts[1] = max(counts[1], counts[0])
        try:
            # later keys answer sooner: results would come out of order if not re-ordered
            await asyncio.sleep(self.delay * {"ann": 3, "bob": 2}.get(key, 1))
            if self.failures:
                self.failures -= 1
                raise ConnectionError("profile service unavailable")
            return PROFILES.get(key)
        finally:
            counts[0] -= 1


def test_remote_look_ups_overlap_up_to_max_concurrency_and_results_keep_input_order() -> None:
    profiles = Profiles()
    Profiles.in_flight[:] = [0, 0]
    views = [KV(name, f"/{i}") for i, name in enumerate(["ann", "bob", "cid"] * 20)]

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(RemoteTableDescriptor("profiles").with_read_function(profiles))
        d.get_input_stream(VIEWS).join(table, Enrich()).send_to(d.get_output_stream(ENRICHED))

    # the function object is copied per task: read the copy's counts through a class list
    result = run(app, [(VIEWS, views)], {ENRICHED: 1}, **{"task.max.concurrency": 8})
    out = flat(result.keyed_outputs(ENRICHED))
    assert [kv.value["page"] for kv in out] == [f"/{i}" for i in range(60)]
    assert out[0] == KV("ann", {"page": "/0", "city": "Oslo"})
    assert out[2] == KV("cid", {"page": "/2", "city": None})
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["profiles-gets"] == 60
    assert Profiles.in_flight[1] == 8


def test_a_remote_join_s_result_keeps_its_message_s_event_time() -> None:
    """A slow look-up (the view at 1 s) still in flight when the next view (at 15 s) comes
    in: its result goes on with its own time, into the 10 s window of 0 s."""
    views = (
        KAFKA.get_input_descriptor("timed-views", KVSerde("string", "json"))
        .with_timestamp(lambda kv: kv.value["t"])
        .with_watermarks(timedelta(hours=1))
    )
    panes: list[Any] = []

    class Slow:
        async def get_async(self, key: str) -> Any:
            await asyncio.sleep(0.05 if key == "ann" else 0)
            return PROFILES.get(key)

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(RemoteTableDescriptor("profiles").with_read_function(Slow()))
        window = Windows.keyed_tumbling_window(
            lambda kv: kv.key, timedelta(seconds=10), lambda: 0, lambda m, n: n + 1
        ).with_event_time()
        d.get_input_stream(views).join(table, Enrich()).window(window, "w").sink(
            lambda p, c, k: panes.append((p.key.key, p.key.pane_id, p.message))
        )

    timed = [KV("ann", {"t": 1_000}), KV("bob", {"t": 15_000})]
    run(app, [(views, timed)], {}, **{"task.max.concurrency": 2})
    assert sorted(panes) == [("ann", 0, 1), ("bob", 10_000, 1)]


class InnerJoin(Enrich):
    """An inner join: a view whose member has no profile goes no further."""

    def apply(self, message: KV, record: KV | None) -> Any:
        return None if record is None else super().apply(message, record)


class Recorded(Profiles):
    """Profiles, noting each key looked up (over every task's copy)."""

    keys: ClassVar[list[Any]] = []

    async def get_async(self, key: str) -> Any:
        Recorded.keys.append(key)
        return await super().get_async(key)


@pytest.mark.parametrize("remote", [False, True], ids=["local", "remote"])
def test_a_stream_table_join_drops_a_none_result_and_the_rest_keep_their_order(
    remote: bool,
) -> None:
    """docs/tables.md: "record is the table's KV(key, value), or None when the key has no
    value (a left join: apply decides; a None result is dropped)"; "a message whose key is
    None is not looked up: its record is None"; remote: "the joined messages go on in the
    order their messages came in". An inner join over views of members with and without a
    profile, and of no member at all; remotely with eight look-ups in flight, those of
    members without a profile answering first."""
    Recorded.keys = []

    def app(d: StreamApplicationDescriptor) -> None:
        if remote:
            table = d.get_table(RemoteTableDescriptor("profiles").with_read_function(Recorded()))
            join_fn: Any = InnerJoin()
        else:
            table = d.get_table(InMemoryTableDescriptor("profiles", KVSerde("string", "json")))
            join_fn = type("FilledInner", (FillOnInit, InnerJoin), {})()
        d.get_input_stream(VIEWS).join(table, join_fn).send_to(d.get_output_stream(ENRICHED))

    members = ["ann", "cid", None, "bob", "dan", "ann", None, "bob"] * 3
    views = [KV(member, f"/{i}") for i, member in enumerate(members)]
    result = run(app, [(VIEWS, views)], {ENRICHED: 1}, **{"task.max.concurrency": 8})
    out = flat(result.keyed_outputs(ENRICHED))
    assert out == [
        KV(m, {"page": f"/{i}", "city": PROFILES[m]["city"]})
        for i, m in enumerate(members)
        if m in PROFILES
    ]
    if remote:
        assert Recorded.keys == [m for m in members if m is not None]
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["stream_table_join-1-messages-out"] == len(out)


def test_a_failing_remote_read_is_retried_per_policy_then_fails_naming_table_and_key() -> None:
    def app_with(policy: TableRetryPolicy | None, failures: int) -> Any:
        def app(d: StreamApplicationDescriptor) -> None:
            remote = RemoteTableDescriptor("profiles").with_read_function(
                Profiles(0.0, failures=failures)
            )
            if policy is not None:
                remote.with_read_retry_policy(policy)
            table = d.get_table(remote)
            d.get_input_stream(VIEWS).join(table, Enrich()).send_to(d.get_output_stream(ENRICHED))

        return app

    policy = (
        TableRetryPolicy().with_fixed_backoff(timedelta(milliseconds=1)).with_stop_after_attempts(3)
    )
    result = run(app_with(policy, 2), [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert flat(result.keyed_outputs(ENRICHED)) == [KV("ann", {"page": "/a", "city": "Oslo"})]
    assert result.metrics.snapshot()["task.Partition 0"]["profiles-retries"] == 2

    with pytest.raises(TaskError) as failed:
        run(app_with(policy, 3), [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    text = f"{failed.value} {failed.value.__cause__} {failed.value.__cause__.__cause__}"
    assert "profiles" in text and "'ann'" in text and "offset 0" in text


def test_a_read_rate_limit_holds_look_ups_to_the_rate() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        remote = (
            RemoteTableDescriptor("profiles")
            .with_read_function(Profiles(0.0))
            .with_read_rate_limit(100)
        )
        table = d.get_table(remote)
        d.get_input_stream(VIEWS).join(table, Enrich()).send_to(d.get_output_stream(ENRICHED))

    views = [KV("ann", str(i)) for i in range(160)]
    start = time.monotonic()
    result = run(app, [(VIEWS, views)], {ENRICHED: 1}, **{"task.max.concurrency": 16})
    elapsed = time.monotonic() - start
    assert len(flat(result.keyed_outputs(ENRICHED))) == 160
    # a full bucket of 100, then 60 more at 100 a second: at least 0.6 s
    assert elapsed >= 0.55
    assert result.metrics.snapshot()["task.Partition 0"]["profiles-rate-limit-waits"] > 0


def test_a_cache_in_front_of_a_remote_table_saves_its_calls() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        remote = RemoteTableDescriptor("remote-profiles").with_read_function(Profiles())
        cached = CachingTableDescriptor("profiles", remote).with_read_ttl(timedelta(minutes=1))
        table = d.get_table(cached)
        d.get_input_stream(VIEWS).join(table, Enrich()).send_to(d.get_output_stream(ENRICHED))

    views = [KV(name, "/") for name in ["ann", "bob"] * 50]
    result = run(app, [(VIEWS, views)], {ENRICHED: 1}, **{"task.max.concurrency": 4})
    assert len(flat(result.keyed_outputs(ENRICHED))) == 100
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["remote-profiles-gets"] <= 2  # one look-up per key, concurrent ones shared
    assert snapshot["profiles-cache-hits"] >= 98


ORDERS = KAFKA.get_input_descriptor("orders", KVSerde("string", "json"))
PAYMENTS = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
PAID = KAFKA.get_output_descriptor("paid", KVSerde("string", "json"))


class OrderPayment:
    """Samza's JoinFunction: an order and its payment, by order id."""

    def get_first_key(self, message: KV) -> Any:
        return message.key

    def get_second_key(self, message: KV) -> Any:
        return message.key

    def apply(self, order: KV, payment: KV) -> KV:
        return KV(order.key, {"order": order.value, "payment": payment.value})


def join_app(
    ttl: timedelta,
    op_id: str = "orders-payments",
    join_fn: Any = None,
    orders: Any = ORDERS,
    payments: Any = PAYMENTS,
) -> Any:
    """orders joined with payments (``OrderPayment`` unless ``join_fn``), sent to PAID."""

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(orders).join(
            d.get_input_stream(payments),
            OrderPayment() if join_fn is None else join_fn,
            "string",
            KVSerde("string", "json"),
            KVSerde("string", "json"),
            ttl,
            op_id,
        ).send_to(d.get_output_stream(PAID))

    return app


def test_a_stream_stream_join_in_processing_time_joins_each_pair_once_order_first() -> None:
    orders = [KV(f"o{i}", {"amount": i}) for i in range(5)]
    payments = [KV(f"o{i}", {"paid": True}) for i in (3, 1, 4, 9)]
    result = run(
        join_app(timedelta(minutes=5)),
        [(ORDERS, orders), (PAYMENTS, payments)],
        {PAID: 1},
    )
    out = flat(result.keyed_outputs(PAID))
    assert sorted(kv.key for kv in out) == ["o1", "o3", "o4"]
    assert all(kv.value["order"]["amount"] == int(kv.key[1]) for kv in out)
    assert all(kv.value["payment"] == {"paid": True} for kv in out)
    plan = result.metrics.snapshot()["task.Partition 0"]
    assert plan["orders-payments-messages-out"] == 3


def test_a_stream_stream_join_keeps_each_key_s_latest_and_a_none_key_joins_nothing() -> None:
    """docs/tables.md: "Each side keeps its latest message per key"; "a message whose key is
    None joins nothing". One stream, in order, split into orders and payments: of the two
    orders of o1 the payment after them joins the second only; an order and a payment
    without an id (key None) neither join each other nor are kept for a later message."""
    events = KAFKA.get_input_descriptor("events", KVSerde("string", "json"))

    class ById(OrderPayment):
        def get_first_key(self, message: KV) -> Any:
            return message.value["id"]

        def get_second_key(self, message: KV) -> Any:
            return message.value["id"]

        def apply(self, order: KV, payment: KV) -> KV:
            return KV(order.key, [order.value["n"], payment.value["n"]])

    def app(d: StreamApplicationDescriptor) -> None:
        stream = d.get_input_stream(events)
        stream.filter(lambda kv: kv.key == "order").join(
            stream.filter(lambda kv: kv.key == "payment"),
            ById(),
            "string",
            KVSerde("string", "json"),
            KVSerde("string", "json"),
            timedelta(minutes=5),
            "j",
        ).send_to(d.get_output_stream(PAID))

    messages = [
        KV("order", {"id": "o1", "n": 1}),
        KV("order", {"id": "o1", "n": 2}),
        KV("order", {"id": None, "n": 3}),
        KV("payment", {"id": None, "n": 4}),
        KV("payment", {"id": "o1", "n": 5}),
        KV("order", {"id": None, "n": 6}),
    ]
    result = run(app, [(events, messages)], {PAID: 1})
    assert flat(result.keyed_outputs(PAID)) == [KV("order", [2, 5])]
    snapshot = result.metrics.snapshot()["task.Partition 0"]
    assert snapshot["j-messages-out"] == 1


def timed(name: str) -> Any:
    return (
        KAFKA.get_input_descriptor(name, KVSerde("string", "json"))
        .with_timestamp(lambda kv: kv.value["t"])
        .with_watermarks(timedelta(hours=1))  # nothing late, whatever the interleaving
    )


def test_a_stream_stream_join_in_event_time_measures_the_ttl_in_event_time() -> None:
    orders, payments = timed("orders"), timed("payments")
    app = join_app(timedelta(seconds=60), "j", orders=orders, payments=payments)

    t0 = 1_700_000_000_000
    order_messages = [
        KV("a", {"t": t0}),
        KV("b", {"t": t0 + 1_000}),
        KV("c", {"t": t0 + 2_000}),
    ]
    payment_messages = [
        KV("a", {"t": t0 + 30_000}),  # 30 s after its order: joins
        KV("b", {"t": t0 + 200_000}),  # 199 s after: too late in event time
        KV("c", {"t": t0 - 50_000}),  # 52 s before its order (out of order): joins
    ]
    outputs = []
    for _ in range(2):  # a replay of the same input makes the same results
        runner = TestRunner.of(Lambda(app), {"task.window.ms": 5})
        runner.add_input_stream(orders, order_messages)
        runner.add_input_stream(payments, payment_messages)
        runner.add_output_stream(PAID, 1)
        result = runner.run(timeout=20)
        outputs.append(sorted(kv.key for kv in flat(result.keyed_outputs(PAID))))
    assert outputs == [["a", "c"], ["a", "c"]]
    # the plan says the join runs in event time
    plan = TestRunner.of(Lambda(app), {})
    plan.add_input_stream(orders, [])
    plan.add_input_stream(payments, [])
    plan.add_output_stream(PAID, 1)
    assert plan._plan()[1].plan.event_time_joins == frozenset({"j"})


def test_a_join_result_s_later_time_stays_with_the_result() -> None:
    """A join result goes on with the later of its two times; the message that made it
    keeps its own in the operators after it on other branches (here a window)."""
    events = timed("events")
    panes: list[Any] = []

    def app(d: StreamApplicationDescriptor) -> None:
        stream = d.get_input_stream(events)
        stream.filter(lambda kv: kv.value["side"] == "L").join(
            stream.filter(lambda kv: kv.value["side"] == "R"),
            OrderPayment(),
            "string",
            KVSerde("string", "json"),
            KVSerde("string", "json"),
            timedelta(minutes=1),
            "j",
        ).send_to(d.get_output_stream(PAID))
        window = Windows.tumbling_window(
            timedelta(seconds=10), lambda: [], lambda kv, ts: [*ts, kv.value["t"]]
        ).with_event_time()
        stream.window(window, "w").sink(lambda p, c, k: panes.append((p.key.pane_id, p.message)))

    messages = [KV("x", {"side": "R", "t": 15_000}), KV("x", {"side": "L", "t": 1_000})]
    result = run(app, [(events, messages)], {PAID: 1})
    assert len(flat(result.keyed_outputs(PAID))) == 1  # they joined, at 15 s
    assert sorted(panes) == [(0, [1_000]), (10_000, [15_000])]  # 1 s is in the pane of 0


class _PutsInBatches:
    """A remote store a batched table only puts to, with ``put_all_async`` (a subclass's)."""

    async def get_async(self, key: str) -> Any:
        return None

    async def put_async(self, key: str, value: Any) -> None:
        raise AssertionError("a batched table writes with put_all_async")

    async def delete_async(self, key: str) -> None:
        raise AssertionError("nothing is deleted")

    async def delete_all_async(self, keys: list[Any]) -> None:
        raise AssertionError("nothing is deleted")


def _last_checkpointed(runner: TestRunner) -> int:
    """The highest offset the running job's checkpoints cover (-1: none yet)."""
    from samzapy.checkpoint.memory import InMemoryCheckpointManager

    container = runner.container
    assert container is not None
    found = InMemoryCheckpointManager.checkpoints_for(container.checkpoint_namespace)
    return max((int(o) for c in found.values() for o in c.offsets.values()), default=-1)


async def test_a_join_s_watermark_does_not_go_back_when_an_idle_input_comes_back() -> None:
    idle = timedelta(milliseconds=200)
    orders = KAFKA.get_input_descriptor("orders", "json").with_timestamp(lambda m: m["t"])
    payments = KAFKA.get_input_descriptor("payments", "json").with_timestamp(lambda m: m["t"])
    orders, payments = orders.with_watermarks(timedelta(0), idle), payments.with_watermarks()
    joined: list[Any] = []

    class ByKey:
        def get_first_key(self, m: Any) -> Any:
            return m["k"]

        def get_second_key(self, m: Any) -> Any:
            return m["k"]

        def apply(self, order: Any, payment: Any) -> Any:
            return (order["t"], payment["t"])

    def build(d: StreamApplicationDescriptor, sink: Any) -> None:
        d.get_input_stream(orders).join(
            d.get_input_stream(payments), ByKey(), "string", "json", "json", timedelta(hours=1), "j"
        ).sink(lambda r, c, k: joined.append(r))

    live = Live(build, {orders: 1, payments: 1})
    live.send(orders, {"k": "a", "t": 1_000})
    live.send(payments, {"k": "b", "t": 50_000})
    await asyncio.sleep(1.0)  # orders idle: the join's watermark is the payments', 50 s
    live.send(payments, {"k": "c", "t": 50_000})
    await asyncio.sleep(0.2)
    live.send(orders, {"k": "c", "t": 2_000})  # orders come back, behind it: late
    await asyncio.sleep(0.2)
    result = await live.end()
    assert joined == []
    assert result.metrics.snapshot()["task.Partition 0"]["j-late-messages"] == 1


def test_the_join_sweeps_what_the_watermark_passed_by_more_than_the_ttl() -> None:
    from samzapy.api.system import TaskName
    from samzapy.operators.event_time import EventClock
    from samzapy.operators.stream_joins import JoinOperator
    from samzapy.storage.inmemory import InMemoryStorageEngine
    from samzapy.storage.serialized import SerializedKeyValueStore
    from samzapy.system.serde import SerdeRegistry

    registry = SerdeRegistry({})
    raw = registry.get("bytes")
    KV_JSON = KVSerde("string", "json")  # noqa: N806

    class Context:
        def __init__(self) -> None:
            self.config: dict[str, Any] = {}
            self.stores = {
                name: SerializedKeyValueStore(InMemoryStorageEngine(name, TaskName("t")), raw, raw)
                for name in ("j-L", "j-R")
            }

        def get_store(self, name: str) -> Any:
            return self.stores[name]

    context = Context()
    left, right = context.stores["j-L"], context.stores["j-R"]

    def kept(store: Any) -> list[bytes]:
        return sorted(kv.key for kv in store.all())

    join = JoinOperator("j", OrderPayment(), ("string", KV_JSON, KV_JSON), ttl_ms=1_000)
    join.open(context)
    join.event_time, join.clock = True, EventClock()
    for t, key in ((0, "a"), (500, "b"), (2_000, "c"), (2_500, "a")):
        join.clock.t = t
        join.take(KV(key, t), left=True)
    join.clock.t = 300
    join.take(KV("z", 300), left=False)
    assert kept(left) == [b"a", b"b", b"c"] and kept(right) == [b"z"]
    join.advance(1_600)
    join.tick()  # drops what is before 600: b (500), z (300); a was replaced at 2,500
    assert kept(left) == [b"a", b"c"] and kept(right) == []
    # a message the watermark passed is late: dropped, not kept, counted
    join.clock.t = 1_000
    assert join.take(KV("c", 1_000), left=False) is None
    assert join.late == 1 and kept(right) == []
    join.clock.t = 2_100
    # (through its side: a message whose result goes on is kept once it went, ``keep``)
    assert join.right.transform(KV("c", 2_100)) == [KV("c", {"order": 2_000, "payment": 2_100})]
    # a sweep looks at a bounded number of entries per tick, and goes on where it stopped
    join.advance(3_600)
    assert join.sweep(2_200, budget=2) == 1  # a (2,500), c (2,000): c is before 2,200
    assert kept(left) == [b"a"] and kept(right) == [b"c"]
    assert join.sweep(3_600, budget=2) == 1  # the right side's c (2,100)
    assert join.sweep(3_600, budget=2) == 1  # a new pass: the left side's a
    assert kept(left) == [] and kept(right) == []
    # a pass that ends knows the earliest time kept: no sweep is due before it expires
    join.clock.t = 10_000
    join.take(KV("d", 10_000), left=True)
    join.advance(10_000)
    join.tick()
    assert join.horizon == 10_000
    join.advance(10_900)
    join.tick()
    assert join.pass_floor == 10_000  # no new pass: 9,900 is older than anything kept
    join.advance(11_100)
    join.tick()
    assert join.pass_floor == 11_100 and kept(left) == []  # 10,100: d expired


def test_join_and_table_mistakes_are_config_errors_at_start_up() -> None:
    ttl = timedelta(seconds=1)

    def app_of(fn: Any) -> Any:
        def app(d: StreamApplicationDescriptor) -> None:
            fn(d)

        return app

    cases = [
        (
            lambda d: (
                d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json"))),
                d.get_table(RocksDbTableDescriptor("t", KVSerde("string", "json"))),
            ),
            r"table id 't' is used by two different descriptors",
        ),
        (
            lambda d: (
                d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json"))),
                d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json"))),
            ),
            r"two objects even if alike\): .*call get_table once per table",
        ),
        (
            lambda d: (
                d.get_input_stream(ORDERS)
                .join(
                    d.get_input_stream(PAYMENTS),
                    OrderPayment(),
                    "string",
                    None,
                    None,
                    timedelta(seconds=1),
                    None,
                )
                .send_to(d.get_output_stream(PAID))
            ),
            r"needs an op_id",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(
                d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json"))), OrderPayment()
            ),
            r"get_message_key",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(
                d.get_input_stream(PAYMENTS), Enrich(), "string", None, None, ttl, "pay"
            ),
            r"join 'pay': a stream-stream join's function needs .* has no get_first_key",
        ),
        (
            lambda d: (
                d.get_input_stream(ORDERS)
                .window(
                    __import__("samzapy").Windows.keyed_tumbling_window(
                        lambda m: m.key, timedelta(seconds=1)
                    ),
                    "t",
                )
                .sink(lambda *a: None)
                or d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json")))
            ),
            r"store 't' is claimed by window 't' and by table 't'",
        ),
    ]
    for fn, message in cases:
        runner = TestRunner.of(Lambda(app_of(fn)), {})
        runner.add_input_stream(ORDERS, [])
        runner.add_input_stream(PAYMENTS, [])
        runner.add_output_stream(PAID, 1)
        with pytest.raises(ConfigError, match=message):
            runner.run(timeout=5)


def pay(d: StreamApplicationDescriptor, key_serde: Any = "string", serde: Any = None) -> Any:
    return d.get_input_stream(ORDERS).join(
        d.get_input_stream(PAYMENTS),
        OrderPayment(),
        key_serde,
        serde,
        None,
        timedelta(seconds=10),
        "j",
    )


@pytest.mark.parametrize(
    ("describe", "message"),
    [
        (
            lambda d: (
                d.get_input_stream(ORDERS)
                .join(d.get_table(RemoteTableDescriptor("r")), Enrich())
                .sink(lambda *a: None)
            ),
            r"table 'r': a remote table needs a read function .* with_read_function",
        ),
        (
            lambda d: pay(d, key_serde="nosuch").sink(lambda *a: None),
            r"join 'j': its key serde: unknown serde 'nosuch'",
        ),
        (
            lambda d: pay(d, serde=KVSerde("string", "nosuch")).sink(lambda *a: None),
            r"join 'j': its message serde: unknown serde 'nosuch'",
        ),
    ],
)
def test_a_remote_table_without_reads_or_a_join_s_unknown_serde_fails_before_the_tasks(
    describe: Any, message: str
) -> None:
    runner = TestRunner.of(Lambda(describe))
    runner.add_input_stream(ORDERS, [KV("o1", 1)]).add_input_stream(PAYMENTS, [])
    with pytest.raises(ConfigError, match=message):
        runner.run(timeout=5)


def test_a_join_of_streams_partitioned_differently_is_refused_at_start_up() -> None:
    """Orders in 2 partitions, payments in 3: a key would be in partition murmur2 % 2 of one
    and % 3 of the other, and most pairs would never meet. partition_by one side gives it the
    job's count (the largest input's: 3) and the join runs."""
    orders = {p: [KV(f"o{p}", {"n": p})] for p in range(2)}
    payments: dict[int, list[KV]] = {p: [] for p in range(3)}
    for i in range(3):  # each where a producer's key hash puts it
        payments[partition_for(f"o{i}".encode(), 3)].append(KV(f"o{i}", {"paid": i}))

    def runner(describe: Any) -> TestRunner:
        return (
            TestRunner.of(Lambda(describe))
            .add_input_stream(ORDERS, orders)
            .add_input_stream(PAYMENTS, payments)
            .add_output_stream(PAID, 3)
        )

    with pytest.raises(
        ConfigError,
        match=r"join 'j' brings together streams with different "
        r"partition counts \(kafka.orders has 2, kafka.payments has 3\)",
    ):
        runner(lambda d: pay(d).send_to(d.get_output_stream(PAID))).run(timeout=5)

    def filled_from_payments(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(InMemoryTableDescriptor("paid", KVSerde("string", "json")))
        d.get_input_stream(PAYMENTS).send_to(table)
        d.get_input_stream(ORDERS).join(table, Enrich()).sink(lambda *a: None)

    with pytest.raises(ConfigError, match=r"stream-table-join '.*' brings together streams"):
        runner(filled_from_payments).run(timeout=5)

    def repartitioned(d: StreamApplicationDescriptor) -> None:
        by_id = d.get_input_stream(ORDERS).partition_by(
            lambda kv: kv.key, lambda kv: kv.value, KVSerde("string", "json"), "by-id"
        )
        by_id.join(
            d.get_input_stream(PAYMENTS),
            OrderPayment(),
            "string",
            None,
            None,
            timedelta(seconds=10),
            "j",
        ).send_to(d.get_output_stream(PAID))

    assert len(flat(runner(repartitioned).run(timeout=10).outputs(PAID))) == 2


def test_a_task_class_reaches_its_stores_as_tables_and_is_told_of_a_missing_one() -> None:
    from samzapy import InitableTask, StreamTask, TableError

    seen: list[Any] = []

    class Counting(StreamTask, InitableTask):
        def init(self, context: Any) -> None:
            self.table = context.get_table("counts")
            with pytest.raises(TableError, match=r"table 'nope'.*stores: counts"):
                context.get_table("nope")

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            word = envelope.message
            self.table.put(word, (self.table.get(word) or 0) + 1)
            if word == "x":
                self.table.put("a", None)  # None deletes, as in Samza's tables
            seen.append(dict(self.table.get_all(["a", "b"])))

    config = {
        "stores.counts.factory": "inmemory",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "json",
    }
    TestRunner(Counting, config).add_input("words", ["a", "b", "a", "x"]).run(timeout=10)
    assert seen == [{"a": 1}, {"a": 1, "b": 1}, {"a": 2, "b": 1}, {"b": 1}]


def test_a_join_key_its_serde_cannot_encode_fails_naming_the_operator() -> None:
    class ByObject(OrderPayment):
        def get_first_key(self, message: KV) -> Any:
            return object()

    app = join_app(timedelta(minutes=1), "jj", ByObject())
    with pytest.raises(TaskError, match=r"orders#0 at offset 0.*operator 'jj' \(join\)"):
        run(app, [(ORDERS, [KV("a", 1)]), (PAYMENTS, [])], {PAID: 1})


def test_writes_of_one_key_to_a_remote_table_land_in_input_order() -> None:
    landed: list[tuple[str, Any]] = []

    class Store:
        async def get_async(self, key: str) -> Any:
            return None

        async def put_async(self, key: str, value: Any) -> None:
            # the earlier a write, the longer it takes: they would land out of order
            await asyncio.sleep(0.001 * (10 - value % 10))
            landed.append((key, value))

        async def delete_async(self, key: str) -> None:
            landed.append((key, None))

    def app(d: StreamApplicationDescriptor) -> None:
        store = Store()
        remote = RemoteTableDescriptor("state").with_read_function(store)
        table = d.get_table(remote.with_write_function(store))
        d.get_input_stream(VIEWS).send_to(table)

    updates = [KV(key, i) for i in range(10) for key in ("a", "b")]
    run(app, [(VIEWS, updates)], {}, **{"task.max.concurrency": 8})
    for key in ("a", "b"):
        assert [v for k, v in landed if k == key] == list(range(10))
    assert len({k for k, _ in landed[:4]}) == 2  # the keys' writes overlapped


def test_a_table_the_application_did_not_describe_is_named_as_such() -> None:
    class Uses:
        def init(self, context: Any) -> None:
            context.get_table("nope")

        def apply(self, message: Any) -> Any:
            return message

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_table(InMemoryTableDescriptor("profiles", KVSerde("string", "json")))
        d.get_input_stream(VIEWS).map(Uses()).sink(lambda *a: None)

    with pytest.raises(
        TaskError,
        match=r"table 'nope', which the application did not describe "
        r"\(tables: profiles; .*stores.nope.factory",
    ):
        run(app, [(VIEWS, [KV("ann", "/a")])], {})


def test_a_message_is_not_checkpointed_before_its_batched_remote_write_landed() -> None:
    """docs/tables.md: with ``with_write_batch`` a write completes when its batch did, so a
    message is not checkpointed before its write landed. Each batch takes 30 ms to land while
    the task commits every 5 ms; as each batch starts and as it ends, the input's checkpoint
    covers none of its messages yet."""
    from samzapy.api.system import TaskName

    seen: list[tuple[int, int, int]] = []  # a batch's first offset, the checkpoint then, after
    landed: list[int] = []
    runners: list[TestRunner] = []

    def checkpointed() -> int:
        return _last_checkpointed(runners[0])

    class Store(_PutsInBatches):
        async def put_all_async(self, entries: list[Any]) -> None:
            at_start = checkpointed()
            await asyncio.sleep(0.03)
            seen.append((min(value for _, value in entries), at_start, checkpointed()))
            landed.extend(value for _, value in entries)  # each value is its message's offset

    def app(d: StreamApplicationDescriptor) -> None:
        store = Store()
        remote = RemoteTableDescriptor("state").with_read_function(store)
        batched = remote.with_write_function(store).with_write_batch(4, timedelta(milliseconds=5))
        d.get_input_stream(VIEWS).send_to(d.get_table(batched))

    runner = TestRunner.of(Lambda(app), {"task.commit.ms": 5, "task.max.concurrency": 16})
    runners.append(runner)
    runner.add_input_stream(VIEWS, [KV(f"k{i}", i) for i in range(40)])
    result = runner.run(timeout=20)
    assert sorted(landed) == list(range(40))
    assert [(first, start, end) for first, start, end in seen if max(start, end) >= first] == []
    assert any(start >= 0 for _, start, _ in seen), "commits ran while batches were landing"
    assert list(result.checkpoints[TaskName.for_partition(0)].values()) == ["39"]


async def test_a_commit_waits_for_a_batch_not_full_and_takes_no_message_meanwhile() -> None:
    """docs/tables.md: "A task takes no message while a commit or a tick ... waits for the
    messages in flight ...: a batch that is not full then waits out its max_delay (as in
    Samza)".
    Six writes go into batches of four: the first four go at once, the last two wait 600 ms.
    A commit comes due meanwhile (every 50 ms), so the four messages sent 200 ms later are
    not taken to fill the batch: it goes with two writes once its delay ran out, and the
    four go after the commit."""
    from samzapy.api.system import TaskName

    calls: list[tuple[list[str], float, int]] = []  # the keys, when, the checkpoint then
    three = asyncio.Event()
    runners: list[TestRunner] = []

    def checkpointed() -> int:
        return _last_checkpointed(runners[0])

    class Store(_PutsInBatches):
        async def put_all_async(self, entries: list[Any]) -> None:
            calls.append(([key for key, _ in entries], time.monotonic(), checkpointed()))
            if len(calls) == 3:
                three.set()

    def app(d: StreamApplicationDescriptor) -> None:
        store = Store()
        remote = RemoteTableDescriptor("state").with_read_function(store)
        batched = remote.with_write_function(store).with_write_batch(4, timedelta(milliseconds=600))
        d.get_input_stream(VIEWS).send_to(d.get_table(batched))

    runner = TestRunner.of(Lambda(app), {"task.commit.ms": 50, "task.max.concurrency": 8})
    runners.append(runner)
    runner.add_input_stream(VIEWS, {})
    runner.broker.create_stream(VIEWS.physical_name, 1)
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await asyncio.sleep(0.05)  # the container started, its commits under way
    sent = time.monotonic()
    for i in range(6):
        runner.broker.append(VIEWS.physical_name, 0, f"k{i}", i)
    await asyncio.sleep(0.2)
    for i in range(6, 10):
        runner.broker.append(VIEWS.physical_name, 0, f"k{i}", i)
    await asyncio.wait_for(three.wait(), timeout=5)
    runner.broker.end_stream(VIEWS.physical_name)
    result = await job
    batches = [keys for keys, _, _ in calls]
    assert batches[:2] == [["k0", "k1", "k2", "k3"], ["k4", "k5"]]
    # The rest go after the commit, in order: in one batch, or in more where a later commit
    # came due before all four were taken (a busy machine's timing).
    assert [key for keys in batches[2:] for key in keys] == ["k6", "k7", "k8", "k9"]
    (_, first_at, _), (_, second_at, second_cp), (_, _, third_cp) = calls[:3]
    assert first_at - sent < 0.2  # full: at once
    assert second_at - sent >= 0.58  # its delay, though a commit was due all along
    assert second_cp <= 3  # the commit waits for it (offsets 4 and 5 in flight)
    assert third_cp >= 5  # the commit came before the next messages were taken
    assert list(result.checkpoints[TaskName.for_partition(0)].values()) == ["9"]
