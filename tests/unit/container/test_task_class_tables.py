"""A task class's tables: the stores of its job file, as ``context.get_table`` gives them."""

from __future__ import annotations

from typing import Any

from samzapy import InitableTask, StreamTask
from samzapy.testing import TestRunner


class CountWords(StreamTask, InitableTask):
    def init(self, context: Any) -> None:
        self.table = context.get_table("counts")
        assert context.get_table("counts") is self.table  # one table per task

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = envelope.message
        count = (self.table.get(word) or 0) + 1
        self.table.put(word, None if word == "drop" else count)


def test_a_task_class_table_counts_its_reads_writes_and_deletes_in_the_task_metrics() -> None:
    config = {
        "stores.counts.factory": "inmemory",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "json",
    }
    runner = TestRunner(CountWords, config).add_input("words", ["a", "b", "a", "drop"])
    task = runner.run(timeout=10).metrics.snapshot()["task.Partition 0"]
    assert (task["counts-gets"], task["counts-puts"], task["counts-deletes"]) == (4, 3, 1)
