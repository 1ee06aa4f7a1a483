"""The planner and the descriptors: the keys an application yields, and its start-up errors."""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import pytest

from samzapy import (
    ConfigError,
    FileSystemDescriptor,
    InMemorySystemDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
    StreamApplicationDescriptor,
    Windows,
)
from samzapy.config import Config, resolve
from samzapy.operators.application import load_application
from samzapy.operators.plan import plan_application
from samzapy.system.serde import JsonSerde

JOB = {"job.name": "wc", "job.id": "2"}


def describe(fn: Any, config: dict[str, Any] | None = None) -> Any:
    desc = StreamApplicationDescriptor({**JOB, **(config or {})})
    fn(desc)
    return desc


def plan(fn: Any, config: dict[str, Any] | None = None) -> Any:
    return plan_application(describe(fn, config), {**JOB, **(config or {})}, app="t:App")


KAFKA = KafkaSystemDescriptor("kafka")


def test_descriptors_yield_the_keys_of_a_job_file() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka").with_bootstrap_servers(["127.0.0.1:9092"])
        kafka.with_producer_configs({"compression.type": "lz4"})
        views = kafka.get_input_descriptor("views", KVSerde("string", "json"))
        views.with_offset_default("oldest").with_physical_name("page-views")
        out = d.get_output_stream(kafka.get_output_descriptor("counts", "long"))
        d.get_input_stream(views).send_to(out)

    keys = plan(app).config
    assert keys == {
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
        "systems.kafka.producer.compression.type": "lz4",
        "streams.views.samza.system": "kafka",
        "streams.views.samza.physical.name": "page-views",
        "streams.views.samza.offset.default": "oldest",
        "streams.views.samza.key.serde": "string",
        "streams.views.samza.msg.serde": "json",
        "streams.counts.samza.system": "kafka",
        "streams.counts.samza.msg.serde": "long",
        "task.inputs": ["kafka.page-views"],
    }


def test_a_serde_object_is_registered_under_the_stream() -> None:
    serde = JsonSerde()

    def app(d: StreamApplicationDescriptor) -> None:
        views = d.get_input_stream(KAFKA.get_input_descriptor("views", serde))
        views.sink(lambda m, c, k: None)

    keys = plan(app).config
    assert keys["streams.views.samza.msg.serde"] == "views-msg"
    assert keys["serializers.registry.views-msg.class"] is serde
    resolved = resolve(Config({**JOB, **keys, "app.class": "t:App"}))
    assert resolved.serializers["views-msg"] is serde


def test_partition_by_streams_are_named_sized_and_fed_by_their_upstream_inputs() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
        words = lines.flat_map(str.split).partition_by(str, str, "string", "by-word")
        by_len = words.partition_by(lambda kv: len(kv.key), lambda kv: kv.key, "json", "by-len")
        by_len.sink(lambda m, c, k: None)

    # Digits in a string, as the job file's check takes them.
    assert plan(app, {"job.intermediate.stream.partitions": "+4"}).intermediates[0].partitions == 4
    p = plan(app, {"job.intermediate.stream.partitions": 6})
    first, second = p.intermediates
    assert first.stream_id == "wc-2-partition_by-by-word"
    assert second.stream_id == "wc-2-partition_by-by-len"
    assert (first.partitions, first.upstream) == (6, ("kafka.lines",))
    assert second.upstream == ("kafka.wc-2-partition_by-by-word",)
    keys = p.config
    assert keys["streams.wc-2-partition_by-by-word.samza.intermediate"] is True
    assert keys["streams.wc-2-partition_by-by-word.samza.key.serde"] == "string"
    assert keys["streams.wc-2-partition_by-by-len.samza.upstream.inputs"] == [
        "kafka.wc-2-partition_by-by-word"
    ]
    assert keys["task.inputs"] == [
        "kafka.lines",
        "kafka.wc-2-partition_by-by-word",
        "kafka.wc-2-partition_by-by-len",
    ]
    assert [(o.op_id, o.kind, o.inputs) for o in p.operators] == [
        ("flat_map-1", "flat_map", ("stream:lines",)),
        ("by-word", "partition_by", ("flat_map-1",)),
        ("by-len", "partition_by", ("stream:wc-2-partition_by-by-word",)),
        ("sink-1", "sink", ("stream:wc-2-partition_by-by-len",)),
    ]


def test_without_a_setting_a_partition_by_stream_is_sized_at_start_up() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
        lines.partition_by(str, str, "string", "p").sink(lambda m, c, k: None)

    (stream,) = plan(app).intermediates
    assert stream.partitions is None
    assert "streams.wc-2-partition_by-p.partitions" not in plan(app).config


def test_a_broadcast_stream_has_one_partition_every_task_reads() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
        lines.broadcast("json", "all").sink(lambda m, c, k: None)

    p = plan(app)
    assert p.config["streams.wc-2-broadcast-all.partitions"] == 1
    assert p.config["task.broadcast.inputs"] == ["kafka.wc-2-broadcast-all#0"]
    assert p.config["task.inputs"] == ["kafka.lines"]


def _broadcast_none(d: StreamApplicationDescriptor) -> None:
    lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
    lines.broadcast(None, "all").sink(lambda m, c, k: None)


def _keyed_broadcast_value_none(d: StreamApplicationDescriptor) -> None:
    lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", KVSerde("string", "json")))
    lines.broadcast(KVSerde("string", None), "all").sink(lambda m, c, k: None)


def _partition_by_key_none(d: StreamApplicationDescriptor) -> None:
    lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
    lines.partition_by(str, str, KVSerde(None, "json"), "p").sink(lambda m, c, k: None)


def _partition_by_value_none(d: StreamApplicationDescriptor) -> None:
    lines = d.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
    lines.partition_by(str, str, KVSerde("string", None), "p").sink(lambda m, c, k: None)


@pytest.mark.parametrize(
    ("app", "error"),
    [
        (_broadcast_none, r"^broadcast 'all' was given serde None, and its intermediate stream "),
        (_partition_by_value_none, r"^partition_by 'p' was given serde KVSerde\(string, None\)"),
        (_keyed_broadcast_value_none, r"^broadcast 'all' was given serde KVSerde\(string, None\)"),
        (_partition_by_key_none, r"^partition_by 'p' was given serde KVSerde\(None, json\)"),
    ],
)
def test_an_intermediate_stream_without_a_message_serde_is_an_error_when_planned(
    app: Any, error: str
) -> None:
    # Its messages and keys are framed as bytes: without a serde the first message failed the
    # task on Kafka (a str key), where the test runner's memory system passed it.
    which = "key" if app is _partition_by_key_none else "msg"
    with pytest.raises(ConfigError, match=error + rf".*set systems\.kafka\.samza\.{which}\.serde"):
        plan(app)
    # The system's serde, or the job file's for the stream, serves instead.
    assert plan(app, {f"systems.kafka.samza.{which}.serde": "json"}).intermediates
    broadcast = app in (_broadcast_none, _keyed_broadcast_value_none)
    stream_id = "wc-2-broadcast-all" if broadcast else "wc-2-partition_by-p"
    assert plan(app, {f"streams.{stream_id}.samza.{which}.serde": "json"}).intermediates


def test_a_missing_serde_is_reported_when_the_application_is_described() -> None:
    desc = StreamApplicationDescriptor(JOB)
    lines = desc.get_input_stream(KAFKA.get_input_descriptor("lines"))
    with pytest.raises(ConfigError, match=r"^partition_by 'p' needs a serde: .*got None$"):
        lines.partition_by(str, str, None, "p")


def test_intermediate_streams_need_a_system_that_carries_them() -> None:
    files = FileSystemDescriptor("files")

    def app(d: StreamApplicationDescriptor) -> None:
        lines = d.get_input_stream(files.get_input_descriptor("lines", "json"))
        lines.partition_by(str, str, "string", "p").sink(lambda m, c, k: None)

    with pytest.raises(ConfigError, match=r"job\.default\.system: .*system 'files' is 'file'"):
        plan(app)
    p = plan(app, {"job.default.system": "mem", "systems.mem.samza.factory": "memory"})
    assert p.intermediates[0].system == "mem"
    # Samza's class names of the systems samzapy has are their short names here too.
    samza_kafka = "org.apache.samza.system.kafka.KafkaSystemFactory"
    p = plan(app, {"job.default.system": "k", "systems.k.samza.factory": samza_kafka})
    assert p.intermediates[0].system == "k"

    def with_default(d: StreamApplicationDescriptor) -> None:
        d.with_default_system(InMemorySystemDescriptor("memory"))
        app(d)

    p = plan(with_default)
    assert p.intermediates[0].qualified_name == "memory.wc-2-partition_by-p"
    assert p.config["systems.memory.samza.factory"] == "memory"


def test_inputs_on_several_systems_need_a_default_system() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        a = d.get_input_stream(KAFKA.get_input_descriptor("a", "json"))
        b = d.get_input_stream(InMemorySystemDescriptor("mem").get_input_descriptor("b"))
        a.merge([b]).partition_by(str, str, "string", "p").sink(lambda m, c, k: None)

    with pytest.raises(ConfigError, match=r"job\.default\.system must be set.*kafka, mem"):
        plan(app)


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda d: None, r"described no input"),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a")),
            r"input stream 'a' is not used by any operator",
        ),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a")).partition_by(
                str, str, "json", "p"
            ),
            r"the stream partition_by 'p' returns is not used",
        ),
        (
            lambda d: (
                d.get_input_stream(KAFKA.get_input_descriptor("a"))
                .map(str)
                .send_to(d.get_output_stream(KAFKA.get_output_descriptor("b")))
                or d.get_output_stream(KAFKA.get_output_descriptor("c"))
            ),
            r"output stream 'c' is not written by any operator: send_to it, or leave out",
        ),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a")).send_to(
                d.get_output_stream(KAFKA.get_output_descriptor("a"))
            ),
            r"output stream 'a' \(kafka\.a\) is also an input of the application: a cycle",
        ),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a", "json")).send_to(
                d.get_output_stream(KAFKA.get_output_descriptor("a", "string"))
            ),
            r"output stream 'a' \(kafka\.a\) is also an input of the application: a cycle",
        ),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a")).send_to(
                d.get_output_stream(InMemorySystemDescriptor("mem").get_output_descriptor("a"))
            ),
            r"stream id 'a' is both an input \(kafka\.a\) and an output \(mem\.a\) of the "
            r"application: .* give the output descriptor another stream id",
        ),
        (
            lambda d: d.get_input_stream(KAFKA.get_input_descriptor("a")).send_to(
                d.get_output_stream(KAFKA.get_output_descriptor("a").with_physical_name("b"))
            ),
            r"stream id 'a' is both an input \(kafka\.a\) and an output \(kafka\.b\)",
        ),
    ],
)
def test_graph_errors_at_start_up(build: Any, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        plan(build)


def test_an_output_a_sink_or_a_late_output_may_write_is_not_refused() -> None:
    def app(d: StreamApplicationDescriptor) -> None:
        alerts = d.get_output_stream(KAFKA.get_output_descriptor("alerts"))  # the sink's
        d.get_input_stream(KAFKA.get_input_descriptor("a")).sink(lambda m, c, k: None)
        late = d.get_output_stream(KAFKA.get_output_descriptor("late"))
        window = Windows.tumbling_window(timedelta(seconds=1)).with_event_time()
        window = window.with_late_output(late)
        d.get_input_stream(KAFKA.get_input_descriptor("b")).window(window, "w").sink(
            lambda m, c, k: None
        )
        assert alerts

    outputs = {stream.stream_id for stream in plan(app).outputs}
    assert outputs == {"alerts", "late"}

    def only_late(d: StreamApplicationDescriptor) -> None:
        late = d.get_output_stream(KAFKA.get_output_descriptor("late"))
        window = Windows.tumbling_window(timedelta(seconds=1)).with_event_time()
        d.get_input_stream(KAFKA.get_input_descriptor("b")).window(
            window.with_late_output(late), "w"
        ).map(str).send_to(d.get_output_stream(KAFKA.get_output_descriptor("panes")))

    assert {stream.stream_id for stream in plan(only_late).outputs} == {"late", "panes"}


def test_operator_ids_are_checked_when_described() -> None:
    desc = StreamApplicationDescriptor(JOB)
    lines = desc.get_input_stream(KAFKA.get_input_descriptor("lines"))
    lines.partition_by(str, str, "json", "p")
    with pytest.raises(ConfigError, match=r"op_id 'p' is used twice"):
        lines.broadcast("json", "p")
    with pytest.raises(ConfigError, match=r"the op_id of partition_by must match .*'a b'"):
        lines.partition_by(str, str, "json", "a b")
    with pytest.raises(ConfigError, match=r"partition_by needs an op_id"):
        lines.partition_by(str, str, "json", None)  # type: ignore[arg-type]


async def _double(x: Any) -> Any:
    return x * 2


class _AsyncCall:
    async def __call__(self, x: Any) -> Any:
        return x


class _AsyncApply:
    async def apply(self, x: Any) -> Any:
        return x


class _AsyncJoin:
    def get_first_key(self, m: Any) -> Any:
        return m

    def get_second_key(self, m: Any) -> Any:
        return m

    async def apply(self, m: Any, other: Any) -> Any:
        return m


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.filter(_double), r"filter's function is a coroutine function"),
        (lambda s: s.map(_AsyncCall()), r"map's function is a coroutine function"),
        (lambda s: s.map(functools.partial(_double)), r"map's function is a coroutine"),
        (lambda s: s.flat_map(_AsyncApply()), r"flat_map's function is a coroutine"),
        (lambda s: s.sink(_double), r"sink's function is a coroutine"),
        (lambda s: s.partition_by(_double, str, "json", "p"), r"partition_by's key function"),
        (lambda s: s.partition_by(str, _double, "json", "p"), r"partition_by's value function"),
        (lambda s: s.join(s.map(str), _AsyncJoin(), ttl=None, op_id="j"), r"join function's apply"),
        (
            lambda s: s.window(Windows.keyed_session_window(_double, timedelta(seconds=1)), "w"),
            r"the window's key function is a coroutine",
        ),
        (
            lambda s: KAFKA.get_input_descriptor("a").with_timestamp(_AsyncCall()),
            r"with_timestamp's function of stream 'a' is a coroutine",
        ),
    ],
)
def test_an_async_function_is_refused_where_its_operator_would_not_await_it(
    call: Any, error: str
) -> None:
    lines = StreamApplicationDescriptor(JOB).get_input_stream(KAFKA.get_input_descriptor("lines"))
    with pytest.raises(ConfigError, match=error + r".*use flat_map_async"):
        call(lines)


def test_flat_map_async_takes_an_async_function_and_map_a_class_that_makes_one() -> None:
    lines = StreamApplicationDescriptor(JOB).get_input_stream(KAFKA.get_input_descriptor("lines"))
    lines.map(_AsyncCall).flat_map_async(lambda call: call(1)).sink(lambda m, c, k: None)
    lines.flat_map_async(_double).flat_map_async(_AsyncCall()).sink(lambda m, c, k: None)


def test_two_outputs_with_one_stream_id_and_different_serdes_are_refused() -> None:
    desc = StreamApplicationDescriptor(JOB)
    first = desc.get_output_stream(KAFKA.get_output_descriptor("out", "json"))
    assert desc.get_output_stream(KAFKA.get_output_descriptor("out", "json")) is first
    with pytest.raises(ConfigError, match=r"'out' is described twice with different serdes"):
        desc.get_output_stream(KAFKA.get_output_descriptor("out", "string"))


def test_every_descriptor_of_a_system_gives_its_keys_and_two_values_of_one_are_refused() -> None:
    """docs/api.md: descriptors that give one key two different values are an error naming
    the key. Only the first descriptor of a system name counted: a second one's settings (a
    producer option on the descriptor of the outputs, the default system's address) were
    dropped without a word."""

    def app(outputs: Any, default: Any = None) -> Any:
        def describe(d: StreamApplicationDescriptor) -> None:
            inputs = KafkaSystemDescriptor("kafka").with_bootstrap_servers("broker:9092")
            views = d.get_input_stream(inputs.get_input_descriptor("views", "json"))
            views.send_to(d.get_output_stream(outputs.get_output_descriptor("out", "json")))
            if default is not None:  # where the partition_by's stream lives
                d.with_default_system(default)
                by = views.partition_by(lambda v: v["id"], lambda v: v, "json", "by-id")
                by.sink(lambda m, c, k: None)

        return describe

    gzip = KafkaSystemDescriptor("kafka").with_producer_configs({"compression.type": "gzip"})
    keys = plan(app(gzip)).config
    assert keys["systems.kafka.bootstrap.servers"] == "broker:9092"
    assert keys["systems.kafka.producer.compression.type"] == "gzip"
    elsewhere = KafkaSystemDescriptor("kafka").with_bootstrap_servers("other:9092")
    for build in (app(elsewhere), app(KAFKA, default=elsewhere)):
        with pytest.raises(ConfigError, match=r"give systems\.kafka\.bootstrap\.servers two "):
            plan(build)


@pytest.mark.parametrize(
    "other",
    [
        KAFKA.get_output_descriptor("out", "json").with_physical_name("elsewhere"),
        KAFKA.get_output_descriptor("out", "json").with_stream_configs({"partitions": 8}),
        InMemorySystemDescriptor("memory").get_output_descriptor("out", "json"),
    ],
    ids=["physical-name", "stream-configs", "system"],
)
def test_two_outputs_with_one_stream_id_and_different_settings_are_refused(other: Any) -> None:
    """The second descriptor of an output's stream id was dropped whole: what was sent to
    it went to the first one's stream (another topic than the one it named)."""
    desc = StreamApplicationDescriptor(JOB)
    desc.get_output_stream(KAFKA.get_output_descriptor("out", "json"))
    with pytest.raises(ConfigError, match=r"output stream 'out' is described twice with "):
        desc.get_output_stream(other)


def test_describing_after_start_up_is_refused() -> None:
    desc = StreamApplicationDescriptor(JOB)
    lines = desc.get_input_stream(KAFKA.get_input_descriptor("lines"))
    lines.sink(lambda m, c, k: None)
    plan_application(desc, JOB)
    with pytest.raises(ConfigError, match=r"map was called after the application was described"):
        lines.map(str)
    with pytest.raises(ConfigError, match=r"get_input_stream was called after"):
        desc.get_input_stream(KAFKA.get_input_descriptor("other"))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: KAFKA.get_input_descriptor("a.b"), r"a stream id must match"),
        (lambda: KAFKA.get_input_descriptor("a", 42), r"the serde of stream 'a' must be"),
        (
            lambda: KAFKA.get_input_descriptor("a").with_offset_default("newest"),
            r"with_offset_default of stream 'a' takes one of oldest, upcoming, got 'newest'",
        ),
        (lambda: KVSerde("string", KVSerde("a", "b")), r"value_serde must be a serde name"),
    ],
)
def test_descriptor_errors(call: Any, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        call()


class _App(StreamApplication):
    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        views = app_desc.get_input_stream(kafka.get_input_descriptor("views", "json"))
        views.send_to(app_desc.get_output_stream(kafka.get_output_descriptor("out", "json")))


def test_keys_the_job_file_sets_win_over_the_application() -> None:
    file_keys = {
        **JOB,
        "systems.kafka.bootstrap.servers": "broker:9092",
        "streams.out.samza.physical.name": "renamed",
        "streams.views.samza.msg.serde": "string",
    }
    app = load_application(Config(file_keys), _App)
    resolved = resolve(app.config)
    assert resolved.task.app_class == f"{__name__}:_App"
    assert resolved.streams["views"].msg_serde == "string"
    factory = app.task_factory(resolved)
    task = factory()
    (send,) = [op for op in task.graph.operators if op.kind == "send_to"]
    assert str(send.stream) == "kafka.renamed"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"task.inputs": ["kafka.x"]}, r"task\.inputs comes from the application"),
        (
            {"task.broadcast.inputs": ["kafka.b#0"]},
            r"^task\.broadcast\.inputs comes from the application",
        ),
        (  # both named in one error, not the first alone
            {"task.inputs": ["kafka.x"], "task.broadcast.inputs": ["kafka.b#0"]},
            r"^task\.inputs and task\.broadcast\.inputs come from the application \(app\.class\): "
            r"leave them out of the job file$",
        ),
        ({"task.class": "t:T"}, r"task\.class and app\.class are both set"),
    ],
)
def test_keys_an_application_owns(extra: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load_application(Config({**JOB, **extra}), _App)


class _Broken(StreamApplication):
    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        raise KeyError("boom")


def test_a_failing_describe_names_app_class() -> None:
    with pytest.raises(
        ConfigError, match=r"app\.class: describe\(\) of .*_Broken failed: KeyError"
    ):
        load_application(Config(JOB), _Broken)


class _MemoryIntermediates(StreamApplication):
    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        app_desc.with_default_system(InMemorySystemDescriptor("mem"))
        lines = app_desc.get_input_stream(KAFKA.get_input_descriptor("lines", "json"))
        lines.partition_by(str, str, "string", "p").sink(lambda m, c, k: None)


def test_memory_intermediate_streams_need_one_container() -> None:
    base = {**JOB, "systems.kafka.bootstrap.servers": "127.0.0.1:9092"}
    app = load_application(Config(base), _MemoryIntermediates)
    app.task_factory(resolve(app.config))  # static, one container: fine
    for extra, match in (
        # The group places tasks over containers: its inputs must be on kafka.
        ({"job.coordinator.factory": "kafka-group"}, r"but mem\.wc-2-partition_by-p \(memory\)"),
        (
            {"job.coordinator.factory": "static", "job.container.count": 2},
            r"mem\.wc-2-partition_by-p are on a memory system",
        ),
    ):
        app = load_application(Config({**base, **extra}), _MemoryIntermediates)
        with pytest.raises(ConfigError, match=match):
            app.task_factory(resolve(app.config))


def test_the_job_file_may_rename_an_input_or_move_it_to_another_system() -> None:
    file_keys = {
        **JOB,
        "streams.views.samza.physical.name": "page-views",
        "streams.views.samza.system": "other",
        "systems.other.samza.factory": "kafka",
    }
    app = load_application(Config(file_keys), _App)
    assert app.config["task.inputs"] == ["other.page-views"]
    assert [s.qualified_name for s in app.plan.inputs] == ["other.page-views"]
    task = app.task_factory(resolve(app.config))()
    assert [str(ss) for ss in task.graph.entries] == ["other.page-views"]


def test_operator_ids_and_input_stream_ids_share_one_namespace() -> None:
    """An id used twice is named with what holds it already: one the user gave once may be
    an input's stream id, or the id of the stream a partition_by returns."""
    desc = StreamApplicationDescriptor(JOB)
    lines = desc.get_input_stream(KAFKA.get_input_descriptor("lines"))
    with pytest.raises(
        ConfigError,
        match=r"op_id 'lines' is used twice: by input stream 'lines' and by a broadcast",
    ):
        lines.broadcast("json", "lines")
    lines.partition_by(str, str, "json", "p")
    with pytest.raises(
        ConfigError,
        match=r"op_id 'p-input' is used twice: by the stream partition_by 'p' returns \(its "
        r"input operator\) and by a broadcast",
    ):
        lines.broadcast("json", "p-input")
    with pytest.raises(
        ConfigError, match=r"input stream 'p' has the id of an operator, a partition_by"
    ):
        desc.get_input_stream(KAFKA.get_input_descriptor("p"))
    window = Windows.tumbling_window(timedelta(seconds=1))
    lines.window(window, "w-input").sink(lambda m, c, k: None)
    with pytest.raises(
        ConfigError,
        match=r"op_id 'w-input' is used twice: by a window and by the stream broadcast 'w' "
        r"returns \(its input operator\)",
    ):
        lines.broadcast("json", "w")
