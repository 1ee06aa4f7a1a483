"""What windows add to an application's plan: a store per window with its changelog, the
clock they need, what ``samzapy plan`` shows of them, and the windows it refuses."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import structlog

from samzapy import (
    KV,
    AccumulationMode,
    ConfigError,
    FileSystemDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    StreamApplication,
    StreamApplicationDescriptor,
    Triggers,
    Windows,
)
from samzapy.cli.plan import _text
from samzapy.config import Config
from samzapy.operators.application import load_application
from samzapy.operators.plan import plan_application

JOB = {"job.name": "wc", "job.id": "2"}
KAFKA = KafkaSystemDescriptor("kafka")
VIEWS = KAFKA.get_input_descriptor("views", "json")
OUT = KAFKA.get_output_descriptor("counts", KVSerde("string", "long"))


def plan(fn: Any, config: dict[str, Any] | None = None) -> Any:
    config = {**JOB, **(config or {})}
    desc = StreamApplicationDescriptor(config)
    fn(desc)
    return plan_application(desc, config, app="t:App")


def counting(interval_s: int = 60) -> Any:
    return Windows.keyed_tumbling_window(
        lambda m: m["user"], timedelta(seconds=interval_s), lambda: 0, lambda m, n: n + 1
    )


def window_app(window: Any, op_id: str = "per-user", views: Any = VIEWS) -> Any:
    def app(d: StreamApplicationDescriptor) -> None:
        (
            d.get_input_stream(views)
            .window(window, op_id)
            .map(lambda pane: KV(pane.key.key, pane.message))
            .send_to(d.get_output_stream(OUT))
        )

    return app


def test_a_window_gets_a_store_named_after_its_op_id_with_a_changelog_on_its_system() -> None:
    planned = plan(window_app(counting().with_event_time(timedelta(seconds=5))))
    keys = planned.config
    assert {k: v for k, v in keys.items() if k.startswith("stores.")} == {
        "stores.per-user.factory": "rocksdb",
        "stores.per-user.key.serde": "bytes",
        "stores.per-user.msg.serde": "bytes",
        "stores.per-user.changelog": "kafka.wc-2-per-user-changelog",
    }
    # In event time, with no timed trigger and no idle timeout, it needs no clock.
    assert "task.window.ms" not in keys
    assert planned.stores == ("per-user",)
    window = next(op for op in planned.to_dict()["operators"] if op["kind"] == "window")
    assert window == {
        "op_id": "per-user",
        "kind": "window",
        "inputs": ["stream:views"],
        "window": "keyed tumbling interval 60000 ms, event time, allowed lateness 5000 ms, "
        "discarding",
        "accumulation_mode": "discarding",
        "store": "per-user",
        "store_factory": "rocksdb",
        "serdes": {"key": None, "value": None},
    }
    text = _text(planned.to_dict())
    assert "  per-user (window) <- stream:views\n" in text
    assert (
        "    keyed tumbling interval 60000 ms, event time, allowed lateness 5000 ms, "
        "discarding; store per-user (rocksdb)\n" in text
    )
    assert "stores:\n  per-user" in text
    assert "\nintermediate streams: none\n" in text  # a section with nothing says so


@pytest.mark.parametrize(
    ("window", "clock"),
    [
        (counting(), True),  # processing time: panes fire by the clock
        (counting().with_event_time(), False),
        (counting().with_event_time().set_early_trigger(Triggers.count(10)), True),
        (counting().with_event_time().set_late_trigger(Triggers.count(2)), True),
    ],
)
def test_a_window_that_needs_a_clock_gets_task_window_ms(window: Any, clock: bool) -> None:
    keys = plan(window_app(window)).config
    assert keys.get("task.window.ms") == (100 if clock else None)


def test_an_input_with_an_idle_timeout_gets_a_clock_and_its_watermarks_go_downstream() -> None:
    views = KAFKA.get_input_descriptor("idle-views", "json").with_watermarks(
        timedelta(seconds=2), idle_timeout=timedelta(seconds=30)
    )
    keys = plan(window_app(counting().with_event_time(), views=views)).config
    assert keys["task.window.ms"] == 100
    # So partition_by's intermediate stream gets watermarks from this input, too.
    assert keys["streams.idle-views.samza.watermark.lateness.ms"] == 2000


def test_the_job_files_task_window_ms_wins() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        window_app(counting())(d)

    loaded = load_application(Config({**JOB, "task.window.ms": 1000}), app=_App(app))
    assert loaded.config.get("task.window.ms") == 1000


def test_a_graph_with_a_remote_table_moves_its_watermarks_at_a_tick_it_gets() -> None:
    """A remote table's look-ups make the operator task asynchronous, as a flat_map_async
    does: its with_watermarks watermarks move at the tick, which the planner must set."""
    views = KAFKA.get_input_descriptor("timed", "json").with_watermarks()

    class Read:
        async def get_async(self, key: str) -> Any:
            return key

    class Joined:
        def get_message_key(self, message: Any) -> Any:
            return message["user"]

        def get_record_key(self, record: Any) -> Any:
            return record.key

        def apply(self, message: Any, record: Any) -> Any:
            return message

    def app(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(RemoteTableDescriptor("users").with_read_function(Read()))
        joined = d.get_input_stream(views).join(table, Joined())
        joined.window(counting().with_event_time(), "per-user").map(
            lambda pane: KV(pane.key.key, pane.message)
        ).send_to(d.get_output_stream(OUT))

    assert plan(app).config["task.window.ms"] == 100
    with pytest.raises(ConfigError, match="of input 'timed', which reach window 'per-user'"):
        plan(app, {"task.window.ms": -1})


IDLE = KAFKA.get_input_descriptor("idle", "json").with_watermarks(idle_timeout=timedelta(seconds=1))


@pytest.mark.parametrize(
    ("app", "needs"),
    [
        (window_app(counting()), "window 'per-user' in processing time"),
        (
            window_app(
                counting()
                .with_event_time()
                .set_early_trigger(Triggers.time_since_first_message(timedelta(seconds=5)))
            ),
            "the time triggers of window 'per-user'",
        ),
        (
            window_app(counting().with_event_time(), views=IDLE),
            "the idle timeout of input 'idle', which reaches window 'per-user'",
        ),
    ],
)
@pytest.mark.parametrize("off", [-1, 0, "-1"])
def test_a_job_file_that_turns_off_the_tick_a_window_needs_is_refused(
    app: Any, needs: str, off: Any
) -> None:
    """docs/configuration.md, task.window.ms: the job file's value wins, but -1 or 0 (off)
    where a window needs the tick left its processing-time panes, time triggers or idle
    inputs waiting for the end of the input: for ever on one that does not end."""
    with pytest.raises(ConfigError, match=rf"task.window.ms is {off}, .*{needs}") as caught:
        plan(app, {"task.window.ms": off})
    assert caught.value.key == "task.window.ms"


def test_a_window_that_needs_no_tick_runs_with_it_off() -> None:
    """A count trigger fires on messages, an event-time window on watermarks: the tick off
    is the job file's choice."""
    window = counting().with_event_time().set_early_trigger(Triggers.repeat(Triggers.count(2)))
    loaded = load_application(Config({**JOB, "task.window.ms": -1}), app=_App(window_app(window)))
    assert loaded.config.get("task.window.ms") == -1


def test_an_in_memory_window_store_and_no_changelog_without_a_kafka_or_memory_system() -> None:
    files = FileSystemDescriptor("files")
    lines = files.get_input_descriptor("lines", "json")
    out = files.get_output_descriptor("counted", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        d.get_input_stream(lines).window(counting().with_store("inmemory"), "per-user").map(
            lambda pane: pane.message
        ).send_to(d.get_output_stream(out))

    keys = plan(app).config
    assert keys["stores.per-user.factory"] == "inmemory"
    assert "stores.per-user.changelog" not in keys


def test_the_plan_shows_a_windows_accumulation_mode_and_store_kind() -> None:
    """What with_store and set_accumulation_mode set is in the plan, text and JSON."""
    window = (
        counting()
        .with_store("inmemory")
        .set_early_trigger(Triggers.count(2))
        .set_accumulation_mode(AccumulationMode.ACCUMULATING)
    )
    document = plan(window_app(window)).to_dict()
    op = next(op for op in document["operators"] if op["kind"] == "window")
    assert (op["accumulation_mode"], op["store"], op["store_factory"]) == (
        "accumulating",
        "per-user",
        "inmemory",
    )
    assert (
        "    keyed tumbling interval 60000 ms, processing time, early count(2), accumulating; "
        "store per-user (inmemory)\n" in _text(document)
    )


@pytest.mark.parametrize(
    ("window", "message"),
    [
        (
            Windows.keyed_session_window(
                lambda m: m, timedelta(seconds=5), lambda: 0, lambda m, n: n + 1
            ).with_event_time(),
            "needs merger=fn",
        ),
        (
            Windows.session_window(timedelta(seconds=5)).set_early_trigger(Triggers.count(3)),
            "not supported on session windows",
        ),
    ],
)
def test_windows_the_planner_refuses(window: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan(window_app(window))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda s: s.window("not a window", "w"), "window 'w' takes a Window made by"),
        (lambda s: s.window(counting(), None), "window needs an op_id"),
        (
            lambda s: s.window(counting().with_late_output("views"), "w"),
            "window 'w': with_late_output takes an OutputStream",
        ),
        (lambda s: s.window(counting(), "views"), "op_id 'views' is used twice"),
    ],
)
def test_window_is_checked_when_described(build: Any, message: str) -> None:
    desc = StreamApplicationDescriptor(JOB)
    with pytest.raises(ConfigError, match=message):
        build(desc.get_input_stream(VIEWS))


class _App(StreamApplication):
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        self.fn(app_desc)


def warned(fn: Any) -> list[dict[str, Any]]:
    with structlog.testing.capture_logs() as logs:
        load_application(Config(dict(JOB)), app=_App(fn))
    return [e for e in logs if e["event"] == "window_without_watermarks"]


def test_an_event_time_window_over_an_input_without_watermarks_is_warned_of() -> None:
    plain = KAFKA.get_input_descriptor("plain-views", "json")
    framed = KAFKA.get_input_descriptor("framed-views", "json").with_framed()
    generated = KAFKA.get_input_descriptor("timed-views", "json").with_watermarks()

    def through_partition_by(views: Any) -> Any:
        def app(d: StreamApplicationDescriptor) -> None:
            (
                d.get_input_stream(views)
                .partition_by(lambda m: m["user"], lambda m: m, KVSerde("string", "json"), "pb")
                .window(counting().with_event_time(), "per-user")
                .map(lambda pane: KV(pane.key.key, pane.message))
                .send_to(d.get_output_stream(OUT))
            )

        return app

    [warning] = warned(through_partition_by(plain))
    assert warning["operator"] == "per-user" and warning["stream"] == "plain-views"
    assert "fire at end-of-stream only" in warning["reason"]
    assert warned(through_partition_by(framed)) == []
    assert warned(through_partition_by(generated)) == []
    assert warned(window_app(counting())) == []  # processing time needs no watermarks


def test_a_join_with_watermarks_on_one_side_only_is_warned_of_as_processing_time() -> None:
    timed = KAFKA.get_input_descriptor("timed-orders", KVSerde("string", "json")).with_watermarks()
    plain = KAFKA.get_input_descriptor("plain-payments", KVSerde("string", "json"))
    also_timed = KAFKA.get_input_descriptor("timed-payments", KVSerde("string", "json"))
    also_timed.with_watermarks()

    class Pair:
        def get_first_key(self, m: Any) -> Any:
            return m.key

        def get_second_key(self, m: Any) -> Any:
            return m.key

        def apply(self, a: Any, b: Any) -> Any:
            return a

    def join_app(other: Any) -> Any:
        def app(d: StreamApplicationDescriptor) -> None:
            d.get_input_stream(timed).join(
                d.get_input_stream(other), Pair(), "string", None, None, timedelta(seconds=5), "j"
            ).sink(lambda *a: None)

        return app

    with structlog.testing.capture_logs() as logs:
        load_application(Config(dict(JOB)), app=_App(join_app(plain)))
        load_application(Config(dict(JOB)), app=_App(join_app(also_timed)))
    [warning] = [e for e in logs if e["event"] == "join_in_processing_time"]
    assert warning["operator"] == "j" and warning["streams"] == ["plain-payments"]


class _ById:
    def get_first_key(self, message: Any) -> Any:
        return message["id"]

    def get_second_key(self, message: Any) -> Any:
        return message["id"]

    def apply(self, first: Any, second: Any) -> Any:
        return [first, second]


def test_the_plan_shows_the_serdes_windows_and_joins_keep_their_state_with() -> None:
    """The serdes given to a window and a join (their stores' contents) are in the plan; one
    not given (the default state serde) is null in JSON and left out of the text."""
    clicks = KAFKA.get_input_descriptor("clicks", "json")

    def app(d: StreamApplicationDescriptor) -> None:
        views = d.get_input_stream(VIEWS)
        views.window(
            Windows.keyed_tumbling_window(
                lambda m: m["user"], timedelta(seconds=60), key_serde="string"
            ),
            "per-user",
        ).sink(lambda pane, collector, coordinator: None)
        views.join(
            d.get_input_stream(clicks), _ById(), "string", "json", None, timedelta(seconds=1), "j"
        ).sink(lambda pair, collector, coordinator: None)

    document = plan(app).to_dict()
    ops = {op["op_id"]: op for op in document["operators"]}
    assert ops["per-user"]["serdes"] == {"key": "string", "value": None}
    assert ops["j"]["serdes"] == {"key": "string", "message": "json", "other_message": None}
    text = _text(document)
    assert "; store per-user (rocksdb) [key string]\n" in text
    assert "; stores j-L, j-R [key string, message json]\n" in text
