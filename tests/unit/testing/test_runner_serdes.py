"""A task runner given the job's real config, serdes included, takes and gives objects."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy import KV, OutgoingMessageEnvelope, SerdeError, StreamTask, SystemStream
from samzapy.testing import TestRunner

#: What the task saw: the type of each key and message, after the job's deserialization.
seen: list[tuple[Any, Any]] = []


class Echo(StreamTask):
    """Sends each message and key on to ``out`` as it got them, noting what it got."""

    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        seen.append((envelope.key, envelope.message))
        out = SystemStream("memory", "out")
        collector.send(OutgoingMessageEnvelope(out, envelope.message, key=envelope.key))


@pytest.fixture(autouse=True)
def _forget_seen() -> None:
    seen.clear()


def test_messages_are_given_and_read_as_objects_through_the_streams_serdes() -> None:
    config = {
        "streams.in.samza.msg.serde": "json",
        "streams.in.samza.key.serde": "string",
        "streams.out.samza.msg.serde": "json",
        "streams.out.samza.key.serde": "json",
    }
    runner = TestRunner(Echo, config).add_input("in", [{"n": 1}, KV("k", [1, "two"])])
    result = runner.add_output("out").run(timeout=10)
    assert seen == [(None, {"n": 1}), ("k", [1, "two"])]  # deserialized by the job
    assert result.keyed_outputs("out") == {0: [KV(None, {"n": 1}), KV("k", [1, "two"])]}
    # The job wrote bytes: the result reads them with the output's serdes.
    assert runner.broker.records("out", 0) == [(None, b'{"n":1}'), (b'"k"', b'[1,"two"]')]


def test_a_systems_default_serde_counts_too() -> None:
    config = {"systems.memory.samza.msg.serde": "json"}
    result = TestRunner(Echo, config).add_input("in", [{"n": 1}]).add_output("out").run(timeout=10)
    assert seen == [(None, {"n": 1})]
    assert result.outputs("out") == {0: [{"n": 1}]}


def test_an_output_on_another_system_is_read_with_that_systems_serde() -> None:
    class ToOutput(StreamTask):
        def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
            collector.send(OutgoingMessageEnvelope(SystemStream("output", "out"), envelope.message))

    config = {
        "systems.output.samza.factory": "memory",
        "systems.output.samza.msg.serde": "json",
        "streams.out.samza.system": "output",
    }
    result = TestRunner(ToOutput, config).add_input("in", [[1, 2]]).run(timeout=10)
    assert result.outputs("out") == {0: [[1, 2]]}


def test_bytes_given_are_the_records_bytes_as_written() -> None:
    # The way to give a record the job cannot read: here, dropped as the config asks.
    config = {"streams.in.samza.msg.serde": "json", "task.drop.deserialization.errors": True}
    TestRunner(Echo, config).add_input("in", [b'{"n":1}', b"{not json", {"n": 2}]).run(timeout=10)
    assert seen == [(None, {"n": 1}), (None, {"n": 2})]


def test_a_message_the_serde_cannot_write_is_named_with_its_place_and_serde() -> None:
    runner = TestRunner(Echo, {"streams.in.samza.msg.serde": "json"})
    runner.add_input("in", {0: [{"n": 1}], 1: [{"n": 2}, {"a set"}]})
    with pytest.raises(
        SerdeError,
        match=r"add_input\('in'\): the 'json' serde \(streams\.in\.samza\.msg\.serde\) cannot "
        r"write message 1 of partition 1 \(\{'a set'\}\)",
    ) as raised:
        runner.run(timeout=10)
    assert isinstance(raised.value.__cause__, SerdeError)  # the serde's own error
    assert seen == []  # refused before the job started


def test_a_key_the_key_serde_cannot_write_names_the_systems_key() -> None:
    runner = TestRunner(Echo, {"systems.memory.samza.key.serde": "integer"})
    runner.add_input("in", [KV(1, "a"), KV("one", "b")])
    with pytest.raises(
        SerdeError,
        match=r"the 'integer' serde \(systems\.memory\.samza\.key\.serde\) cannot write the "
        r"key of message 1 of partition 0 \('one'\)",
    ):
        runner.run(timeout=10)


def test_a_restart_compares_what_was_given_as_written() -> None:
    config = {"streams.in.samza.msg.serde": "json"}
    first = TestRunner(Echo, config).add_input("in", [{"n": 1}])
    first.run(timeout=10)
    again = TestRunner(Echo, config, namespace=first.namespace).add_input("in", [{"n": 1}])
    again.run(timeout=10)  # the same messages: no complaint
    other = TestRunner(Echo, config, namespace=first.namespace).add_input("in", [{"n": 2}])
    with pytest.raises(ValueError, match="other messages than given"):
        other.run(timeout=10)
