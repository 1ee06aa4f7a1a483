"""A TestRunner given a wrong argument says so at the call, naming it, instead of running
with a surprise or failing later inside the in-memory system."""

from __future__ import annotations

import pytest

from samzapy import KafkaSystemDescriptor, StreamTask
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
