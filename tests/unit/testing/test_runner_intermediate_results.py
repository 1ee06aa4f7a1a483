"""A result read from an intermediate stream the job writes and reads back holds the messages
as sent, not the stream's framed records with the control messages among them."""

from __future__ import annotations

from samzapy import (
    KV,
    KafkaSystemDescriptor,
    KVSerde,
    OutgoingMessageEnvelope,
    StreamApplication,
    StreamTask,
    SystemStream,
)
from samzapy.control.wire import (
    EndOfStreamMessage,
    WatermarkMessage,
    encode_control,
    frame,
    frame_with_compact_origin,
    frame_with_origin,
    origin_prefix,
    source_id,
    with_event_time,
)
from samzapy.system.serde import SerdeRegistry
from samzapy.testing import TestRunner
from samzapy.testing.framed import FramedReader


class ViaMid(StreamTask):
    def process(self, envelope, collector, coordinator):  # type: ignore[no-untyped-def]
        if envelope.system_stream_partition.stream == "in":
            out = OutgoingMessageEnvelope(SystemStream("memory", "mid"), envelope.message)
        else:
            out = OutgoingMessageEnvelope(SystemStream("memory", "out"), envelope.message)
        collector.send(out)


def test_a_task_jobs_intermediate_stream_reads_back_as_its_messages() -> None:
    result = (
        TestRunner(ViaMid)
        .add_input("in", ["a", {"n": 1}])
        .add_intermediate("mid")
        .add_output("out")
        .run(timeout=10)
    )
    assert result.outputs("out") == {0: ["a", {"n": 1}]}
    assert result.outputs("mid") == {0: ["a", {"n": 1}]}  # no frames, no end-of-stream


kafka = KafkaSystemDescriptor("kafka")
lines = kafka.get_input_descriptor("lines", "json")
words = kafka.get_output_descriptor("words", KVSerde("string", "json"))


class Words(StreamApplication):
    def describe(self, app_desc):  # type: ignore[no-untyped-def]
        (
            app_desc.get_input_stream(lines)
            .flat_map(str.split)
            .partition_by(lambda w: w, lambda w: len(w), KVSerde("string", "json"), "by-word")
            .send_to(app_desc.get_output_stream(words))
        )


def test_an_applications_partition_by_stream_reads_back_keyed() -> None:
    runner = TestRunner.of(Words).add_input_stream(lines, ["a bb"]).add_output_stream(words)
    result = runner.run(timeout=10)
    by_word = f"test-job-{runner.namespace}-partition_by-by-word"
    found = [kv for records in result.keyed_outputs(by_word).values() for kv in records]
    assert sorted(found) == [KV("a", 1), KV("bb", 2)]


def test_a_replayed_copy_and_the_control_messages_are_left_out() -> None:
    json_serde = SerdeRegistry({}).get("json")
    prefix = origin_prefix(source_id("job-1/Partition 0", "memory.in.0"), 0)
    first = frame_with_origin(prefix, 0, 0, b'"a"')
    records = [
        (None, first),
        (None, with_event_time(frame_with_origin(prefix, 1, 0, b'"b"'), 5)),
        (None, encode_control(WatermarkMessage("Partition 0", 1, 5))),
        (None, first),  # the restart's replay of offset 0
        (None, frame_with_compact_origin(prefix, 1, 0, b'"b"')),  # a replay, in type 5
        (None, frame_with_compact_origin(prefix, 2, 0, b'"d"')),
        (b'"k"', frame(b'"c"')),
        (None, encode_control(EndOfStreamMessage("Partition 0", 1))),
    ]
    read = FramedReader(json_serde, json_serde).read(records)
    assert read == [(None, "a"), (None, "b"), (None, "d"), ("k", "c")]
