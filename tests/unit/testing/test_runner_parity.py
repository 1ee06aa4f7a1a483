"""TestRunner.of accepts the job files `samzapy run` accepts, and refuses those it refuses,
where the difference is not the memory system the runner puts in place of the real ones."""

from __future__ import annotations

import pytest

from samzapy import (
    ConfigError,
    FileSystemDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    StreamApplication,
)
from samzapy.testing import TestRunner

kafka = KafkaSystemDescriptor("kafka")
lines = kafka.get_input_descriptor("lines", "json")
words = kafka.get_output_descriptor("words", KVSerde("string", "json"))


class Words(StreamApplication):
    def describe(self, app_desc):  # type: ignore[no-untyped-def]
        (
            app_desc.get_input_stream(lines)
            .flat_map(str.split)
            .partition_by(lambda w: w, lambda w: 1, KVSerde("string", "json"), "by-word")
            .send_to(app_desc.get_output_stream(words))
        )


@pytest.mark.parametrize(
    "placement",
    [
        {"job.container.count": 3},
        {"job.coordinator.factory": "kafka-group"},
        {"job.container.count": 2, "job.container.id": "samzapy-1"},
    ],
)
def test_a_job_file_placing_the_job_in_several_containers_runs_in_the_one_of_the_runner(
    placement: dict[str, object],
) -> None:
    # Valid for `samzapy run` on Kafka; the runner runs every task in one container, so its
    # memory intermediate streams are not "shared among containers".
    result = (
        TestRunner.of(Words, placement)
        .add_input_stream(lines, {0: ["a b"], 1: ["b"]})
        .add_output_stream(words)
        .run(timeout=10)
    )
    assert sorted(kv.key for kv in result.keyed_outputs(words)[0]) == ["a", "b", "b"]


def test_a_misspelt_kafka_client_option_is_refused_as_samzapy_run_refuses_it() -> None:
    runner = (
        TestRunner.of(Words, {"systems.kafka.consumer.fetch.max.bytez": 5})
        .add_input_stream(lines, ["a"])
        .add_output_stream(words)
    )
    with pytest.raises(ConfigError, match=r"systems\.kafka\.consumer\.fetch\.max\.bytez is not"):
        runner.run(timeout=10)


def test_kafka_client_options_samzapy_run_accepts_are_accepted() -> None:
    config = {
        "systems.kafka.consumer.bootstrap.servers": "localhost:9092",
        "systems.kafka.consumer.fetch.max.bytes": 1_000_000,
        "systems.kafka.producer.linger.ms": 5,
    }
    result = (
        TestRunner.of(Words, config)
        .add_input_stream(lines, ["a"])
        .add_output_stream(words)
        .run(timeout=10)
    )
    assert result.outputs(words) == {0: [1]}


class Lines(StreamApplication):
    def describe(self, app_desc):  # type: ignore[no-untyped-def]
        app_desc.get_input_stream(lines).sink(lambda line, collector, coordinator: None)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {"systems.kafka.samza.factory": "kafak"},
            r"systems\.kafka\.samza\.factory must be memory, file, kafka or a 'module:Class'",
        ),
        (
            {"systems.kafka.bootstrap.server": "localhost:9092"},
            r"unknown key 'systems\.kafka\.bootstrap\.server'; did you mean",
        ),
        (
            {"systems.kafka.connect.timeout.ms": "5s"},
            r"systems\.kafka\.connect\.timeout\.ms must be an integer >= 0, got '5s'",
        ),
    ],
)
def test_a_system_key_the_runner_drops_is_still_checked_as_samzapy_run_checks_it(
    config: dict[str, object], expected: str
) -> None:
    # The runner puts its memory system in place of kafka, dropping kafka's own keys: a
    # mistake in them must fail the test as it would fail the job, not vanish.
    runner = TestRunner.of(Lines, config).add_input_stream(lines, ["a"])
    with pytest.raises(ConfigError, match=expected):
        runner.run(timeout=10)


def test_a_file_systems_path_the_job_file_gives_is_not_needed_by_the_runner() -> None:
    files = FileSystemDescriptor("files")
    views = files.get_input_descriptor("views", "json")
    pages = files.get_output_descriptor("pages", "json")

    class Pages(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            app_desc.get_input_stream(views).map(lambda v: v["page"]).send_to(
                app_desc.get_output_stream(pages)
            )

    result = (
        TestRunner.of(Pages)
        .add_input_stream(views, [{"page": "/a"}])
        .add_output_stream(pages)
        .run(timeout=10)
    )
    assert result.outputs(pages) == {0: ["/a"]}


def test_streams_of_one_name_on_two_systems_are_refused_naming_both() -> None:
    # Valid on two Kafka clusters (a mirror); on the runner's one memory namespace they
    # would be one stream, the output appended to the ended input.
    events = kafka.get_input_descriptor("events", "json")
    mirrored = (
        KafkaSystemDescriptor("mirror").get_output_descriptor("mirrored", "json")
    ).with_physical_name("events")

    class Mirror(StreamApplication):
        def describe(self, app_desc):  # type: ignore[no-untyped-def]
            app_desc.get_input_stream(events).send_to(app_desc.get_output_stream(mirrored))

    runner = TestRunner.of(Mirror).add_input_stream(events, [1]).add_output_stream(mirrored)
    with pytest.raises(ConfigError, match=r"kafka\.events and mirror\.events .*'streams\.events"):
        runner.run(timeout=10)
    runner.add_config("streams.events.samza.physical.name", "events-in")  # the remedy given
    assert runner.run(timeout=10).outputs(mirrored) == {0: [1]}
