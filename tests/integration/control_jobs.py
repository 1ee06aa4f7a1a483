"""Task classes of the control-message tests, run through the real `samzapy` command.

A two-stage word count: ``Split`` reads lines and repartitions the words through the
intermediate stream ``SAMZAPY_TEST_WORDS``; ``Count`` counts them in the RocksDB store
``counts`` (Kafka changelog: exact across kill -9) and emits every count at end-of-stream to
``SAMZAPY_TEST_OUTPUT``. ``SplitAndCount`` is both stages in one job;
``AsyncSplitAndCount`` the same as an async task.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from samzapy import (
    AsyncStreamTask,
    EndOfStreamListenerTask,
    InitableTask,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    WatermarkListenerTask,
)


def _text(message: Any) -> str:
    return message.decode() if isinstance(message, bytes) else str(message)


class Split(StreamTask):
    def __init__(self) -> None:
        self.words = SystemStream("kafka", os.environ["SAMZAPY_TEST_WORDS"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        for word in _text(envelope.message).split():
            data = word.encode()
            collector.send(OutgoingMessageEnvelope(self.words, data, key=data))


class Count(InitableTask, StreamTask, EndOfStreamListenerTask):
    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")
        self.out = SystemStream("kafka", os.environ["SAMZAPY_TEST_OUTPUT"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = _text(envelope.message)
        self.store.put(word, (self.store.get(word) or 0) + 1)

    def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        with self.store.all() as entries:
            for word, n in entries:
                record = json.dumps({"word": word, "n": n}).encode()
                collector.send(OutgoingMessageEnvelope(self.out, record, key=word.encode()))


class SplitAndCount(Split, Count):
    def __init__(self) -> None:
        Split.__init__(self)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.system_stream_partition.stream == self.words.stream:
            Count.process(self, envelope, collector, coordinator)
        else:
            Split.process(self, envelope, collector, coordinator)


class AsyncSplitAndCount(AsyncStreamTask, InitableTask):
    """``SplitAndCount`` with several calls in flight: stage 1's sends of different lines
    interleave (each word after an await); stage 2 counts with no await between get and put."""

    def init(self, context: Any) -> None:
        self.words = SystemStream("kafka", os.environ["SAMZAPY_TEST_WORDS"])
        self.store = context.get_store("counts")

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.system_stream_partition.stream == self.words.stream:
            word = _text(envelope.message)
            self.store.put(word, (self.store.get(word) or 0) + 1)
            return
        for word in _text(envelope.message).split():
            await asyncio.sleep(0)
            data = word.encode()
            collector.send(OutgoingMessageEnvelope(self.words, data, key=data))


class WatermarkLog(StreamTask, WatermarkListenerTask):
    """Writes every watermark it is given to ``SAMZAPY_TEST_OUTPUT``."""

    def __init__(self) -> None:
        self.out = SystemStream("kafka", os.environ["SAMZAPY_TEST_OUTPUT"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        return None

    def on_watermark(self, watermark: int, collector: Any, coordinator: Any) -> None:
        record = json.dumps({"watermark": watermark}).encode()
        collector.send(OutgoingMessageEnvelope(self.out, record, partition=0))
