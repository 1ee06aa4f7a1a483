"""Two TestRunners in one process share nothing unless they share a namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.testing import TestRunner


class Echo(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        collector.send(OutgoingMessageEnvelope(SystemStream("memory", "out"), envelope.message))


#: A config a test module might share between its tests, naming its job as the job file does.
NAMED = {"job.name": "word-count", "job.id": "1"}


def test_a_second_runner_of_the_same_job_reads_its_inputs_from_the_start() -> None:
    first = TestRunner(Echo, NAMED).add_input("in", ["a", "b"]).add_output("out").run(timeout=10)
    second = TestRunner(Echo, NAMED).add_input("in", ["c", "d"]).add_output("out").run(timeout=10)
    assert first.outputs("out") == {0: ["a", "b"]}
    assert second.outputs("out") == {0: ["c", "d"]}  # not resumed from the first's checkpoints
    (offsets,) = second.checkpoints.values()
    assert list(offsets.values()) == ["1"]


def test_a_runner_of_the_same_namespace_resumes_from_the_checkpoints_of_the_same_job() -> None:
    first = TestRunner(Echo, NAMED).add_input("in", ["a", "b"]).add_output("out")
    first.run(timeout=10)
    again = TestRunner(Echo, NAMED, namespace=first.namespace).add_input("in", ["a", "b"])
    assert again.run(timeout=10).outputs("out") == {0: ["a", "b"]}  # nothing read twice


class ToOutput(StreamTask):
    """Sends where the job file's task does: to a system of its own, ``output``."""

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        collector.send(OutgoingMessageEnvelope(SystemStream("output", "out"), envelope.message))


def test_another_memory_system_of_the_config_holds_the_runners_streams() -> None:
    # The task's output system made a memory system, as the test kit says its streams are:
    # its messages are the runner's, not those of a namespace every runner shares.
    results = [
        TestRunner(ToOutput, {"systems.output.samza.factory": "memory"})
        .add_input("in", [word])
        .add_output("out")
        .run(timeout=10)
        for word in ("a", "b")
    ]
    assert [result.outputs("out") for result in results] == [{0: ["a"]}, {0: ["b"]}]


def test_a_memory_system_named_by_samzas_class_holds_the_runners_streams() -> None:
    # A job file of Samza's names its memory system's factory by the Java class.
    config = {
        "systems.output.samza.factory": "org.apache.samza.system.inmemory.InMemorySystemFactory"
    }
    result = TestRunner(ToOutput, config).add_input("in", ["a"]).add_output("out").run(timeout=10)
    assert result.outputs("out") == {0: ["a"]}


@pytest.mark.parametrize("declared", [True, False], ids=["add_output", "no-add_output"])
def test_a_memory_system_the_config_moves_to_another_namespace_is_refused(
    declared: bool,
) -> None:
    # What the task sends there is out of the runner's reach: result.outputs would be empty
    # (declared) or a KeyError saying the stream was never written (not declared).
    config = {"systems.output.samza.factory": "memory", "systems.output.namespace": "other"}
    runner = TestRunner(ToOutput, config).add_input("in", ["a"])
    if declared:
        runner.add_output("out")
    expected = (
        rf"systems\.output\.namespace is 'other', not the runner's '{runner.namespace}'"
        r".*system 'output'.*leave systems\.output\.namespace out.*namespace='other'"
    )
    with pytest.raises(ValueError, match=expected):
        runner.run(timeout=10)


def test_a_memory_system_in_the_runners_namespace_by_name_runs() -> None:
    runner = TestRunner(ToOutput).add_input("in", ["a"]).add_output("out")
    runner.add_config("systems.output.samza.factory", "memory")
    runner.add_config("systems.output.namespace", runner.namespace)
    assert runner.run(timeout=10).outputs("out") == {0: ["a"]}


def test_file_checkpoints_a_config_asks_for_are_the_runners_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A job file's checkpoints, ./state/<job.name>/checkpoints by default: a test run again
    # (another process, another runner) would resume from them and read nothing.
    monkeypatch.chdir(tmp_path)
    config = {**NAMED, "task.checkpoint.factory": "file"}
    first = TestRunner(Echo, config).add_input("in", ["a", "b"]).add_output("out")
    first.run(timeout=10)
    second = TestRunner(Echo, config).add_input("in", ["c", "d"]).add_output("out")
    assert second.run(timeout=10).outputs("out") == {0: ["c", "d"]}
    assert not (tmp_path / "state").exists()
    again = TestRunner(Echo, config, namespace=first.namespace).add_input("in", ["a", "b"])
    assert again.run(timeout=10).outputs("out") == {0: ["a", "b"]}  # a restart resumes


@pytest.mark.parametrize(
    "checkpoints",
    [
        {"task.checkpoint.factory": "memory"},
        {"task.checkpoint.factory": "file"},
        {"task.checkpoint.factory": "stream", "task.checkpoint.system": "memory"},
    ],
    ids=["memory", "file", "stream"],
)
def test_the_result_holds_the_last_checkpoints_whatever_the_factory(
    checkpoints: dict[str, str],
) -> None:
    result = (
        TestRunner(Echo, {**NAMED, **checkpoints})
        .add_input("in", {0: ["a", "b"], 1: ["c"]})
        .add_output("out")
        .run(timeout=10)
    )
    found = {
        str(task): {ssp.partition: o for ssp, o in cp.items()}
        for task, cp in result.checkpoints.items()
    }
    assert found == {"Partition 0": {0: "1"}, "Partition 1": {1: "0"}}
