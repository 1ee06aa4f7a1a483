"""A writer that fails and restarts from its checkpoint writes part of its output twice; a
samzapy reader of the intermediate stream applies it once (at-least-once, in memory).

Each test runs the upstream job twice in one namespace: the first run commits part-way
(the task asks at the line ``commit``) and fails at the line ``boom``, the second resumes
from that checkpoint and replays what the first had sent since. The downstream job then
counts the intermediate stream. The tests check the duplicates are really on the stream, so
they would fail without the reader's drop rule.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, ClassVar

import pytest
from test_control_messages import UPSTREAM, Counter2, counted

from samzapy import (
    AsyncStreamTask,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    StreamTask,
    TaskError,
)
from samzapy.api.system import SystemStream
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.control import USER_MESSAGE, USER_MESSAGE_WITH_FLOOR, USER_MESSAGE_WITH_ORIGIN, decode
from samzapy.control.wire import decode_origin, source_id
from samzapy.testing import TestRunner

WORDS = SystemStream("memory", "words")
LINES = {
    0: ["a b c", "commit", "d e f", "g h", "boom", "i j"],
    1: ["k l", "m n o", "commit", "p", "boom", "q r s t"],
}
EXPECTED = Counter(
    w
    for lines in LINES.values()
    for line in lines
    for w in line.split()
    if line not in ("commit", "boom")
)


class CrashOnce:
    """What the writers share: fail at ``boom`` while ``crashing``; commit at ``commit``."""

    crashing: ClassVar[bool] = True

    def words(self, envelope: IncomingMessageEnvelope, coordinator: Any) -> list[str]:
        line = envelope.message
        if line == "boom":
            if type(self).crashing:
                raise RuntimeError("boom")
            return []
        if line == "commit":
            coordinator.commit()
            return []
        return list(line.split())


class SyncSplitter(CrashOnce, StreamTask):
    crashing: ClassVar[bool] = True

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        for word in self.words(envelope, coordinator):
            collector.send(OutgoingMessageEnvelope(WORDS, word, key=word))


class AsyncSplitter(CrashOnce, AsyncStreamTask):
    """Several calls in flight; each sends after awaits, interleaved with the others."""

    crashing: ClassVar[bool] = True

    async def process_async(
        self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any
    ) -> None:
        words = self.words(envelope, coordinator)
        for word in words:
            await asyncio.sleep(0)
            collector.send(OutgoingMessageEnvelope(WORDS, word, key=word))


def count_downstream(namespace: str) -> tuple[Counter[str], TestRunner]:
    """Run the counting job over the intermediate stream of ``namespace``: its counts."""
    downstream = (
        TestRunner(Counter2, {"job.name": "count"}, namespace=namespace)
        .add_intermediate("words", partitions=2)
        .add_output("counts", partitions=2)
    )
    downstream.run(timeout=20)
    return counted(downstream.broker), downstream


def user_records(runner: TestRunner) -> tuple[int, int]:
    """(records with an origin, records without) on the intermediate stream."""
    kinds: Counter[int] = Counter()
    for p in range(2):
        for _key, record in runner.broker.records("words", p):
            kinds[decode(record)[0]] += 1
    return kinds[USER_MESSAGE_WITH_ORIGIN] + kinds[USER_MESSAGE_WITH_FLOOR], kinds[USER_MESSAGE]


@pytest.mark.parametrize(
    ("task", "config"),
    [
        (SyncSplitter, {}),
        (SyncSplitter, {"job.container.thread.pool.size": 2}),
        (AsyncSplitter, {"task.max.concurrency": 1}),
        (AsyncSplitter, {"task.max.concurrency": 4}),
    ],
    ids=["sync", "thread-pool", "async", "async-concurrent"],
)
def test_a_restarted_writer_s_replay_is_counted_once(
    task: type[CrashOnce], config: dict[str, Any]
) -> None:
    settings = {**UPSTREAM, "job.name": "split", "task.commit.ms": 3_600_000, **config}
    task.crashing = True
    first = TestRunner(task, settings).add_input("lines", LINES)
    with pytest.raises(TaskError, match="boom"):
        first.run(timeout=20)
    task.crashing = False
    TestRunner(task, settings, namespace=first.namespace).add_input("lines", LINES).run(timeout=20)
    tagged, untagged = user_records(first)
    assert untagged == 0
    assert tagged > sum(EXPECTED.values())  # the replay wrote part of the output again
    assert count_downstream(first.namespace)[0] == EXPECTED


def test_the_reader_s_bookkeeping_is_checkpointed_and_bounded() -> None:
    settings = {**UPSTREAM, "job.name": "split"}
    SyncSplitter.crashing = False
    upstream = TestRunner(SyncSplitter, settings).add_input("lines", LINES)
    upstream.run(timeout=20)
    counts, downstream = count_downstream(upstream.namespace)
    assert counts == EXPECTED
    container = downstream.container
    assert container is not None
    checkpoints = InMemoryCheckpointManager.checkpoints_for(container.checkpoint_namespace)
    assert checkpoints
    for checkpoint in checkpoints.values():
        assert checkpoint.control is not None
        applied = checkpoint.control["origins"]["applied"]
        assert applied
        # One entry per (writer task, input partition) that sent to the partition.
        for sources in applied.values():
            writer = f"split-{upstream.namespace}/"
            assert set(sources) <= {
                source_id(f"{writer}Partition 0", "memory.lines.0").hex(),
                source_id(f"{writer}Partition 1", "memory.lines.1").hex(),
            }
            for epoch, _offset, _ordinal in sources.values():
                assert epoch == 0


def test_an_async_writer_with_calls_in_flight_together_sends_its_floor() -> None:
    """Its calls' sends interleave: each record carries the oldest call in flight (type 4)."""
    settings = {**UPSTREAM, "job.name": "split", "task.max.concurrency": 4}
    AsyncSplitter.crashing = False
    upstream = TestRunner(AsyncSplitter, settings).add_input("lines", LINES)
    upstream.run(timeout=20)
    kinds: Counter[int] = Counter()
    for p in range(2):
        for _key, record in upstream.broker.records("words", p):
            kind, _body = decode(record)
            kinds[kind] += 1
            if kind == USER_MESSAGE_WITH_FLOOR:
                origin = decode_origin(record)
                assert origin.floor is not None and origin.floor <= origin.offset
    assert kinds[USER_MESSAGE_WITH_FLOOR] == sum(EXPECTED.values())


class LateSender(AsyncStreamTask):
    """Sends one word in the call and one from a task it leaves running after the call."""

    async def process_async(
        self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any
    ) -> None:
        collector.send(OutgoingMessageEnvelope(WORDS, envelope.message, key="now"))
        if envelope.message == "line 199":  # the last: the task ends the stream after it
            await self.pending
        if envelope.message != "first":
            return

        async def later() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            collector.send(OutgoingMessageEnvelope(WORDS, "later", key="later"))

        self.pending = asyncio.get_running_loop().create_task(later())


def test_a_send_made_after_its_call_completed_carries_no_origin() -> None:
    """Nothing says a replay would send it again, in the same place: at-least-once."""
    settings = {**UPSTREAM, "job.name": "late", "task.max.concurrency": 2}
    lines = ["first", *(f"line {i}" for i in range(200))]
    upstream = TestRunner(LateSender, settings).add_input("lines", {0: lines})
    upstream.run(timeout=20)
    kinds = {}
    for p in range(2):
        for _key, record in upstream.broker.records("words", p):
            kind, body = decode(record)
            if kind in (USER_MESSAGE_WITH_FLOOR, USER_MESSAGE):
                kinds[body] = kind
    assert kinds[b'"first"'] == USER_MESSAGE_WITH_FLOOR
    assert kinds[b'"later"'] == USER_MESSAGE


def test_a_stream_with_origins_off_gets_plain_framed_records() -> None:
    settings = {**UPSTREAM, "job.name": "split", "streams.words.samza.origins": False}
    SyncSplitter.crashing = False
    upstream = TestRunner(SyncSplitter, settings).add_input("lines", LINES)
    upstream.run(timeout=20)
    assert user_records(upstream) == (0, sum(EXPECTED.values()))
