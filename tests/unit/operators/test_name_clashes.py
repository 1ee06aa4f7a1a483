"""Names an application's parts make from unique ids that still meet: a window's changelog
that is a ``partition_by``'s or ``broadcast``'s stream, a table's changelog, an input or an
output; two stores on one changelog; a job-file store under a window's or a join's name.
The planner refuses each when the application is planned (start-up, ``samzapy validate``,
``samzapy plan``), naming both parts and the name; the names it makes are the same as ever.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_table_plan import Join

from samzapy import (
    KV,
    ConfigError,
    KafkaSystemDescriptor,
    KVSerde,
    RocksDbTableDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
    Windows,
)
from samzapy.config import Config
from samzapy.operators.application import load_application
from samzapy.operators.plan import plan_application
from samzapy.testing import TestRunner

JOB = {"job.name": "shop", "job.id": "1"}
KAFKA = KafkaSystemDescriptor("kafka")
ORDERS = KAFKA.get_input_descriptor("orders", KVSerde("string", "json"))
OUT = KAFKA.get_output_descriptor("out", KVSerde("string", "json"))
KV_JSON = KVSerde("string", "json")


def plan(fn: Any, config: dict[str, Any] | None = None) -> Any:
    config = {**JOB, **(config or {})}
    desc = StreamApplicationDescriptor(config)
    fn(desc)
    return plan_application(desc, config, app="t:App")


def count() -> Any:
    return Windows.keyed_tumbling_window(lambda m: m.key, timedelta(minutes=1), lambda: 0, _add)


def _add(m: Any, n: int) -> int:
    return n + 1


def window(op_id: str, *more: Any) -> Any:
    """An application with window ``op_id`` over the orders, then ``more(d, orders)``."""

    def app(d: StreamApplicationDescriptor) -> None:
        orders = d.get_input_stream(ORDERS)
        orders.window(count(), op_id).sink(lambda p, c, k: None)
        for build in more:
            build(d, orders)

    return app


def partition_by(op_id: str) -> Any:
    def build(d: StreamApplicationDescriptor, orders: Any) -> None:
        orders.partition_by(lambda m: m.key, lambda m: m.value, KV_JSON, op_id).sink(
            lambda m, c, k: None
        )

    return build


def broadcast(op_id: str) -> Any:
    def build(d: StreamApplicationDescriptor, orders: Any) -> None:
        orders.broadcast("json", op_id).sink(lambda m, c, k: None)

    return build


def table(table_id: str, changelog: str | None = None) -> Any:
    def build(d: StreamApplicationDescriptor, orders: Any) -> None:
        descriptor = RocksDbTableDescriptor(table_id, KV_JSON).with_changelog_enabled()
        if changelog is not None:
            descriptor = descriptor.with_changelog_stream(changelog)
        orders.send_to(d.get_table(descriptor))

    return build


def output(d: StreamApplicationDescriptor, orders: Any) -> None:
    orders.send_to(d.get_output_stream(KAFKA.get_output_descriptor("sent", KV_JSON)))


def join(d: StreamApplicationDescriptor, orders: Any) -> None:
    payments = d.get_input_stream(KAFKA.get_input_descriptor("payments", KV_JSON))
    orders.join(payments, Join(), "string", KV_JSON, KV_JSON, timedelta(minutes=2), "j").sink(
        lambda m, c, k: None
    )


@pytest.mark.parametrize(
    ("app", "config", "error"),
    [
        (
            window("partition_by-x", partition_by("x-changelog")),
            {},
            r"the intermediate stream of partition_by 'x-changelog' and the changelog of "
            r"window 'partition_by-x' \(store 'partition_by-x'\) are both stream "
            r"kafka\.shop-1-partition_by-x-changelog: one stream cannot be both",
        ),
        (
            window("broadcast-x", broadcast("x-changelog")),
            {},
            r"broadcast 'x-changelog' and the changelog of window 'broadcast-x' .* "
            r"kafka\.shop-1-broadcast-x-changelog",
        ),
        (
            window("table-t", table("t-changelog")),
            {},
            r"the changelog of table 't-changelog' \(store 't-changelog'\) and the changelog "
            r"of window 'table-t' \(store 'table-t'\) are both stream "
            r"kafka\.shop-1-table-t-changelog",
        ),
        (
            window("w", table("t", changelog="shop-1-w-changelog")),
            {},
            r"table 't' .* and the changelog of window 'w' .* kafka\.shop-1-w-changelog",
        ),
        (
            window("w"),
            {"streams.orders.samza.physical.name": "shop-1-w-changelog"},
            r"input stream 'orders' and the changelog of window 'w' \(store 'w'\) are both "
            r"stream kafka\.shop-1-w-changelog",
        ),
        (
            window("w", output),
            {"streams.sent.samza.physical.name": "shop-1-w-changelog"},
            r"output stream 'sent' and the changelog of window 'w'",
        ),
        (
            window("w", partition_by("p")),
            {"streams.orders.samza.physical.name": "shop-1-partition_by-p"},
            r"input stream 'orders' and the intermediate stream of partition_by 'p' are both "
            r"stream kafka\.shop-1-partition_by-p",
        ),
        (
            window("w"),
            {
                "stores.counts.factory": "inmemory",
                "stores.counts.changelog": "kafka.shop-1-w-changelog",
            },
            r"the changelog of the job file's store 'counts' and the changelog of window 'w' "
            r"\(store 'w'\) are both stream kafka\.shop-1-w-changelog",
        ),
        (
            window("w"),
            {"stores.w.changelog": "kafka.orders"},
            r"input stream 'orders' and the changelog of window 'w' .* kafka\.orders",
        ),
        (
            window("w"),
            {"stores.w.factory": "inmemory", "stores.w.key.serde": "string"},
            r"store 'w' is the store of window 'w', which keeps bytes it serializes itself, "
            r"and the job file gives it stores\.w\.key\.serde: 'string'",
        ),
        (
            window("w", join),
            {"stores.j-R.msg.serde": "json"},
            r"store 'j-R' is the store of join 'j', which keeps bytes it serializes itself, "
            r"and the job file gives it stores\.j-R\.msg\.serde: 'json'",
        ),
        (
            window("w", join, table("t", changelog="shop-1-join-j-L")),
            {},
            r"the changelog of join 'j' \(store 'j-L'\) and the changelog of table 't' "
            r"\(store 't'\) are both stream kafka\.shop-1-join-j-L",
        ),
        (
            window("w", table("w")),
            {},
            r"store 'w' is claimed by window 'w' and by table 'w'",
        ),
    ],
    ids=[
        "window-changelog=partition_by",
        "window-changelog=broadcast",
        "window-changelog=table-changelog",
        "window-changelog=table-changelog-stream",
        "window-changelog=input",
        "window-changelog=output",
        "partition_by=input",
        "window-changelog=job-file-store-changelog",
        "job-file-changelog=input",
        "job-file-store-serde-on-window-store",
        "job-file-store-serde-on-join-store",
        "join-changelog=table-changelog-stream",
        "window-store=table-store",
    ],
)
def test_two_parts_that_claim_one_stream_or_store_are_refused_naming_both(
    app: Any, config: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError, match=error):
        plan(app, config)


def second_input(physical: str | None) -> Any:
    """Input ``also`` (on stream ``physical`` when given) sent to the output."""

    def build(d: StreamApplicationDescriptor, orders: Any) -> None:
        also = KAFKA.get_input_descriptor("also", KV_JSON)
        if physical is not None:
            also = also.with_physical_name(physical)
        d.get_input_stream(also).send_to(d.get_output_stream(OUT))

    return build


@pytest.mark.parametrize(
    ("app", "config"),
    [
        (window("w", second_input("orders")), {}),
        (window("w", second_input(None)), {"streams.also.samza.physical.name": "orders"}),
    ],
    ids=["by-descriptor", "by-job-file"],
)
def test_two_inputs_on_one_stream_are_refused(app: Any, config: dict[str, Any]) -> None:
    """Two input descriptors of one physical stream became one input of the job (task.inputs
    named it twice), and its messages reached only one of the two inputs' operators: the
    other's chain got nothing, without a word."""
    with pytest.raises(
        ConfigError,
        match=r"input stream 'orders' and input stream 'also' are both stream kafka\.orders: "
        r"an input is read once: describe it once",
    ):
        plan(app, config)


def test_two_inputs_on_one_stream_in_the_test_runner_are_refused() -> None:
    also = KAFKA.get_input_descriptor("also", KV_JSON).with_physical_name("orders")

    class Twice(StreamApplication):
        def describe(self, app_desc: StreamApplicationDescriptor) -> None:
            out = app_desc.get_output_stream(OUT)
            app_desc.get_input_stream(ORDERS).send_to(out)
            app_desc.get_input_stream(also).map(lambda kv: KV(kv.key, "again")).send_to(out)

    runner = TestRunner.of(Twice).add_input_stream(ORDERS, [KV("o1", 1)]).add_output_stream(OUT)
    with pytest.raises(ConfigError, match=r"are both stream kafka\.orders"):
        runner.run(timeout=10)


def test_the_names_the_planner_makes_are_kept_and_may_sit_side_by_side() -> None:
    """Every name as before, with ids that come close without meeting: a window ``x``, a
    partition_by and a table ``x-changelog``, a broadcast ``changelog``, an output named as a
    store; the job file may tune a window's store with keys other than its serdes."""

    def app(d: StreamApplicationDescriptor) -> None:
        orders = d.get_input_stream(ORDERS)
        orders.window(count(), "x").sink(lambda p, c, k: None)
        partition_by("x-changelog")(d, orders)
        broadcast("changelog")(d, orders)
        table("x-changelog")(d, orders)
        orders.send_to(d.get_output_stream(OUT))

    config = {
        "stores.x.factory": "inmemory",
        "stores.x.key.serde": "bytes",
        "streams.out.samza.physical.name": "x",
    }
    planned = plan(app, config)
    assert planned.config["stores.x.changelog"] == "kafka.shop-1-x-changelog"
    assert planned.config["stores.x-changelog.changelog"] == "kafka.shop-1-table-x-changelog"
    assert [s.stream_id for s in planned.intermediates] == [
        "shop-1-partition_by-x-changelog",
        "shop-1-broadcast-changelog",
    ]


def test_a_job_file_serde_key_left_empty_on_a_window_or_join_store_is_not_set() -> None:
    """``stores.w.key.serde:`` (None) means "not set", as for every key: it declares no
    serde, so it is no other store under the window's (or the join's) name."""
    config = {"stores.w.key.serde": None, "stores.w.msg.serde": None}
    assert plan(window("w"), config).config["stores.w.changelog"] == "kafka.shop-1-w-changelog"
    plan(window("w", join), {"stores.j-L.key.serde": None, "stores.j-R.msg.serde": None})


class _Clashing(StreamApplication):
    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        window("partition_by-x", partition_by("x-changelog"))(app_desc)


def test_a_clash_is_a_start_up_error_naming_the_application(tmp_path: Path) -> None:
    """What ``samzapy run``, ``validate`` and ``plan`` load. (The job used to start, and fail
    at its first message with an error about the serde of the stream that was both.)"""
    with pytest.raises(ConfigError, match=r"app\.class: .*_Clashing: the intermediate stream"):
        load_application(Config(JOB), _Clashing)
    runner = TestRunner.of(_Clashing, {"job.intermediate.stream.partitions": 1})
    runner.add_input_stream(ORDERS, [KV("a", {"n": 1})])
    with pytest.raises(ConfigError, match=r"-partition_by-x-changelog: one stream cannot"):
        runner.run(timeout=10)
