"""A runner run again, or a runner of an earlier one's namespace, is a restart: the streams are
as the earlier run left them, and messages or partitions given that differ are refused rather
than silently left out."""

from __future__ import annotations

import pytest

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    OutgoingMessageEnvelope,
    StreamApplication,
    StreamTask,
    SystemStream,
)
from samzapy.testing import TestRunner


class Echo(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        collector.send(OutgoingMessageEnvelope(SystemStream("memory", "out"), envelope.message))


kafka = KafkaSystemDescriptor("kafka")
lines = kafka.get_input_descriptor("lines", "json")
copies = kafka.get_output_descriptor("copies", "json")


class Copy(StreamApplication):
    def describe(self, app_desc):  # type: ignore[no-untyped-def]
        app_desc.get_input_stream(lines).send_to(app_desc.get_output_stream(copies))


def test_messages_added_after_a_run_are_refused_not_dropped() -> None:
    runner = TestRunner(Echo).add_input("in", ["a"]).add_output("out")
    runner.run(timeout=10)
    runner.add_input("in", ["b", "c"])
    with pytest.raises(ValueError, match=r"input 'in' already exists in namespace 'testrunner-"):
        runner.run(timeout=10)


def test_an_application_input_added_after_a_run_is_refused() -> None:
    runner = TestRunner.of(Copy).add_input_stream(lines, ["a"]).add_output_stream(copies)
    runner.run(timeout=10)
    runner.add_input_stream(lines, {0: ["a"], 1: ["b"]})
    with pytest.raises(ValueError, match=r"input 'lines' already exists .* with 1 partition"):
        runner.run(timeout=10)


def test_a_restart_given_the_same_messages_resumes() -> None:
    first = TestRunner(Echo).add_input("in", {0: ["a", KV("k", "b")]}).add_output("out")
    first.run(timeout=10)
    again = TestRunner(Echo, namespace=first.namespace).add_input("in", ["a", KV("k", "b")])
    assert again.add_output("out").run(timeout=10).outputs("out") == {0: ["a", "b"]}
    assert first.run(timeout=10).outputs("out") == {0: ["a", "b"]}  # run again: the same


def test_an_output_declared_again_with_another_partition_count_is_refused() -> None:
    first = TestRunner(Echo).add_input("in", ["a"]).add_output("out")
    first.run(timeout=10)
    again = TestRunner(Echo, namespace=first.namespace).add_input("in", ["a"])
    with pytest.raises(ValueError, match=r"output 'out' already exists .* with 1 partition"):
        again.add_output("out", partitions=2).run(timeout=10)
