"""The planner's part for tables and joins: store keys, changelogs, time domains, what
``samzapy plan`` shows, and the start-up errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from samzapy import (
    CachingTableDescriptor,
    ConfigError,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    StreamApplicationDescriptor,
    TableRetryPolicy,
)
from samzapy.operators.plan import plan_application
from samzapy.system.serde import JsonSerde

JOB = {"job.name": "shop", "job.id": "1"}
KAFKA = KafkaSystemDescriptor("kafka")
ORDERS = KAFKA.get_input_descriptor("orders", KVSerde("string", "json"))
PAYMENTS = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
OUT = KAFKA.get_output_descriptor("out", KVSerde("string", "json"))


def plan(fn: Any, config: dict[str, Any] | None = None) -> Any:
    desc = StreamApplicationDescriptor({**JOB, **(config or {})})
    fn(desc)
    return plan_application(desc, {**JOB, **(config or {})}, app="t:App")


class Join:
    def get_first_key(self, m: Any) -> Any:
        return m.key

    def get_second_key(self, m: Any) -> Any:
        return m.key

    def get_message_key(self, m: Any) -> Any:
        return m.key

    def get_record_key(self, r: Any) -> Any:
        return r.key

    def apply(self, a: Any, b: Any) -> Any:
        return a


class Reader:
    async def get_async(self, key: Any) -> Any:
        return None


def joined(orders: Any = ORDERS, payments: Any = PAYMENTS) -> Any:
    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(orders).join(
            d.get_input_stream(payments),
            Join(),
            "string",
            KVSerde("string", "json"),
            KVSerde("string", "json"),
            timedelta(minutes=2),
            "pay",
        ).send_to(d.get_output_stream(OUT))

    return app


def test_a_local_table_is_a_store_with_its_serdes_config_and_changelog() -> None:
    serde = JsonSerde()

    def app(d: StreamApplicationDescriptor) -> None:
        rocks = d.get_table(
            RocksDbTableDescriptor("profiles", KVSerde("string", serde))
            .with_changelog_enabled()
            .with_config("object.cache.size", 500)
        )
        memory = d.get_table(InMemoryTableDescriptor("seen", KVSerde("string", "json")))
        stream = d.get_input_stream(ORDERS)
        stream.send_to(rocks)
        stream.send_to(memory)

    p = plan(app)
    keys = p.config
    assert keys["stores.profiles.factory"] == "rocksdb"
    assert keys["stores.profiles.key.serde"] == "string"
    assert keys["stores.profiles.msg.serde"] == "profiles-msg"
    assert keys["serializers.registry.profiles-msg.class"] is serde
    assert keys["stores.profiles.object.cache.size"] == 500
    assert keys["stores.profiles.changelog"] == "kafka.shop-1-table-profiles"
    assert keys["stores.seen.factory"] == "inmemory"
    assert "stores.seen.changelog" not in keys
    assert p.stores == ("profiles", "seen")
    document = p.to_dict()
    assert document["tables"] == [
        {
            "table_id": "profiles",
            "kind": "rocksdb",
            "description": "rocksdb store profiles, changelogged",
        },
        {"table_id": "seen", "kind": "inmemory", "description": "inmemory store seen"},
    ]
    assert [op["writes"] for op in document["operators"]] == ["table:profiles", "table:seen"]


def test_a_remote_table_and_its_cache_have_no_store_and_say_what_they_are() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        remote = (
            RemoteTableDescriptor("remote")
            .with_read_function(Reader())
            .with_read_rate_limit(100)
            .with_read_retry_policy(TableRetryPolicy())
        )
        table = d.get_table(CachingTableDescriptor("profiles", remote).with_cache_size(10))
        d.get_input_stream(ORDERS).join(table, Join()).send_to(d.get_output_stream(OUT))

    p = plan(app)
    assert p.stores == ()
    assert [t.to_dict()["description"] for t in p.tables] == [
        "remote, read only, reads ≤ 100/s, retried",
        "cache of 10 (write-through) in front of remote",
    ]
    join = p.to_dict()["operators"][0]
    assert join["kind"] == "stream_table_join" and join["table"] == "profiles"


def test_a_stream_stream_join_keeps_two_changelogged_stores_and_a_clock() -> None:
    p = plan(joined())
    keys = p.config
    for side in ("L", "R"):
        assert keys[f"stores.pay-{side}.factory"] == "rocksdb"
        assert keys[f"stores.pay-{side}.key.serde"] == "bytes"
        assert keys[f"stores.pay-{side}.changelog"] == f"kafka.shop-1-join-pay-{side}"
    assert keys["task.window.ms"] == 100  # the purge of what expired
    (op,) = [o for o in p.to_dict()["operators"] if o["kind"] == "join"]
    assert op["inputs"] == ["stream:orders", "stream:payments"]
    assert op["join"] == "processing time, ttl 120000 ms; stores pay-L, pay-R"
    assert p.event_time_joins == frozenset()


@pytest.mark.parametrize("off", [-1, 0, "-1"])
def test_a_job_file_that_turns_off_the_tick_a_join_sweeps_at_is_refused(off: Any) -> None:
    """docs/tables.md: what expired is deleted from a join's stores by a sweep at each tick.
    With the tick off (task.window.ms -1 or 0) nothing ever swept them: they kept every key
    the join had seen, for ever, on an input that does not end."""
    with pytest.raises(
        ConfigError, match=rf"task.window.ms is {off}, .*the sweep of join 'pay'"
    ) as e:
        plan(joined(), {"task.window.ms": off})
    # What it would cost is said as it is: a join has nothing that "fires".
    assert "fire only at the end of the input" not in str(e.value)
    assert "its stores would keep every key, expired or not, for good" in str(e.value)
    plan(joined(), {"task.window.ms": 1000})  # any tick will do


def test_a_join_runs_in_event_time_only_when_every_input_carries_watermarks() -> None:
    orders = KAFKA.get_input_descriptor("orders", KVSerde("string", "json")).with_watermarks()
    payments = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
    assert plan(joined(orders, payments)).event_time_joins == frozenset()
    payments.with_watermarks()
    assert plan(joined(orders, payments)).event_time_joins == frozenset({"pay"})
    # or the job file says the stream carries them
    plain = KAFKA.get_input_descriptor("payments", KVSerde("string", "json"))
    framed = {"streams.payments.samza.framed": True}
    assert plan(joined(orders, plain), framed).event_time_joins == frozenset({"pay"})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda d: d.get_input_stream(ORDERS).send_to(
                d.get_table(
                    RocksDbTableDescriptor("t", KVSerde("string", "json")).with_changelog_enabled()
                )
            ),
            r"table 't' has a changelog, and the job has no kafka or memory system",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(
                d.get_input_stream(ORDERS), Join(), "string", None, None, timedelta(1), "j"
            ),
            r"get_input_stream was called twice",
        ),
        (
            lambda d: (s := d.get_input_stream(ORDERS)).join(
                s, Join(), "string", None, None, timedelta(1), "j"
            ),
            r"cannot be joined with itself",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(
                d.get_input_stream(PAYMENTS), Join(), "string", None, None, None, "j"
            ),
            r"join 'j' needs a ttl",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(
                d.get_input_stream(PAYMENTS),
                Join(),
                KVSerde("string", "json"),
                None,
                None,
                timedelta(1),
                "j",
            ),
            r"key_serde is the keys' serde",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).join(object(), Join()),
            r"join takes a MessageStream or a Table",
        ),
        (
            lambda d: d.get_table(RemoteTableDescriptor("r").with_read_function(object())),
            r"table 'r': the read function must have a coroutine method get_async",
        ),
        (
            lambda d: d.get_table(RemoteTableDescriptor("r").with_read_rate_limit(0)),
            r"the read rate limit must be a number of calls a second above zero",
        ),
        (
            lambda d: d.get_table(InMemoryTableDescriptor("bad id", KVSerde("string", "json"))),
            r"a table id must match",
        ),
        (
            lambda d: d.get_table(InMemoryTableDescriptor("t", "json")),
            r"a local table takes a KVSerde",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).send_to(
                d.get_table(RemoteTableDescriptor("r").with_read_function(Reader()))
            ),
            r"send_to_table 'send_to_table-\d+' writes to table 'r', a remote table without a "
            r"write function",
        ),
        (
            lambda d: d.get_input_stream(ORDERS).send_to(
                d.get_table(
                    CachingTableDescriptor(
                        "c", RemoteTableDescriptor("r").with_read_function(Reader())
                    )
                )
            ),
            r"writes to table 'c', a remote table without a write function",
        ),
    ],
)
def test_table_and_join_mistakes_are_errors_naming_what_is_wrong(build: Any, message: str) -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        build(d)

    with pytest.raises(ConfigError, match=message):
        plan(app, {"job.default.system": "files", "systems.files.samza.factory": "file"})


@pytest.mark.parametrize(
    "extra",
    [
        {"key_serde": "string"},
        {"message_serde": KVSerde("string", "json")},
        {"other_message_serde": "json"},
        {"ttl": timedelta(minutes=5)},
    ],
)
def test_a_stream_table_join_given_a_stream_joins_serdes_or_ttl_is_refused(
    extra: dict[str, Any],
) -> None:
    """A stream-table join reads the table as it is: it keeps no state and has no ttl, so a
    serde or ttl given to it (join(table, fn, "string", ..., ttl=...), written as for a
    stream-stream join) was silently ignored, and a ttl meant to bound what joins did not."""
    (name,) = extra

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(InMemoryTableDescriptor("t", KVSerde("string", "json")))
        d.get_input_stream(ORDERS).join(table, Join(), **extra).send_to(d.get_output_stream(OUT))

    with pytest.raises(ConfigError, match=rf"stream-table join takes no {name}"):
        plan(app)


def test_a_retry_policy_keeps_an_attempt_limit_given_with_a_delay() -> None:
    policy = TableRetryPolicy().with_stop_after_attempts(3).with_stop_after_delay(timedelta(1))
    assert policy.max_attempts == 3
    assert TableRetryPolicy().with_stop_after_delay(timedelta(seconds=1)).max_attempts is None
    backoff = TableRetryPolicy().with_exponential_backoff(
        timedelta(milliseconds=10), timedelta(milliseconds=50), 2
    )
    assert [backoff.sleep_before(n) for n in (2, 3, 4, 5)] == [0.01, 0.02, 0.04, 0.05]
