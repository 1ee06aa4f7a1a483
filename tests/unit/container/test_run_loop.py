"""The run loop's guarantees (issue: core container, points 1-8), through the public API."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import random
import threading
import time
from collections import defaultdict
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from samzapy import (
    KV,
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    IncomingMessageEnvelope,
    InitableTask,
    OutgoingMessageEnvelope,
    RequestScope,
    StreamTask,
    SystemStream,
    SystemStreamPartition,
    TaskCallbackTimeoutError,
    TaskError,
    TaskName,
    WatermarkListenerTask,
    WindowableTask,
)
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.container.slots import ASYNC_TURN, TURN_MESSAGES
from samzapy.control import EndOfStreamMessage, WatermarkMessage, encode_control, frame
from samzapy.testing import ManualClock, TestRunner

OUT = SystemStream("memory", "out")


def ssp(stream: str, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition("memory", stream, partition)


class Recorder:
    """Shared, thread-safe event log for one test (tasks are instantiated by the container)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[Any, ...]] = []

    def add(self, *event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


# -- 1. round-robin choice and bounded memory ---------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_round_robin_across_partitions_no_partition_starves(kind: str) -> None:
    order: list[int] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            order.append(envelope.system_stream_partition.partition)

    class Async(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            order.append(envelope.system_stream_partition.partition)  # completes at once

    msgs = {p: list(range(3 * TURN_MESSAGES)) for p in range(3)}
    TestRunner(Task if kind == "sync" else Async).add_input("in", msgs).run()
    assert len(order) == 9 * TURN_MESSAGES
    # Every partition is served long before any other could run dry.
    first = {p: order.index(p) for p in range(3)}
    # A sync task's turn is up to TURN_MESSAGES messages (slots.py); an async task's slot
    # yields every ASYNC_TURN calls that complete at once.
    turn = TURN_MESSAGES if kind == "sync" else ASYNC_TURN
    assert max(first.values()) <= 2 * turn, first
    # No partition gets a long uninterrupted run while others wait.
    longest, run = 1, 1
    for a, b in itertools.pairwise(order):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    assert longest <= 2 * turn, longest


def test_round_robin_within_a_task_over_its_partitions() -> None:
    order: list[str] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            order.append(envelope.system_stream_partition.stream)

    TestRunner(Task).add_input("a", list(range(50))).add_input("b", list(range(50))).run()
    # One task reads both streams: it alternates between them message by message.
    assert order[:10] == ["a", "b"] * 5 or order[:10] == ["b", "a"] * 5


def test_memory_stays_bounded_when_task_is_slower_than_input() -> None:
    seen_max: list[int] = [0]
    holder: dict[str, Any] = {}

    class Slow(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            container = holder["runner"].container
            if container is not None:
                buffered = sum(t.progress().buffered for t in container.tasks)
                seen_max[0] = max(seen_max[0], buffered)
            await asyncio.sleep(0)

    runner = TestRunner(Slow, {"systems.memory.samza.fetch.threshold": 20})
    holder["runner"] = runner
    runner.add_input("in", {p: list(range(2000)) for p in range(2)}).run()
    # 20 messages per system, 10 per partition queue, plus the end-of-stream marker each.
    assert 0 < seen_max[0] <= 22


# -- 2. tasks and partitions --------------------------------------------------------------------


def test_one_task_per_partition_count_is_max_over_inputs() -> None:
    seen: dict[str, set[SystemStreamPartition]] = defaultdict(set)
    names: set[str] = set()

    class Task(InitableTask, StreamTask):
        def init(self, context):
            self.name = context.task_name
            names.add(str(context.task_name))
            assert context.system_stream_partitions == {
                s
                for s in (ssp("a", int(self.name.split()[1])), ssp("b", int(self.name.split()[1])))
                if not (s.stream == "a" and s.partition >= 3)
            }

        def process(self, envelope, collector, coordinator):
            seen[self.name].add(envelope.system_stream_partition)

    runner = TestRunner(Task)
    runner.add_input("a", {p: [p] for p in range(3)})
    runner.add_input("b", {p: [p] for p in range(5)})
    result = runner.run()
    assert names == {f"Partition {k}" for k in range(5)}
    for k in range(5):
        expected = {ssp("b", k)} | ({ssp("a", k)} if k < 3 else set())
        assert seen[f"Partition {k}"] == expected
    assert set(result.checkpoints) == {TaskName.for_partition(k) for k in range(5)}


def test_broadcast_inputs_reach_every_task() -> None:
    got: dict[str, list[Any]] = defaultdict(list)

    class Task(InitableTask, StreamTask):
        def init(self, context):
            self.name = str(context.task_name)

        def process(self, envelope, collector, coordinator):
            if envelope.system_stream_partition.stream == "side":
                got[self.name].append(envelope.message)

    runner = TestRunner(Task, {"task.broadcast.inputs": ["memory.side#0"]})
    runner.add_input("in", {p: [p] for p in range(3)})
    runner.add_input("side", ["x", "y"])
    runner.run()
    assert dict(got) == {f"Partition {k}": ["x", "y"] for k in range(3)}


# -- 3. sync tasks: loop thread by default, a pool above 1 --------------------------------------


def test_sync_task_runs_on_loop_thread_by_default() -> None:
    threads: set[int] = set()
    loop_threads: set[int] = set()

    class Task(InitableTask, StreamTask):
        def init(self, context):
            loop_threads.add(threading.get_ident())

        def process(self, envelope, collector, coordinator):
            threads.add(threading.get_ident())

    TestRunner(Task).add_input("in", {p: list(range(20)) for p in range(4)}).run()
    assert threads == loop_threads


def test_thread_pool_runs_tasks_in_parallel_never_one_task_twice() -> None:
    rec = Recorder()
    active: dict[str, int] = defaultdict(int)
    overall = [0, 0]  # current, max

    class Task(InitableTask, WindowableTask, StreamTask):
        def init(self, context):
            self.name = str(context.task_name)

        def process(self, envelope, collector, coordinator):
            with rec.lock:
                active[self.name] += 1
                overall[0] += 1
                overall[1] = max(overall[1], overall[0])
                if active[self.name] > 1:
                    rec.events.append(("overlap", self.name))
                rec.events.append(("thread", threading.get_ident()))
            time.sleep(0.002)
            with rec.lock:
                active[self.name] -= 1
                overall[0] -= 1

        def window(self, collector, coordinator):
            rec.add("window_thread", threading.get_ident())

    TestRunner(Task, {"job.container.thread.pool.size": 4}).add_input(
        "in", {p: list(range(15)) for p in range(4)}
    ).run()
    assert rec.of("overlap") == []
    assert overall[1] > 1, "tasks never ran in parallel"
    assert threading.get_ident() not in {e[1] for e in rec.of("thread")}


# -- 4. task.max.concurrency ---------------------------------------------------------------------


def _concurrency_task(rec: Recorder, delays: dict[int, float] | None = None) -> type:
    class Task(InitableTask, AsyncStreamTask):
        inflight: ClassVar[dict[str, int]] = defaultdict(int)

        def init(self, context):
            self.name = str(context.task_name)

        async def process_async(self, envelope, collector, coordinator):
            Task.inflight[self.name] += 1
            rec.add("invoke", self.name, int(envelope.offset), Task.inflight[self.name])
            delay = (delays or {}).get(int(envelope.offset), random.random() * 0.003)
            await asyncio.sleep(delay)
            Task.inflight[self.name] -= 1
            rec.add("complete", self.name, int(envelope.offset))

    return Task


def test_concurrency_one_completion_happens_before_next_invocation() -> None:
    rec = Recorder()
    TestRunner(_concurrency_task(rec)).add_input("in", {p: list(range(30)) for p in range(2)}).run()
    assert max(e[3] for e in rec.of("invoke")) == 1
    for name in ("Partition 0", "Partition 1"):
        evs = [e for e in rec.events if e[1] == name]
        # strictly alternating invoke(n), complete(n), invoke(n+1), ...
        assert [(e[0], e[2]) for e in evs] == [
            (kind, n) for n in range(30) for kind in ("invoke", "complete")
        ]


def test_concurrency_bounds_in_flight_invokes_in_order_completes_out_of_order() -> None:
    rec = Recorder()
    random.seed(7)
    task = _concurrency_task(rec)
    TestRunner(task, {"task.max.concurrency": 4}).add_input(
        "in", {p: list(range(200)) for p in range(2)}
    ).run()
    inflight = [e[3] for e in rec.of("invoke")]
    assert max(inflight) == 4
    for name in ("Partition 0", "Partition 1"):
        invoked = [e[2] for e in rec.of("invoke") if e[1] == name]
        completed = [e[2] for e in rec.of("complete") if e[1] == name]
        assert invoked == list(range(200))
        assert sorted(completed) == list(range(200))
        assert completed != invoked, "completions should go out of order with random delays"


@pytest.mark.parametrize("kind", ["asyncio_future", "concurrent_future", "done_future"])
def test_process_async_accepts_futures(kind: str) -> None:
    pool = concurrent.futures.ThreadPoolExecutor(2)

    class Task(AsyncStreamTask):
        def process_async(self, envelope, collector, coordinator):
            if kind == "concurrent_future":

                def work() -> None:
                    time.sleep(0.001)
                    collector.send(OutgoingMessageEnvelope(OUT, envelope.message * 10))

                return pool.submit(work)
            fut = asyncio.get_running_loop().create_future()
            collector.send(OutgoingMessageEnvelope(OUT, envelope.message * 10))
            if kind == "done_future":
                fut.set_result(None)
            else:
                asyncio.get_running_loop().call_later(0.001, fut.set_result, None)
            return fut

    result = (
        TestRunner(Task, {"task.max.concurrency": 1})
        .add_input("in", [1, 2, 3])
        .add_output("out")
        .run()
    )
    pool.shutdown()
    assert result.outputs("out") == {0: [10, 20, 30]}
    assert result.checkpoints[TaskName("Partition 0")] == {ssp("in", 0): "2"}


def test_process_async_must_return_an_awaitable() -> None:
    class Task(AsyncStreamTask):
        def process_async(self, envelope, collector, coordinator):
            return None

    with pytest.raises(TaskError, match="must return an awaitable, got NoneType"):
        TestRunner(Task).add_input("in", [1]).run()


# -- 5. window and commit: exclusive, never at start-up ----------------------------------------


class _Gate:
    """An asyncio.Event created lazily on the running loop."""

    def __init__(self) -> None:
        self.event: asyncio.Event | None = None

    def get(self) -> asyncio.Event:
        if self.event is None:
            self.event = asyncio.Event()
        return self.event


async def test_window_runs_only_with_nothing_in_flight_and_blocks_new_calls() -> None:
    rec = Recorder()
    clock = ManualClock()
    release = _Gate()
    window_running = [False]

    class Task(WindowableTask, AsyncStreamTask):
        inflight = 0

        async def process_async(self, envelope, collector, coordinator):
            if window_running[0]:
                rec.add("process_during_window")
            Task.inflight += 1
            rec.add("invoke", int(envelope.offset))
            if int(envelope.offset) < 3:
                await release.get().wait()
            Task.inflight -= 1

        async def window(self, collector, coordinator):
            window_running[0] = True
            rec.add("window", Task.inflight)
            await asyncio.sleep(0.01)
            window_running[0] = False

    runner = TestRunner(
        Task, {"task.max.concurrency": 3, "task.window.ms": 1000}, clock=clock
    ).add_input("in", list(range(6)))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    assert [e[1] for e in rec.of("invoke")] == [0, 1, 2]
    assert rec.of("window") == [], "window must not fire at start-up"
    await clock.advance_and_settle(1.0)
    # The window is due but three calls are in flight: it waits, and blocks new calls.
    assert rec.of("window") == []
    assert [e[1] for e in rec.of("invoke")] == [0, 1, 2]
    release.get().set()
    await asyncio.wait_for(job, 10)
    assert rec.of("window") == [("window", 0)]
    assert rec.of("process_during_window") == []
    # The window ran before offsets 3..5 were invoked.
    kinds = [e[0] if e[0] == "window" else e[1] for e in rec.events]
    assert kinds.index("window") < kinds.index(3)


async def test_commit_waits_for_in_flight_and_covers_only_contiguous_completed() -> None:
    clock = ManualClock()
    gates: dict[int, asyncio.Event] = {}
    done: list[int] = []

    class Task(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            n = int(envelope.offset)
            if n == 2:
                gates[n] = asyncio.Event()
                await gates[n].wait()
            done.append(n)
            if n == 5:
                coordinator.commit(RequestScope.CURRENT_TASK)

    runner = TestRunner(
        Task, {"task.max.concurrency": 4, "task.commit.ms": 1000}, clock=clock
    ).add_input("in", list(range(8)))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    # 0, 1, 3, 4, 5 completed; 2 is held. The commit asked for at 5 must wait for 2.
    assert sorted(done) == [0, 1, 3, 4, 5]
    from samzapy.checkpoint.memory import InMemoryCheckpointManager

    ns = runner.container.checkpoint_namespace
    assert InMemoryCheckpointManager.checkpoints_for(ns) == {}
    gates[2].set()
    result = await asyncio.wait_for(job, 10)
    history = InMemoryCheckpointManager.history_for(ns)
    written = [dict(cp.offsets)[ssp("in", 0)] for _, cp in history]
    # The commit taken with 2 now complete covers 0..5 (nothing in flight then), and the
    # final one covers everything; no checkpoint ever named an offset past an unfinished one.
    assert written[0] == "5"
    assert written[-1] == "7"
    assert result.checkpoints[TaskName("Partition 0")] == {ssp("in", 0): "7"}


async def test_periodic_commit_fires_on_timer_not_at_start_up() -> None:
    clock = ManualClock()
    from samzapy.checkpoint.memory import InMemoryCheckpointManager

    hold = _Gate()

    class Task(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            if int(envelope.offset) == 3:
                await hold.get().wait()

    runner = TestRunner(Task, {"task.commit.ms": 500}, clock=clock).add_input("in", list(range(5)))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    ns = runner.container.checkpoint_namespace
    assert InMemoryCheckpointManager.history_for(ns) == []
    hold.get().set()
    await clock.wait_all_tasks_blocked()
    await clock.advance_and_settle(0.5)
    await asyncio.wait_for(job, 10)
    offsets = [
        dict(cp.offsets)[ssp("in", 0)] for _, cp in InMemoryCheckpointManager.history_for(ns)
    ]
    assert offsets[-1] == "4"


# -- 6. restart resumes after the last checkpoint -----------------------------------------------


def test_restart_resumes_at_the_next_offset() -> None:
    seen: list[int] = []

    class StopAtFour(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)
            if envelope.message == 4:
                coordinator.commit(RequestScope.CURRENT_TASK)
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    first = TestRunner(StopAtFour).add_input("in", list(range(10)))
    result = first.run()
    assert seen == [0, 1, 2, 3, 4]
    assert result.checkpoints[TaskName("Partition 0")] == {ssp("in", 0): "4"}

    seen.clear()

    class Rest(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)

    TestRunner(Rest, namespace=first.namespace).add_input("in", list(range(10))).run()
    assert seen == [5, 6, 7, 8, 9]


# -- 7. failures and callback timeouts ----------------------------------------------------------


async def test_callback_timeout_fails_the_container_naming_task_partition_offset() -> None:
    clock = ManualClock()

    class Hang(AsyncStreamTask):
        def process_async(self, envelope, collector, coordinator):
            fut = asyncio.get_running_loop().create_future()
            if int(envelope.offset) < 2:
                fut.set_result(None)
            return fut

    runner = TestRunner(Hang, {"task.callback.timeout.ms": 200}, clock=clock)
    runner.add_input("in", list(range(5)))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    assert not job.done()
    await clock.advance_and_settle(0.1)
    assert not job.done()
    await clock.advance_and_settle(0.2)
    with pytest.raises(TaskCallbackTimeoutError, match=r"'Partition 0' on memory.in#0 at offset 2"):
        await asyncio.wait_for(job, 5)


def test_callback_timeout_is_off_by_default() -> None:
    class Slowish(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            await asyncio.sleep(0.05)

    TestRunner(Slowish).add_input("in", [1, 2]).run()


@pytest.mark.parametrize("concurrency", [1, 4])
def test_failure_stops_container_and_checkpoints_nothing_after_failed_message(
    concurrency: int,
) -> None:
    class Boom(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            n = int(envelope.offset)
            if n == 6:
                await asyncio.sleep(0.01)
                raise ValueError("bad message 6")
            collector.send(OutgoingMessageEnvelope(OUT, n))
            coordinator.commit()

    runner = TestRunner(Boom, {"task.max.concurrency": concurrency})
    runner.add_input("in", list(range(20))).add_output("out")
    with capture_logs() as logs, pytest.raises(TaskError) as err:
        runner.run()
    assert isinstance(err.value.__cause__, ValueError)
    assert err.value.offset == "6"
    assert err.value.ssp == ssp("in", 0)
    assert err.value.task_name == "Partition 0"
    failures = [e for e in logs if e["event"] == "task_failed"]
    assert len(failures) == 1
    assert failures[0]["task"] == "Partition 0" and failures[0]["offset"] == "6"
    from samzapy.checkpoint.memory import InMemoryCheckpointManager

    history = InMemoryCheckpointManager.history_for(runner.container.checkpoint_namespace)
    assert history, "commits before the failure should have been written"
    assert all(int(dict(cp.offsets)[ssp("in", 0)]) <= 5 for _, cp in history)


def test_sync_failure_raises_task_error_with_cause() -> None:
    class Boom(StreamTask):
        def process(self, envelope, collector, coordinator):
            if envelope.message == "bad":
                raise KeyError("nope")

    with pytest.raises(
        TaskError, match=r"process\(\) of task 'Partition 0' failed on memory.in#0 at offset 1"
    ) as err:
        TestRunner(Boom).add_input("in", ["ok", "bad", "ok"]).run()
    assert isinstance(err.value.__cause__, KeyError)


class _RaisesOwn(StreamTask):
    """Raises ``error`` (a BaseException the task's own code raises) on the message 'bad'."""

    error: ClassVar[BaseException] = asyncio.CancelledError()

    def process(self, envelope, collector, coordinator):
        if envelope.message == "bad":
            raise self.error


class _AsyncRaisesOwn(AsyncStreamTask):
    error: ClassVar[BaseException] = asyncio.CancelledError()

    async def process_async(self, envelope, collector, coordinator):
        await asyncio.sleep(0)
        if envelope.message == "bad":
            raise self.error


@pytest.mark.parametrize("error", [asyncio.CancelledError(), SystemExit(0), KeyboardInterrupt()])
@pytest.mark.parametrize(
    ("task", "config"),
    [(_RaisesOwn, {}), (_RaisesOwn, {"job.container.thread.pool.size": 2}), (_AsyncRaisesOwn, {})],
)
def test_a_base_exception_of_the_task_s_own_fails_it_naming_the_offset(
    task: type, config: dict[str, Any], error: BaseException
) -> None:
    """A CancelledError the task's code raises (not a stop's) hung the job, and SystemExit
    exited 0: each fails the task like any error, at its message, nothing after it
    checkpointed."""

    class Raising(task):  # type: ignore[misc,valid-type]
        pass

    Raising.error = error
    runner = TestRunner(Raising, config).add_input("in", ["ok", "bad", "ok"])
    with pytest.raises(TaskError, match=r"failed on memory.in#0 at offset 1") as err:
        runner.run(timeout=10)
    assert type(err.value.__cause__) is type(error)


def test_a_sync_process_that_returns_a_coroutine_fails_instead_of_losing_the_message() -> None:
    class Forgot(StreamTask):
        def process(self, envelope, collector, coordinator):
            return asyncio.sleep(0)

    with pytest.raises(TaskError, match=r"offset 0: TypeError\(.process returned an awaitable"):
        TestRunner(Forgot).add_input("in", [1]).run(timeout=10)


def test_a_failure_in_init_fails_the_container() -> None:
    class BadInit(InitableTask, StreamTask):
        def init(self, context):
            raise RuntimeError("no config")

        def process(self, envelope, collector, coordinator):
            pass

    with pytest.raises(TaskError, match=r"init\(\) of task 'Partition 0' failed"):
        TestRunner(BadInit).add_input("in", [1]).run()


class FailsInHook(
    WindowableTask, WatermarkListenerTask, EndOfStreamListenerTask, ClosableTask, StreamTask
):
    """Asks a commit at ``commit``, a stop at ``stop``; the hook ``failing`` raises once the
    task has processed ``b``."""

    failing: ClassVar[str] = ""

    def __init__(self) -> None:
        self.after_b = False

    def process(self, envelope, collector, coordinator):
        self.after_b |= envelope.message == "b"
        if envelope.message == "commit":
            coordinator.commit()
        elif envelope.message == "stop":
            coordinator.shutdown()

    def _hook(self, name: str) -> None:
        if name == FailsInHook.failing and self.after_b:
            raise RuntimeError(f"{name} failed")

    def window(self, collector, coordinator):
        self._hook("window")

    def on_watermark(self, watermark, collector, coordinator):
        self._hook("on_watermark")

    def on_end_of_stream(self, collector, coordinator):
        self._hook("on_end_of_stream")

    def close(self):
        self._hook("close")


#: What follows ``a``, ``commit`` and ``b`` on the framed input for each hook to run: nothing
#: (the stream stays open: the window fires), a watermark, the end, a stop.
AFTER_B = {
    "window": [],
    "on_watermark": [WatermarkMessage("t0", 1, 5)],
    "on_end_of_stream": [EndOfStreamMessage("t0", 1)],
    "close": ["stop", EndOfStreamMessage("t0", 1)],
}
DROPPING = {"task.drop.process.errors": True, "task.dead.letter.stream": "memory.dlq"}


@pytest.mark.parametrize("pool", [1, 2], ids=["inline", "pool"])
@pytest.mark.parametrize("drops", [{}, DROPPING], ids=["failing", "dropping"])
@pytest.mark.parametrize("hook", list(AFTER_B))
def test_a_failure_in_a_hook_fails_the_job_under_the_drop_keys_too(
    hook: str, drops: dict[str, Any], pool: int
) -> None:
    """README and docs/configuration.md: a failure that is not one message's fails the job
    even with task.drop.process.errors, and nothing after it is committed: the only
    checkpoint is the one the task asked for before it."""
    FailsInHook.failing = hook
    config = {
        "task.window.ms": 10,
        "job.container.thread.pool.size": pool,
        "streams.mid.samza.msg.serde": "string",
        **drops,
    }
    runner = TestRunner(FailsInHook, config).add_intermediate("mid", partitions=1)
    runner.broker.create_stream("mid", 1)
    for item in ["a", "commit", "b", *AFTER_B[hook]]:
        record = frame(item.encode()) if isinstance(item, str) else encode_control(item)
        runner.broker.append("mid", 0, None, record)
    with pytest.raises(TaskError, match=rf"{hook}\(\) of task 'Partition 0' failed"):
        runner.run(timeout=10)
    assert runner.container is not None
    history = InMemoryCheckpointManager.history_for(runner.container.checkpoint_namespace)
    assert [(task, c.offsets) for task, c in history] == [
        (TaskName("Partition 0"), {ssp("mid", 0): "1"})
    ]
    if drops:
        assert runner.broker.records("dlq", 0) == []


# -- 8. end-of-stream, close, shutdown ----------------------------------------------------------


def test_end_of_stream_then_close_then_commit_and_finish() -> None:
    rec = Recorder()

    class Task(InitableTask, EndOfStreamListenerTask, ClosableTask, AsyncStreamTask):
        def init(self, context):
            self.name = str(context.task_name)
            self.count = 0

        async def process_async(self, envelope, collector, coordinator):
            await asyncio.sleep(0.001)
            self.count += 1

        async def on_end_of_stream(self, collector, coordinator):
            rec.add("eos", self.name, self.count)
            collector.send(OutgoingMessageEnvelope(OUT, [self.name, self.count]))

        def close(self):
            rec.add("close", self.name)

    runner = (
        TestRunner(Task, {"task.max.concurrency": 8})
        .add_input("in", {0: list(range(40)), 1: list(range(25))})
        .add_output("out")
    )
    result = runner.run()
    assert sorted(rec.of("eos")) == [("eos", "Partition 0", 40), ("eos", "Partition 1", 25)]
    assert sorted(rec.of("close")) == [("close", "Partition 0"), ("close", "Partition 1")]
    assert all(e[0] == "eos" for e in rec.events[:2])
    assert sorted(map(tuple, result.outputs("out")[0])) == [
        ("Partition 0", 40),
        ("Partition 1", 25),
    ]
    assert result.checkpoints == {
        TaskName("Partition 0"): {ssp("in", 0): "39"},
        TaskName("Partition 1"): {ssp("in", 1): "24"},
    }


def test_shutdown_current_task_waits_for_every_task() -> None:
    processed: dict[str, int] = defaultdict(int)

    class Task(InitableTask, StreamTask):
        def init(self, context):
            self.name = str(context.task_name)

        def process(self, envelope, collector, coordinator):
            processed[self.name] += 1
            if self.name == "Partition 0" and envelope.message == 0:
                coordinator.shutdown(RequestScope.CURRENT_TASK)
            if self.name == "Partition 1" and envelope.message == 500:
                coordinator.shutdown(RequestScope.CURRENT_TASK)

    TestRunner(Task).add_input("in", {0: list(range(5000)), 1: list(range(5000))}).run()
    # Partition 0 asked first but kept going until Partition 1 asked too.
    assert processed["Partition 1"] >= 501
    assert processed["Partition 0"] > 1
    assert processed["Partition 1"] < 5000


def test_shutdown_all_tasks_stops_the_container_and_commits() -> None:
    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            collector.send(OutgoingMessageEnvelope(OUT, envelope.message))
            if envelope.message == 9:
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    result = TestRunner(Task).add_input("in", list(range(1000))).add_output("out").run()
    assert result.outputs("out")[0] == list(range(10))
    assert result.checkpoints[TaskName("Partition 0")] == {ssp("in", 0): "9"}


@pytest.mark.parametrize("pool", [0, 2])
def test_coordinator_requests_from_the_thread_pool_reach_the_loop(tmp_path: Any, pool: int) -> None:
    """A call on the thread pool asks for a commit, then for the container to stop, in a job
    with an intermediate stream on the memory system and file checkpoints (the stop drains
    the stream first): each request is handed to the loop's thread (the stop raised 'no
    running event loop' there)."""
    mid = SystemStream("memory", "mid")

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            if envelope.system_stream_partition.stream == "mid":
                collector.send(OutgoingMessageEnvelope(OUT, envelope.message))
                return
            collector.send(OutgoingMessageEnvelope(mid, envelope.message, partition=0))
            if envelope.message == 4:
                coordinator.commit()
            if envelope.message == 9:
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    config = {
        "job.container.thread.pool.size": pool,
        "task.commit.ms": -1,
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path),
    }
    runner = TestRunner(Task, config).add_input("in", list(range(1000))).add_output("out")
    with capture_logs() as logs:
        result = runner.add_intermediate("mid").run(timeout=10)
    assert result.outputs("out")[0][:10] == list(range(10))  # drained: what reached mid, out
    events = [e["event"] for e in logs]
    assert "intermediate_streams_drained" in events and "task_failed" not in events
    written = json.loads((tmp_path / "Partition_0.json").read_text())
    assert int({o["stream"]: o["offset"] for o in written["offsets"]}["in"]) >= 9


def test_a_request_scope_that_is_no_request_scope_fails_the_call() -> None:
    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            coordinator.shutdown("all_tasks_in_container")

    with pytest.raises(TaskError, match=r"scope must be a RequestScope .* got 'all_tasks_in"):
        TestRunner(Task).add_input("in", [1, 2]).run(timeout=10)


def test_keyed_inputs_and_outputs_partitioned_by_key() -> None:
    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            collector.send(OutgoingMessageEnvelope(OUT, envelope.message, key=envelope.key))

    words = [KV(w, i) for i, w in enumerate(["apple", "pear", "fig", "apple", "kiwi", "fig"])]
    result = TestRunner(Task).add_input("in", words).add_output("out", partitions=4).run()
    by_key: dict[str, set[int]] = defaultdict(set)
    for p, kvs in result.keyed_outputs("out").items():
        for kv in kvs:
            by_key[kv.key].add(p)
    from samzapy.system.partitioner import partition_for

    assert {k: ps for k, ps in by_key.items()} == {
        w: {partition_for(w.encode(), 4)} for w in ("apple", "pear", "fig", "kiwi")
    }


def test_envelope_fields() -> None:
    got: list[IncomingMessageEnvelope] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            got.append(envelope)

    TestRunner(Task).add_input("in", [KV("k", {"a": 1})]).run()
    (env,) = got
    assert env.system_stream_partition == ssp("in", 0)
    assert env.offset == "0" and env.key == "k" and env.message == {"a": 1}


def test_a_finished_tasks_checkpoint_age_is_0_and_a_stop_makes_the_container_not_ready() -> None:
    """An ended task makes no more commits: its final checkpoint stays current (an alert on
    the age would otherwise fire for every finished task). A stop asked drains the container:
    /readyz answers 503 from then on."""

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            pass

    runner = TestRunner(Task, {"task.checkpoint.factory": "memory"})
    result = runner.add_input("in", {0: list(range(10)), 1: list(range(5))}).run(timeout=10)
    time.sleep(0.2)  # an age that kept growing would read 0.2 s at least
    snap = result.metrics.snapshot()
    assert [snap[f"task.Partition {p}"]["checkpoint-age-seconds"] for p in (0, 1)] == [0, 0]
    container = result.container
    container.health.ready = True
    container.request_stop("SIGTERM")
    assert container.health.ready is False


async def test_a_pooled_sync_calls_position_is_its_message_not_the_next_queued() -> None:
    """What the stall watchdog names for a sync task on the thread pool: the message its call
    is on (offset 3 here), not the next one waiting."""
    entered, release = threading.Event(), threading.Event()

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            if envelope.offset == "3":
                entered.set()
                release.wait(10)

    runner = TestRunner(Task, {"job.container.thread.pool.size": 2})
    running = asyncio.ensure_future(runner.add_input("in", list(range(6))).run_async(timeout=20))
    try:
        assert await asyncio.to_thread(entered.wait, 10)
        assert runner.container is not None
        (task,) = runner.container.tasks
        assert task.progress().position == (SystemStreamPartition("memory", "in", 0), "3")
    finally:
        release.set()
        await running


def test_output_stream_created_on_first_send_with_configured_partitions() -> None:
    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            p = envelope.system_stream_partition.partition
            collector.send(
                OutgoingMessageEnvelope(
                    SystemStream("memory", "fresh"), envelope.message, partition=p
                )
            )

    runner = TestRunner(Task, {"streams.fresh.partitions": 2})
    result = runner.add_input("in", {0: list(range(50)), 1: list(range(30))}).run(timeout=10)
    assert result.outputs("fresh") == {0: list(range(50)), 1: list(range(30))}


def test_metrics_per_task_and_per_container() -> None:
    class Task(WindowableTask, StreamTask):
        def process(self, envelope, collector, coordinator):
            pass

        def window(self, collector, coordinator):
            pass

    result = TestRunner(Task).add_input("in", {0: list(range(10)), 1: list(range(5))}).run()
    snap = result.metrics.snapshot()
    assert snap["container"]["messages-processed"] == 15
    assert snap["task.Partition 0"]["messages-processed"] == 10
    assert snap["task.Partition 1"]["process-latency"]["count"] == 5
    assert snap["task.Partition 0"]["in-flight"] == 0
    assert snap["task.Partition 0"]["commits"] >= 1
    assert snap["task.Partition 0"]["windows"] == 0
    # The container's commits are its tasks' commits; checkpoint records are counted apart.
    task_commits = sum(snap[f"task.Partition {p}"]["commits"] for p in (0, 1))
    assert snap["container"]["commits"] == task_commits
    assert "checkpoints-written" in snap["container"]


def test_a_class_that_is_not_a_task_is_a_config_error() -> None:
    from samzapy import ConfigError

    class NotATask:
        def process(self, envelope, collector, coordinator):
            pass

    with pytest.raises(
        ConfigError, match=r"task\.class: .*NotATask must subclass samzapy\.StreamTask"
    ):
        TestRunner(NotATask).add_input("in", [1]).run()
