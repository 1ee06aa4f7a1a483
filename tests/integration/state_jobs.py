"""Stateful task classes the state tests run through the real `samzapy` command.

Each keeps its counts in the store ``counts`` (string keys, long values, a Kafka changelog in
the tests' configs) and emits nothing: the store's state is read back from its changelog.
"""

from __future__ import annotations

import asyncio
from typing import Any

from samzapy import (
    AsyncStreamTask,
    InitableTask,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
)

STORE = "counts"


def _word(message: Any) -> str:
    return message.decode() if isinstance(message, bytes) else str(message)


class WordCount(InitableTask, StreamTask):
    """Counts each word (the message, bytes or str) in the store ``counts``."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = _word(envelope.message)
        store = self.store
        store.put(word, (store.get(word) or 0) + 1)


class SlowWordCount(InitableTask, AsyncStreamTask):
    """Counts like WordCount, asynchronously; a word starting with ``slow`` takes
    ``app.slow.s`` seconds first (a call in flight that releasing its task waits for)."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)
        self.slow_s = float(context.config["app.slow.s"])

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = _word(envelope.message)
        if word.startswith("slow"):
            await asyncio.sleep(self.slow_s)
        store = self.store
        store.put(word, (store.get(word) or 0) + 1)


class UndeclaredStore(InitableTask, StreamTask):
    """Asks for the store ``nope``, which no config declares."""

    def init(self, context: Any) -> None:
        self.store = context.get_store("nope")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        raise AssertionError("never reached: init fails")


class BadValue(InitableTask, StreamTask):
    """Puts a str value into ``counts``, whose msg.serde is long: the serde refuses it."""

    def init(self, context: Any) -> None:
        self.store = context.get_store(STORE)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.store.put(_word(envelope.message), "not a long")


class WordTotals(WordCount):
    """Counts like WordCount and sends each word's new total, keyed by the word, to the
    stream ``app.totals`` names (``system.stream``): the running totals of every word."""

    def init(self, context: Any) -> None:
        super().init(context)
        system, _, stream = str(context.config["app.totals"]).partition(".")
        self.totals = SystemStream(system, stream)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = _word(envelope.message)
        store = self.store
        total = (store.get(word) or 0) + 1
        store.put(word, total)
        collector.send(OutgoingMessageEnvelope(self.totals, str(total).encode(), key=word.encode()))


class TaggedTotals(WordTotals):
    """Like WordTotals, to the task's own partition of ``app.totals``, the value being
    ``<total> <app.container>``: which container counted it."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.tag = str(context.config["app.container"])

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        word = _word(envelope.message)
        store = self.store
        total = (store.get(word) or 0) + 1
        store.put(word, total)
        collector.send(
            OutgoingMessageEnvelope(
                self.totals,
                f"{total} {self.tag}".encode(),
                key=word.encode(),
                partition=envelope.system_stream_partition.partition,
            )
        )
