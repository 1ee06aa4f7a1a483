"""A TestRunner given a wrong argument says so at the call, naming it, instead of running
with a surprise or failing later inside the in-memory system."""

from __future__ import annotations

from datetime import timedelta

import pytest

from samzapy import (
    KafkaSystemDescriptor,
    OutgoingMessageEnvelope,
    StreamApplication,
    StreamTask,
    SystemStream,
    TaskError,
)
from samzapy.testing import TestRunner


class Nothing(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        pass


@pytest.mark.parametrize("messages", ["hello", b"hello", {0: "hello"}])
def test_a_string_given_as_the_messages_is_refused_not_split_into_characters(
    messages: object,
) -> None:
    with pytest.raises(TypeError, match=r"add_input\('in'\): .* a list of messages"):
        TestRunner(Nothing).add_input("in", messages)  # type: ignore[arg-type]


@pytest.mark.parametrize("partitions", [0, -1, "2", 1.5, True])
def test_a_partition_count_below_one_or_not_an_integer_is_refused_at_the_call(
    partitions: object,
) -> None:
    runner = TestRunner(Nothing)
    with pytest.raises(ValueError, match=r"add_output\('out'\): partitions must be an integer"):
        runner.add_output("out", partitions)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"add_intermediate\('mid'\): partitions must be"):
        runner.add_intermediate("mid", partitions)  # type: ignore[arg-type]
    words = KafkaSystemDescriptor("kafka").get_output_descriptor("words", "json")
    with pytest.raises(ValueError, match=r"add_output_stream\('words'\): partitions must be"):
        TestRunner.of(object()).add_output_stream(words, partitions)  # type: ignore[arg-type]


class Echo(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        collector.send(OutgoingMessageEnvelope(SystemStream("memory", "out"), envelope.message))


@pytest.mark.parametrize(
    "config",
    [
        {"task.inputs": "memory.other"},
        {
            "task.inputs": "kafka.in",  # a job file's: it would wait for a broker until timeout
            "systems.kafka.samza.factory": "kafka",
            "systems.kafka.consumer.bootstrap.servers": "localhost:1",
        },
    ],
)
def test_a_config_whose_task_inputs_leave_out_a_given_input_is_refused(
    config: dict[str, str],
) -> None:
    runner = TestRunner(Echo, config).add_input("in", ["a"]).add_output("out")
    with pytest.raises(ValueError, match=r"add_input\('in'\): the config's task\.inputs \("):
        runner.run(timeout=10)


def test_a_config_whose_task_inputs_list_the_given_inputs_runs() -> None:
    config = {"task.inputs": ["memory.in", "memory.more"]}
    runner = TestRunner(Echo, config).add_input("in", ["a"]).add_input("more", ["b"])
    result = runner.add_output("out").run(timeout=10)
    assert sorted(result.outputs("out")[0]) == ["a", "b"]


def test_a_config_moving_the_memory_system_to_another_namespace_is_refused() -> None:
    runner = TestRunner(Echo, {"systems.memory.namespace": "elsewhere"}).add_input("in", ["a"])
    with pytest.raises(ValueError, match=r"systems\.memory\.namespace .* namespace="):
        runner.run(timeout=10)


def test_a_runner_without_inputs_says_which_call_is_missing() -> None:
    runner = TestRunner(Echo).add_output("out")
    with pytest.raises(ValueError, match=r"needs at least one input: call add_input\(\)"):
        runner.run(timeout=10)


def test_of_a_task_class_runs_it_as_samzas_test_runner_of_does() -> None:
    result = TestRunner.of(Echo).add_input("in", {0: ["a"]}).add_output("out").run(timeout=10)
    assert result.outputs("out") == {0: ["a"]}


class Apps(StreamApplication):
    def describe(self, app_desc):  # type: ignore[no-untyped-def]
        pass


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (Echo(), r"TestRunner\(\) takes a task class, not an instance of Echo: TestRunner\(Echo\)"),
        (Apps, r"Apps is an application: run it with TestRunner\.of\(Apps\)"),
        ("mod:Echo", r"TestRunner\(\) takes a task class, not str 'mod:Echo'"),
    ],
)
def test_a_runner_given_something_other_than_a_task_class_says_what_to_give(
    given: object, expected: str
) -> None:
    with pytest.raises(TypeError, match=expected):
        TestRunner(given)  # type: ignore[arg-type]


def test_a_timeout_may_be_a_timedelta_as_samzas_run_takes_a_duration() -> None:
    result = TestRunner(Echo).add_input("in", ["a"]).add_output("out").run(timedelta(seconds=10))
    assert result.outputs("out") == {0: ["a"]}


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), None, "10", True, timedelta(0)])
def test_a_timeout_that_is_not_a_positive_duration_is_refused_naming_it(timeout: object) -> None:
    runner = TestRunner(Echo).add_input("in", ["a"]).add_output("out")
    with pytest.raises((TypeError, ValueError), match=r"run\(timeout=.*\): expected seconds > 0"):
        runner.run(timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "config",
    [
        {"task.inputs": ["memory.in", "memory.rules"]},
        {"task.broadcast.inputs": ["memory.rules#0"]},
    ],
)
def test_a_stream_the_config_reads_and_no_call_gave_is_named_with_the_call_to_make(
    config: dict[str, object],
) -> None:
    runner = TestRunner(Echo, config).add_input("in", ["a"]).add_output("out")
    with pytest.raises(ValueError, match=r"reads memory\.rules, .* add_input\('rules', "):
        runner.run(timeout=10)


class ToPartition(StreamTask):
    """Sends each message (an int) to that partition of ``out``."""

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        out = SystemStream("memory", "out")
        collector.send(OutgoingMessageEnvelope(out, "m", partition=envelope.message))


@pytest.mark.parametrize("messages", [[3], [0, 3]], ids=["first send", "a later send"])
def test_a_send_to_a_partition_not_declared_names_add_outputs_partitions(
    messages: list[int],
) -> None:
    runner = TestRunner(ToPartition).add_input("in", messages).add_output("out", partitions=2)
    with pytest.raises(
        TaskError, match=r"out of range for memory\.out, which has 2 partitions"
    ) as raised:
        runner.run(timeout=10)
    text = str(raised.value)
    assert "(add_output('out', partitions=4))" in text
    assert "streams.out.partitions" not in text  # the runner made the stream: not read
    assert "add_output('out', partitions=4)" in str(raised.value.__cause__)
    assert raised.value.task_name is not None and str(raised.value.task_name) == "Partition 0"


def test_an_input_given_in_several_calls_has_every_message_in_the_order_given() -> None:
    """As Samza's addInputStream, each call adds to the stream: a partition's messages come
    after those an earlier call gave it, none replaced."""
    numbers = KafkaSystemDescriptor("kafka").get_input_descriptor("numbers", "json")
    echoed = KafkaSystemDescriptor("kafka").get_output_descriptor("echoed", "json")

    class EchoApp(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            app_desc.get_input_stream(numbers).send_to(app_desc.get_output_stream(echoed))

    result = (
        TestRunner.of(EchoApp)
        .add_input_stream(numbers, [1, 2])
        .add_input_stream(numbers, {0: [3], 1: [10]})
        .add_output_stream(echoed)
        .run(timeout=10)
    )
    assert sorted(result.outputs(echoed)[0]) == [1, 2, 3, 10]
    assert [m for m in result.outputs(echoed)[0] if m < 10] == [1, 2, 3]


def test_an_input_given_open_and_ended_in_two_calls_is_refused_at_the_second() -> None:
    runner = TestRunner(Nothing).add_input("in", [1])
    with pytest.raises(ValueError, match=r"add_input\('in'\): .*end=True.*end=False"):
        runner.add_input("in", [2], end=False)
