"""TestRunner.of(task application): a TaskApplication's tasks run as a task class's do, each
an instance from one call of its factory, its tables its tasks' stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samzapy import (
    AsyncStreamTask,
    ConfigError,
    EndOfStreamListenerTask,
    InitableTask,
    KafkaSystemDescriptor,
    KVSerde,
    OutgoingMessageEnvelope,
    RocksDbTableDescriptor,
    StreamTask,
    SystemStream,
    TaskApplication,
    TaskApplicationDescriptor,
)
from samzapy.testing import TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
VIEWS = KAFKA.get_input_descriptor("views", "json")
COUNTS = KAFKA.get_output_descriptor("counts", KVSerde("string", "integer"))
TABLE = RocksDbTableDescriptor("counts", KVSerde("string", "integer"))
VIEWS_IN = {0: [{"m": "a"}, {"m": "b"}, {"m": "a"}], 1: [{"m": "c"}, {"m": "a"}]}


class Counter(InitableTask, StreamTask, EndOfStreamListenerTask):
    """Counts views per member in the RocksDB table; sends the counts at end-of-stream."""

    def init(self, context: Any) -> None:
        self.table = context.get_table("counts")
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        member = envelope.message["m"]
        self.table.put(member, (self.table.get(member) or 0) + 1)

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        for member, count in self.store.all():
            collector.send(OutgoingMessageEnvelope(SystemStream("kafka", "counts"), count, member))


class CountViews(TaskApplication):
    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        app_desc.with_input_stream(VIEWS).with_output_stream(COUNTS).with_table(TABLE)
        app_desc.with_task_factory(Counter)


def test_a_task_application_counts_into_its_rocksdb_table_and_checkpoints() -> None:
    runner = TestRunner.of(CountViews()).add_input_stream(VIEWS, VIEWS_IN)
    result = runner.add_output_stream(COUNTS, partitions=2).run(timeout=10)
    # Each task's table holds its own partition's counts (a is in both partitions).
    sent = sorted((kv.key, kv.value) for kvs in result.keyed_outputs(COUNTS).values() for kv in kvs)
    assert sent == [("a", 1), ("a", 2), ("b", 1), ("c", 1)]
    checkpointed = {
        str(task): {str(ssp): offset for ssp, offset in offsets.items()}
        for task, offsets in result.checkpoints.items()
    }
    assert checkpointed == {
        "Partition 0": {"kafka.views#0": "2"},
        "Partition 1": {"kafka.views#1": "1"},
    }
    assert runner.container is not None
    assert runner.container.config.stores["counts"].factory == "rocksdb"
    assert runner.container.config.task.app_class.endswith(":CountViews")


def test_each_task_gets_its_own_instance_from_one_call_of_the_factory() -> None:
    made: list[Seen] = []

    class Seen(InitableTask, StreamTask):
        def init(self, context: Any) -> None:
            self.task = str(context.task_name)
            self.messages: list[Any] = []

        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            self.messages.append(envelope.message["m"])

    def factory() -> Seen:
        made.append(Seen())
        return made[-1]

    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS).with_task_factory(factory)

    inputs = {p: [{"m": f"p{p}-{i}"} for i in range(3)] for p in range(3)}
    TestRunner.of(App).add_input_stream(VIEWS, inputs).run(timeout=10)
    assert len(made) == 3 and len({id(task) for task in made}) == 3
    assert {t.task: t.messages for t in made} == {
        f"Partition {p}": [m["m"] for m in ms] for p, ms in inputs.items()
    }


def test_an_async_task_from_a_factory_runs_with_its_concurrency() -> None:
    class Relay(AsyncStreamTask):
        async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            await asyncio.sleep(0.001)
            collector.send(OutgoingMessageEnvelope(SystemStream("kafka", "out"), envelope.message))

    out = KAFKA.get_output_descriptor("out", "json")

    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS).with_output_stream(out)
            app_desc.with_task_factory(lambda: Relay())

    result = (
        TestRunner.of(App)
        .add_input_stream(VIEWS, [{"n": i} for i in range(20)])
        .add_output_stream(out)
        .add_config("task.max.concurrency", 4)
        .run(timeout=10)
    )
    assert sorted(m["n"] for m in result.outputs(out)[0]) == list(range(20))


def test_a_factory_returning_no_task_fails_the_run_naming_app_class() -> None:
    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS).with_task_factory(lambda: object())

    runner = TestRunner.of(App).add_input_stream(VIEWS, [{"m": "a"}])
    with pytest.raises(
        ConfigError, match=r"^app\.class: .*App's task factory .*which is not a task"
    ):
        runner.run(timeout=10)


def test_describe_without_a_task_factory_fails_the_run_before_it_starts() -> None:
    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS)

    runner = TestRunner.of(App).add_input_stream(VIEWS, [{"m": "a"}])
    with pytest.raises(ConfigError, match=r"did not call app_desc.with_task_factory"):
        runner.run(timeout=10)
