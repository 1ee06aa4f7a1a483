"""Task applications (TaskApplication) that the integration tests run through `samzapy run`.

Each takes the topics it reads and writes from the job file's own keys (``app.words``,
``app.counts``), as the application tests' do.
"""

from __future__ import annotations

from typing import Any

from samzapy import (
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

#: The table WordCounter counts in: a RocksDB store with a changelog on the broker.
TABLE = "word-counts"


class WordCounter(InitableTask, StreamTask):
    """Counts each word (a string message) in the table and sends its running count, keyed by
    the word, to ``app.counts``."""

    def init(self, context: Any) -> None:
        self.counts = context.get_table(TABLE)
        self.out = SystemStream("kafka", str(context.config["app.counts"]))

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessageEnvelope(self.out, count, key=word))


class WordCounts(TaskApplication):
    """``app.words`` -> WordCounter (its table changelogged on kafka) -> ``app.counts``."""

    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        kafka = KafkaSystemDescriptor("kafka")
        words = kafka.get_input_descriptor("words", "string")
        words.with_physical_name(str(app_desc.config["app.words"]))
        counts = kafka.get_output_descriptor("counts", KVSerde("string", "json"))
        counts.with_physical_name(str(app_desc.config["app.counts"]))
        table = RocksDbTableDescriptor(TABLE, KVSerde("string", "integer"))
        (
            app_desc.with_input_stream(words)
            .with_output_stream(counts)
            .with_table(table.with_changelog_enabled())
            .with_default_system(kafka)
            .with_task_factory(WordCounter)
        )
