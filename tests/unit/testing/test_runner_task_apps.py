"""TestRunner.of(task application): a TaskApplication's tasks run as a task class's do, each
an instance from one call of its factory, its tables its tasks' stores."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from samzapy import (
    AsyncStreamTask,
    CachingTableDescriptor,
    ClosableTask,
    ConfigError,
    EndOfStreamListenerTask,
    InitableTask,
    KafkaSystemDescriptor,
    KVSerde,
    OutgoingMessageEnvelope,
    RemoteTableDescriptor,
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


class Cities:
    """A remote table's read function: a member's city; counts its calls, notes close."""

    CLOSED: ClassVar[list[str]] = []

    def __init__(self) -> None:
        self.calls = 0

    async def get_async(self, member: str) -> Any:
        self.calls += 1
        await asyncio.sleep(0)
        return {"ann": "Oslo", "bob": "Lima"}.get(member)

    def close(self) -> None:
        Cities.CLOSED.append(f"{self.calls} calls")


CITIES = RemoteTableDescriptor("cities").with_read_function(Cities())
CACHED = CachingTableDescriptor("cached-cities", CITIES)
ENRICHED = KAFKA.get_output_descriptor("enriched", "json")


class Enricher(InitableTask, AsyncStreamTask, ClosableTask):
    """Each view with its member's city, read through a cache in front of a remote table."""

    def init(self, context: Any) -> None:
        self.cities = context.get_table("cached-cities")
        self.counts = context.get_store("counts")  # a local table's store, beside them
        self.closed = False

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        member = envelope.message["m"]
        city = await self.cities.get_async(member)
        self.counts.put(member, (self.counts.get(member) or 0) + 1)
        out = {"m": member, "city": city, "n": self.counts.get(member)}
        collector.send(OutgoingMessageEnvelope(SystemStream("kafka", "enriched"), out))

    def close(self) -> None:
        self.closed = True
        Cities.CLOSED.append("task")


class EnrichViews(TaskApplication):
    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        app_desc.with_input_stream(VIEWS).with_output_stream(ENRICHED)
        app_desc.with_table(CITIES).with_table(CACHED).with_table(TABLE)
        app_desc.with_task_factory(Enricher)


def test_remote_and_caching_tables_are_opened_for_the_task_and_closed_after_it() -> None:
    Cities.CLOSED.clear()
    views = [{"m": "ann"}, {"m": "bob"}, {"m": "ann"}, {"m": "cid"}]
    runner = TestRunner.of(EnrichViews).add_input_stream(VIEWS, views)
    result = runner.add_output_stream(ENRICHED).run(timeout=10)
    assert result.outputs(ENRICHED) == {
        0: [
            {"m": "ann", "city": "Oslo", "n": 1},
            {"m": "bob", "city": "Lima", "n": 1},
            {"m": "ann", "city": "Oslo", "n": 2},
            {"m": "cid", "city": None, "n": 1},
        ]
    }
    # The task's close ran before the tables': its own copy of the function read 3 members
    # (ann's second view was the cache's).
    assert Cities.CLOSED == ["task", "3 calls"]
    task = result.metrics.snapshot()["task.Partition 0"]
    assert task["cached-cities-cache-hits"] == 1
    assert runner.container is not None
    (instance,) = [t._task for t in runner.container.tasks]
    assert type(instance).__name__ == "Enricher" and isinstance(instance, Enricher)
    assert instance.closed


def test_a_task_without_init_gets_its_remote_tables_opened_and_closed() -> None:
    Cities.CLOSED.clear()

    class Plain(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS).with_table(CITIES).with_task_factory(Plain)

    TestRunner.of(App).add_input_stream(VIEWS, [{"m": "ann"}]).run(timeout=10)
    assert Cities.CLOSED == ["0 calls"]


def test_a_task_application_reads_the_broadcast_inputs_its_job_file_names() -> None:
    """A TaskApplication has no broadcast stream of its own to give: task.broadcast.inputs
    from the job file (config) gives every task the listed partitions, as for a task class."""
    rates = KAFKA.get_input_descriptor("rates", "json")
    seen = KAFKA.get_output_descriptor("seen", "json")

    class Seen(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            out = {"ssp": str(envelope.system_stream_partition), "m": envelope.message["m"]}
            collector.send(OutgoingMessageEnvelope(SystemStream("kafka", "seen"), out))

    class App(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS).with_input_stream(rates)
            app_desc.with_output_stream(seen).with_task_factory(Seen)

    result = (
        TestRunner.of(App)
        .add_config("task.broadcast.inputs", ["kafka.rates#0"])
        .add_input_stream(VIEWS, {0: [{"m": "a"}], 1: [{"m": "b"}]})
        .add_input_stream(rates, [{"m": "eur"}])
        .add_output_stream(seen)
        .run(timeout=10)
    )
    got = sorted((m["ssp"], m["m"]) for ms in result.outputs(seen).values() for m in ms)
    # Both tasks read rates#0 (the broadcast partition), each its own views partition.
    assert got == [
        ("kafka.rates#0", "eur"),
        ("kafka.rates#0", "eur"),
        ("kafka.views#0", "a"),
        ("kafka.views#1", "b"),
    ]
