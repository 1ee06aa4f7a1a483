"""Origins where the order of sends is not the order of a task's calls: sends from other
threads, sends after an async call completed, calls cancelled at a stop, several tasks
reading one partition, keyless records. None of them may make a reader drop a record it
never applied (a duplicate is the worst they may cause)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs
from test_control_messages import UPSTREAM
from test_origin_dedup import count_downstream

from samzapy import (
    AsyncStreamTask,
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    StreamTask,
)
from samzapy.api.context import RequestScope
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.container.inputs import InputQueue, TaskInputs
from samzapy.container.origins import OriginCollector, reading, with_origins
from samzapy.container.slots import SlotContext, SlotState, inline_slot
from samzapy.container.task_collector import MessageInProgress
from samzapy.control import USER_MESSAGE, USER_MESSAGE_WITH_ORIGIN, decode
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.metrics.registry import Timer
from samzapy.testing import TestRunner

WORDS = SystemStream("memory", "words")
POOL = concurrent.futures.ThreadPoolExecutor(4)


class ThreadedSplitter(StreamTask):
    """Sends all words but the last from worker threads, then the last one itself, all to
    one partition: the threads' sends reach the loop after the call's own."""

    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        *rest, last = envelope.message.split()
        sends = [
            POOL.submit(collector.send, OutgoingMessageEnvelope(WORDS, w, key="same")) for w in rest
        ]
        concurrent.futures.wait(sends)
        collector.send(OutgoingMessageEnvelope(WORDS, last, key="same"))


def test_sends_from_other_threads_carry_no_origin_and_nothing_is_dropped() -> None:
    """On the thread pool (on the loop thread, a helper thread's sends reach the loop only
    once the task yields: after its end-of-stream here, whatever their origin)."""
    lines = {0: ["a b c", "d e f"], 1: ["g h", "i j k"]}
    settings = {**UPSTREAM, "job.name": "split", "job.container.thread.pool.size": 2}
    upstream = TestRunner(ThreadedSplitter, settings)
    upstream.add_input("lines", lines).run(timeout=20)
    kinds = Counter(
        decode(record)[0] for p in range(2) for _k, record in upstream.broker.records("words", p)
    )
    assert kinds[USER_MESSAGE_WITH_ORIGIN] == 4  # the last word of each line
    assert kinds[USER_MESSAGE] == 7
    expected = Counter(w for ls in lines.values() for line in ls for w in line.split())
    assert count_downstream(upstream.namespace)[0] == expected


class Splitter(StreamTask):
    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        for word in envelope.message.split():
            collector.send(OutgoingMessageEnvelope(WORDS, word, key="k"))


class StallingReader(AsyncStreamTask):
    """Stops the container at ``slow`` and outlasts task.shutdown.ms there (cancelled)."""

    stalling: ClassVar[bool] = True
    done: ClassVar[list[str]] = []

    async def process_async(
        self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any
    ) -> None:
        if envelope.message == "slow" and type(self).stalling:
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)
            await asyncio.sleep(5)
        type(self).done.append(envelope.message)


def test_a_call_cancelled_at_a_stop_is_processed_after_the_restart() -> None:
    """Its record was admitted when the call started; the task does not commit what it
    admitted ahead of its offsets (checkpoint_skipped), so the restart reads it again."""
    upstream = TestRunner(Splitter, {**UPSTREAM, "job.name": "split"})
    upstream.add_input("lines", {0: ["a b slow c d"], 1: ["e f"]}).run(timeout=20)
    settings = {"job.name": "read", "task.shutdown.ms": 100, "task.max.concurrency": 1}
    StallingReader.done = []
    StallingReader.stalling = True
    with capture_logs() as logs:
        TestRunner(StallingReader, settings, namespace=upstream.namespace).add_intermediate(
            "words", partitions=2
        ).run(timeout=20)
    assert "slow" not in StallingReader.done
    [timed_out] = [e for e in logs if e["event"] == "shutdown_timed_out"]
    assert timed_out["log_level"] == "warning" and timed_out["shutdown_ms"] == 100
    assert timed_out["in_flight"] == 1 and len(timed_out["tasks"]) == 1
    StallingReader.stalling = False
    TestRunner(StallingReader, settings, namespace=upstream.namespace).add_intermediate(
        "words", partitions=2
    ).run(timeout=20)
    assert "slow" in StallingReader.done
    assert set(StallingReader.done) == set(["a", "b", "slow", "c", "d", "e", "f"])


def test_tasks_sharing_an_envelope_each_drop_a_replay() -> None:
    """A partition read by several tasks (a broadcast input): the consumer queues one
    envelope to each, and each task's reader sees its origin (none unwraps it)."""
    upstream_ssp = SystemStreamPartition("kafka", "lines", 0)
    ssp = SystemStreamPartition("kafka", "words", 0)
    writer = WriterOrigins("w", {upstream_ssp: 0})
    record = writer.tag(upstream_ssp, "7", 0, b"body")
    seen: dict[str, list[Any]] = {"A": [], "B": []}
    readers = {name: ReaderOrigins([ssp]) for name in seen}
    calls = {
        name: reading(
            lambda env, c, k, name=name: seen[name].append(env.message),
            readers[name],
            is_async=False,
            threaded=False,
        )
        for name in seen
    }
    for _ in range(2):  # the record, then a writer's replay of it
        env = IncomingMessageEnvelope(ssp, "1", None, "word")
        env.origin = record
        calls["A"](env, None, None)
        calls["B"](env, None, None)
    assert seen == {"A": ["word"], "B": ["word"]}


class KeylessSplitter(StreamTask):
    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        for word in envelope.message.split():
            collector.send(OutgoingMessageEnvelope(WORDS, word))


def test_a_keyless_record_with_an_origin_goes_where_its_origin_says() -> None:
    """A replay must send it to the partition it went to the first time."""
    placements = []
    for _ in range(2):
        upstream = TestRunner(KeylessSplitter, {**UPSTREAM, "job.name": "keyless"})
        upstream.add_input("lines", {0: ["a b c d e f g h"]}).run(timeout=20)
        placements.append(
            {
                p: [
                    body
                    for _k, r in upstream.broker.records("words", p)
                    if (decoded := decode(r))[0] == USER_MESSAGE_WITH_ORIGIN
                    and (body := decoded[1])
                ]
                for p in range(2)
            }
        )
    assert placements[0] == placements[1]
    assert all(placements[0].values())  # spread over both partitions


class Forgot(AsyncStreamTask):
    def process_async(  # type: ignore[override]
        self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any
    ) -> None:
        return None


def test_a_process_async_that_returns_no_awaitable_is_never_dropped() -> None:
    runner = TestRunner(Forgot, {"task.drop.process.errors": True}).add_input("lines", {0: ["a"]})
    with pytest.raises(Exception, match="process_async must return an awaitable"):
        runner.run(timeout=20)


class OutOfMemory(StreamTask):
    def process(self, envelope: IncomingMessageEnvelope, collector: Any, coordinator: Any) -> None:
        raise MemoryError("no room")


def test_a_memory_error_is_never_dropped() -> None:
    """The process, not the message, is in trouble: the job stops."""
    runner = TestRunner(OutOfMemory, {"task.drop.process.errors": True})
    runner.add_input("lines", {0: ["a"]})
    with pytest.raises(Exception, match="no room"):
        runner.run(timeout=20)


def test_a_resumed_partition_s_epoch_moves_at_its_first_call_not_at_a_commit_before_it() -> None:
    """The partition went back (its first message is below the checkpointed offset): the
    epoch moves on just before that message's call. A commit that runs while the message
    waits saves the old epoch with the old offset; saving the new one would make the
    restart move it on a second time, and the readers take the replay as new records."""
    went_back = SystemStreamPartition("memory", "lines", 0)
    writer = WriterOrigins.starting("t", [went_back], saved=None, checkpointed={went_back: "41"})
    queue = InputQueue(went_back, 100)
    queue.queue.append(IncomingMessageEnvelope(went_back, "0", None, "line"))
    state = SlotState(due=1)  # a commit is due before anything is processed
    committed: list[dict[str, int]] = []
    during_call: list[int] = []

    async def barrier() -> bool:
        committed.append(writer.to_json())
        state.due = 0
        return len(committed) < 2

    def process(envelope: Any, collector: Any, coordinator: Any) -> None:
        during_call.append(writer.epochs[went_back])
        state.due = 1  # then the second barrier ends the slot

    async def run() -> None:
        loop = asyncio.get_running_loop()
        current = MessageInProgress()
        router: Any = SimpleNamespace(send=None)  # the task sends nothing
        collector = OriginCollector(
            router, loop, TaskName("t"), writer, is_async=False, current=current
        )
        ctx = SlotContext(
            name=TaskName("t"),
            state=state,
            inputs=TaskInputs([queue], space_freed=lambda: None),
            trackers={went_back: OffsetTracker("41")},
            collector=collector,
            coordinator=None,  # type: ignore[arg-type]
            latency=Timer(),
            clock=None,  # type: ignore[arg-type]
            backpressure=lambda: None,
            barrier=barrier,
            on_control=lambda env: None,
            fail=lambda exc: None,
            close_iterators=None,
            executor=None,
            track_call_starts=False,
            current=current,
        )
        wrapped, ctx = with_origins(process, ctx, None, is_async=False)
        await inline_slot(ctx, wrapped)

    asyncio.run(run())
    assert committed[0] == {str(went_back): 0}  # the message waited: the epoch as it was
    assert during_call == [1] and committed[1] == {str(went_back): 1}
