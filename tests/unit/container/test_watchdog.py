"""The stall watchdog (task.stall.timeout.ms, task.stall.fail), driven by a ManualClock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import AsyncStreamTask, StreamTask, TaskError
from samzapy.testing import ManualClock, TestRunner


async def settle(rounds: int = 50) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class Held(AsyncStreamTask):
    """Offset 1 waits for ``gate``: the task stops completing anything."""

    gate: asyncio.Event

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.offset == "1":
            await Held.gate.wait()


def runner(clock: ManualClock, **extra: Any) -> TestRunner:
    """Five messages on a stream that does not end (the job runs until stopped)."""
    Held.gate = asyncio.Event()
    config = {"task.stall.timeout.ms": 1000, "task.commit.ms": -1, **extra}
    test = TestRunner(Held, config, clock=clock).add_input("in", {0: []})
    test.broker.create_stream("in", 1)
    for i in range(5):
        test.broker.append("in", 0, None, i)
    return test


async def test_a_task_that_completes_nothing_is_reported_stalled_then_recovered() -> None:
    clock = ManualClock()
    test = runner(clock)
    with capture_logs() as logs:
        job = asyncio.ensure_future(test.run_async(timeout=10))
        await settle()
        await clock.advance_and_settle(0.5)
        assert [e for e in logs if e["event"] == "task_stalled"] == []  # not yet
        await clock.advance_and_settle(1.0)
        stalled = [e for e in logs if e["event"] == "task_stalled"]
        assert len(stalled) == 1
        assert stalled[0]["task"] == "Partition 0"
        assert stalled[0]["ssp"] == "memory.in#0"
        assert stalled[0]["offset"] == "1"
        assert "have not completed" in stalled[0]["waiting_on"]
        assert test.container is not None
        assert not test.container.health.healthy
        assert "stalled:Partition 0" in test.container.health.problems
        await clock.advance_and_settle(2.0)
        assert len([e for e in logs if e["event"] == "task_stalled"]) == 1  # logged once
        Held.gate.set()
        await settle()
        await clock.advance_and_settle(0.5)
        assert [e["task"] for e in logs if e["event"] == "task_recovered"] == ["Partition 0"]
        assert test.container.health.healthy
        test.container.request_stop("test")
        await asyncio.wait_for(job, 10)


async def test_with_stall_fail_a_stalled_task_fails_the_container() -> None:
    clock = ManualClock()
    test = runner(clock, **{"task.stall.fail": True})
    job = asyncio.ensure_future(test.run_async(timeout=10))
    await settle()
    await clock.advance_and_settle(0.5)
    await clock.advance_and_settle(1.0)
    with pytest.raises(TaskError, match=r"task 'Partition 0' stalled on memory.in#0 at offset 1"):
        await asyncio.wait_for(job, 10)
    Held.gate.set()


class Quick(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        return None


async def test_an_idle_task_with_nothing_waiting_is_not_stalled() -> None:
    clock = ManualClock()
    test = TestRunner(Quick, {"task.stall.timeout.ms": 1000}, clock=clock)
    test.add_input("in", {0: []})
    test.broker.create_stream("in", 1)  # never ended: the task waits for input, idle
    with capture_logs() as logs:
        job = asyncio.ensure_future(test.run_async(timeout=10))
        await settle()
        await clock.advance_and_settle(5.0)
        assert test.container is not None
        test.container.request_stop("test")
        await asyncio.wait_for(job, 10)
    assert [e for e in logs if e["event"] == "task_stalled"] == []


class _Tracker:
    def pending(self) -> list[Any]:
        return []


class _Queue:
    def __init__(self) -> None:
        self.queue: list[Any] = []
        self.ssp = "memory.in#0"


class _Task:
    """The attributes of a TaskInstance the watchdog reads."""

    def __init__(self) -> None:
        self.name = "Partition 0"
        self.processed = 0
        self.inflight = 0
        self.finished = False
        self.stopping = False
        self.attention = False
        self.queues = [_Queue()]
        self.trackers = {"memory.in#0": _Tracker()}


class _Router:
    def backpressure(self) -> None:
        return None


class _Loop:
    def __init__(self, task: _Task) -> None:
        self.tasks = [task]
        self.router = _Router()
        self.failures: list[BaseException] = []

    def fail(self, error: BaseException) -> None:
        self.failures.append(error)


def test_a_task_that_progresses_without_checkpointing_is_stalled() -> None:
    from samzapy.container.watchdog import Watchdog
    from samzapy.metrics import Health

    task = _Task()
    loop = _Loop(task)
    health = Health()
    watchdog = Watchdog(loop, timeout_s=10, commit_s=5, fail=True, health=health)  # type: ignore[arg-type]
    watchdog.start(0.0)
    with capture_logs() as logs:
        for now in range(0, 25):
            task.processed += 100  # always progressing, never committing
            watchdog.check(float(now))
        assert [e for e in logs if e["event"] == "task_stalled"] == []  # 3 x 5 s + 10 s = 25 s
        task.processed += 100
        watchdog.check(25.0)
    stalled = [e for e in logs if e["event"] == "task_stalled"]
    assert (
        len(stalled) == 1 and "no checkpoint for 25.0 s while progressing" in stalled[0]["reason"]
    )
    assert not health.healthy and len(loop.failures) == 1
    watchdog.committed(task, 26.0)  # type: ignore[arg-type]
    with capture_logs() as logs:
        watchdog.check(26.0)
    assert [e["event"] for e in logs] == ["task_recovered"] and health.healthy


async def test_the_job_runners_health_sees_readiness_and_stalls() -> None:
    """Under `samzapy run` the Prometheus server reports the JobRunner's Health: the
    container must record readiness and stalls there, not in a Health of its own."""
    import uuid

    from samzapy.config import load_config, resolve
    from samzapy.container.coordinator import JobRunner
    from samzapy.system.inmemory import InMemoryBroker

    namespace = f"watch-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 1)
    for i in range(3):
        broker.append("in", 0, None, i)
    Held.gate = asyncio.Event()
    cfg = resolve(
        load_config(
            text=(
                f"job.name: watch\ntask.class: {__name__}:Held\ntask.inputs: [mem.in]\n"
                f"systems.mem.samza.factory: memory\nsystems.mem.namespace: {namespace}\n"
                "task.stall.timeout.ms: 200\n"
            ),
            env={},
        )
    )
    runner = JobRunner(cfg)
    job = asyncio.ensure_future(runner.run())
    async with asyncio.timeout(10):
        while not (runner.health.ready and not runner.health.healthy):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    assert list(runner.health.problems) == ["stalled:Partition 0"]
    Held.gate.set()
    runner.request_stop("test")
    await asyncio.wait_for(job, 10)
