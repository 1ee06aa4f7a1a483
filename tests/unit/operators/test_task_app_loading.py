"""TaskApplication and TaskApplicationDescriptor: the descriptor's methods, the keys a task
application yields (the same as a StreamApplication's for the same descriptors), and the
errors of loading one."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import (
    AsyncStreamTask,
    ConfigError,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    StreamApplication,
    StreamTask,
    TaskApplication,
    TaskApplicationDescriptor,
)
from samzapy.config import Config
from samzapy.operators.application import load_application
from samzapy.operators.task_application import TaskFactory

KAFKA = (
    KafkaSystemDescriptor("kafka")
    .with_bootstrap_servers("127.0.0.1:9092")
    .with_consumer_configs({"fetch.max.bytes": 1024})
)
VIEWS = (
    KAFKA.get_input_descriptor("views", KVSerde("string", "json"))
    .with_physical_name("web.views")
    .with_offset_default("oldest")
    .with_stream_configs({"partitions": 4})
)
OUT = KAFKA.get_output_descriptor("out", "json")
COUNTS = RocksDbTableDescriptor("counts", KVSerde("string", "integer")).with_changelog_enabled()


class Noop(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


def described(**with_: Any) -> TaskApplicationDescriptor:
    desc = TaskApplicationDescriptor({})
    for method, arg in with_.items():
        getattr(desc, f"with_{method}")(arg)
    return desc


def load(describe: Any, **config: Any) -> Any:
    app = type("App", (TaskApplication,), {"describe": lambda self, d: describe(d)})
    return load_application(Config({"job.name": "j", **config}), app)


def full(d: TaskApplicationDescriptor) -> None:
    d.with_input_stream(VIEWS).with_output_stream(OUT).with_table(COUNTS)
    d.with_task_factory(Noop)


def test_each_with_method_returns_the_descriptor_and_records_what_it_got() -> None:
    desc = TaskApplicationDescriptor({"app.x": 1})
    system = KafkaSystemDescriptor("other")
    assert desc.with_input_stream(VIEWS) is desc
    assert desc.with_output_stream(OUT) is desc
    assert desc.with_table(COUNTS) is desc
    assert desc.with_task_factory(Noop) is desc
    assert desc.with_default_system(system) is desc
    assert list(desc.graph.inputs) == ["views"]
    assert list(desc.graph.outputs) == ["out"]
    assert list(desc.graph.tables) == ["counts"]
    assert desc.task_factory is Noop
    assert desc.default_system is system
    assert desc.config == {"app.x": 1}


@pytest.mark.parametrize(
    ("with_", "match"),
    [
        ({"input_stream": OUT}, r"with_input_stream takes an input descriptor"),
        ({"output_stream": VIEWS}, r"with_output_stream takes an output descriptor"),
        ({"table": "counts"}, r"with_table takes a table descriptor"),
        ({"task_factory": Noop()}, r"with_task_factory takes a task class or a callable"),
        ({"default_system": "kafka"}, r"with_default_system takes a system descriptor"),
    ],
)
def test_a_wrong_argument_is_a_config_error_saying_what_was_expected(
    with_: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigError, match=match):
        described(**with_)


def test_an_input_twice_or_a_second_task_factory_is_an_error() -> None:
    desc = described(input_stream=VIEWS, task_factory=Noop)
    with pytest.raises(ConfigError, match=r"with_input_stream was called twice for stream 'views'"):
        desc.with_input_stream(VIEWS)
    with pytest.raises(ConfigError, match=r"with_task_factory was called twice .*one task factory"):
        desc.with_task_factory(Noop)


def test_the_descriptor_refuses_calls_once_the_application_is_described() -> None:
    loaded = load(full)
    with pytest.raises(ConfigError, match=r"with_output_stream was called after the application"):
        loaded.descriptor.with_output_stream(OUT)


def test_the_descriptors_yield_the_keys_they_yield_for_a_stream_application() -> None:
    class AsStream(StreamApplication):
        def describe(self, app_desc: Any) -> None:
            app_desc.get_table(COUNTS)
            app_desc.get_output_stream(OUT)
            app_desc.get_input_stream(VIEWS).sink(lambda m, c, k: None)

    config = Config({"job.name": "j"})
    as_task = load(full)
    as_stream = load_application(config, AsStream)
    assert as_task.plan.config == as_stream.plan.config
    keys = as_task.config
    assert keys["task.inputs"] == ["kafka.web.views"]
    assert keys["streams.views.samza.offset.default"] == "oldest"
    assert keys["streams.views.samza.key.serde"] == "string"
    assert keys["streams.views.partitions"] == 4
    assert keys["systems.kafka.consumer.fetch.max.bytes"] == 1024
    assert keys["streams.out.samza.msg.serde"] == "json"
    assert keys["stores.counts.factory"] == "rocksdb"
    assert keys["stores.counts.msg.serde"] == "integer"
    assert keys["stores.counts.changelog"] == "kafka.j-1-table-counts"
    assert as_task.plan.stores == ("counts",)
    assert [s.qualified_name for s in as_task.plan.inputs] == ["kafka.web.views"]


def test_the_job_files_keys_win_and_task_inputs_there_is_an_error() -> None:
    loaded = load(full, **{"streams.views.samza.offset.default": "upcoming"})
    assert loaded.config["streams.views.samza.offset.default"] == "upcoming"
    with pytest.raises(ConfigError, match=r"task.inputs comes from the application") as caught:
        load(full, **{"task.inputs": ["kafka.views"]})
    assert caught.value.key == "task.inputs"


def test_no_input_is_an_error_naming_with_input_stream() -> None:
    with pytest.raises(ConfigError, match=r"app.class: .*App: the application described no input"):
        load(lambda d: d.with_task_factory(Noop))


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (None, r"did not call app_desc.with_task_factory\(\.\.\.\): expected a task class"),
        (dict, r"task factory builtins:dict is a class that is not a task: expected a task class"),
        (lambda n: Noop(), r"cannot be called with no arguments: expected a task class"),
    ],
)
def test_a_missing_or_unfit_task_factory_is_an_error_naming_app_class(
    factory: Any, match: str
) -> None:
    def describe(d: TaskApplicationDescriptor) -> None:
        d.with_input_stream(VIEWS)
        if factory is not None:
            d.with_task_factory(factory)

    with pytest.raises(ConfigError, match=r"^app\.class: .*" + match) as caught:
        load(describe)
    assert caught.value.key == "app.class"


def test_a_task_class_factory_is_checked_as_task_class_is() -> None:
    class Both(StreamTask, AsyncStreamTask):
        pass

    class NeedsArgs(StreamTask):
        def __init__(self, n: int) -> None:
            pass

    for cls, match in ((Both, "subclasses both"), (NeedsArgs, "cannot be created with no")):
        with pytest.raises(ConfigError, match=rf"^app\.class: .*{cls.__name__}'? {match}"):
            load(lambda d, cls=cls: d.with_input_stream(VIEWS).with_task_factory(cls))


def test_each_call_of_the_factory_is_checked_and_a_probe_is_kept_for_the_first_task() -> None:
    made: list[Any] = []

    def factory() -> Any:
        made.append(Noop() if len(made) < 2 else "not a task")
        return made[-1]

    tasks = TaskFactory(factory, "m:App")
    assert tasks.probe() is Noop and len(made) == 1
    assert tasks() is made[0]  # the probe's instance: one call per task
    assert tasks() is made[1]
    with pytest.raises(ConfigError, match=r"m:App's task factory .*returned 'not a task', which"):
        tasks()
    shared = Noop()
    once = TaskFactory(lambda: shared, "m:App")
    assert once() is shared
    with pytest.raises(ConfigError, match=r"returned an instance it returned before .*its own"):
        once()
    failing = TaskFactory(lambda: 1 / 0, "m:App")
    with pytest.raises(ConfigError, match=r"m:App's task factory .* failed: ZeroDivisionError"):
        failing()


def test_a_remote_table_without_a_read_function_is_refused_as_for_a_stream_application() -> None:
    def describe(d: TaskApplicationDescriptor) -> None:
        d.with_input_stream(VIEWS).with_table(RemoteTableDescriptor("profiles"))
        d.with_task_factory(Noop)

    with pytest.raises(ConfigError, match=r"table 'profiles': a remote table needs a read"):
        load(describe)


def test_an_application_of_both_kinds_is_refused() -> None:
    class Both(StreamApplication, TaskApplication):
        def describe(self, app_desc: Any) -> None:
            pass

    with pytest.raises(ConfigError, match=r"subclasses both StreamApplication and TaskApplication"):
        load_application(Config({"job.name": "j"}), Both)
