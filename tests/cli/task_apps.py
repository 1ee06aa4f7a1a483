"""Task applications (TaskApplication) the CLI tests run through the real `samzapy` command."""

from __future__ import annotations

from typing import Any

from samzapy import (
    EndOfStreamListenerTask,
    FileSystemDescriptor,
    InitableTask,
    KVSerde,
    OutgoingMessageEnvelope,
    RocksDbTableDescriptor,
    StreamTask,
    SystemStream,
    TaskApplication,
    TaskApplicationDescriptor,
)

FILES = FileSystemDescriptor("files")


class RunningCount(InitableTask, StreamTask, EndOfStreamListenerTask):
    """Counts messages per key in table "counts" (RocksDB, so it outlives a run); at the end
    of its input, sends each key's count to files.out."""

    def init(self, context: Any) -> None:
        self.counts = context.get_table("counts")
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        key = envelope.message["k"]
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        for key, count in self.store.all():
            out = SystemStream("files", "out")
            collector.send(OutgoingMessageEnvelope(out, {"key": key, "count": count}, key=key))


class CountKeys(TaskApplication):
    """files.in -> RunningCount (a RocksDB table per task) -> files.out."""

    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        app_desc.with_input_stream(FILES.get_input_descriptor("in", "json"))
        app_desc.with_output_stream(FILES.get_output_descriptor("out", KVSerde("string", "json")))
        app_desc.with_table(RocksDbTableDescriptor("counts", KVSerde("string", "integer")))
        app_desc.with_task_factory(RunningCount)


class NoTask(TaskApplication):
    """A factory that returns something other than a task."""

    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        app_desc.with_input_stream(FILES.get_input_descriptor("in", "json"))
        app_desc.with_task_factory(lambda: "a string")
