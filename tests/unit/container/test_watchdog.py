"""The stall watchdog (task.stall.timeout.ms, task.stall.fail), driven by a ManualClock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import AsyncStreamTask, StreamTask, SystemStreamPartition, TaskError, TaskName
from samzapy.container.progress import TaskProgress
from samzapy.container.watchdog import Stall, Watchdog, assess
from samzapy.metrics import Health
from samzapy.testing import ManualClock, TestRunner

SSP = SystemStreamPartition("memory", "in", 0)


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
        await clock.wait_all_tasks_blocked()
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
        await clock.wait_all_tasks_blocked()
        await clock.advance_and_settle(0.5)
        assert [e["task"] for e in logs if e["event"] == "task_recovered"] == ["Partition 0"]
        assert test.container.health.healthy
        test.container.request_stop("test")
        await asyncio.wait_for(job, 10)


async def test_with_stall_fail_a_stalled_task_fails_the_container() -> None:
    clock = ManualClock()
    test = runner(clock, **{"task.stall.fail": True})
    job = asyncio.ensure_future(test.run_async(timeout=10))
    await clock.wait_all_tasks_blocked()
    await clock.advance_and_settle(0.5)
    await clock.advance_and_settle(1.0)
    with pytest.raises(TaskError, match=r"task 'Partition 0' stalled on memory.in#0 at offset 1"):
        await asyncio.wait_for(job, 10)
    Held.gate.set()


async def test_a_stalled_task_stays_reported_while_it_stops_and_leaves_no_problem_behind() -> None:
    """A share the job runner stops or abandons (its tasks moved, or the group evicted the
    container) ends its run loop: the stall of a task that left is no problem of the process's
    /healthz any more, nor is it reported recovered."""
    clock = ManualClock()
    test = runner(clock, **{"task.shutdown.ms": 1000})
    with capture_logs() as logs:
        job = asyncio.ensure_future(test.run_async(timeout=10))
        await clock.wait_all_tasks_blocked()
        await clock.advance_and_settle(0.5)
        await clock.advance_and_settle(1.0)
        assert test.container is not None
        assert list(test.container.health.problems) == ["stalled:Partition 0"]
        test.container.request_stop("test")
        await clock.advance_and_settle(0.5)
        assert not test.container.health.healthy  # still hung while it drains
        await clock.advance_and_settle(1.0)  # task.shutdown.ms is over: the call is cancelled
        await asyncio.wait_for(job, 10)
    assert test.container.health.healthy
    assert [e["event"] for e in logs if e["event"].startswith("task_")] == ["task_stalled"]
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
        await clock.wait_all_tasks_blocked()
        await clock.advance_and_settle(5.0)
        assert test.container is not None
        test.container.request_stop("test")
        await asyncio.wait_for(job, 10)
    assert [e for e in logs if e["event"] == "task_stalled"] == []


def snapshot(**fields: Any) -> TaskProgress:
    """A task's progress, as TaskInstance.progress() reports it."""
    base: dict[str, Any] = {
        "name": TaskName("Partition 0"),
        "processed": 0,
        "in_flight": 0,
        "windows": 0,
        "commits": 0,
        "buffered": 0,
        "position": None,
        "barrier_pending": False,
        "backpressured": False,
        "stopping": False,
        "finished": False,
        "committed_at": None,
        "committed_processed": 0,
    }
    return TaskProgress(**{**base, **fields})


def assess_at(progress: TaskProgress, now: float, moved_at: float = 0.0) -> Stall | None:
    return assess(progress, moved_at=moved_at, now=now, timeout_s=10, commit_s=5, since=0.0)


def test_assess_a_task_with_input_waiting_that_completes_nothing() -> None:
    waiting = snapshot(buffered=3, position=(SSP, "7"))
    assert assess_at(waiting, now=9.9) is None
    stall = assess_at(waiting, now=10.0)
    assert stall == Stall(
        "completed nothing for 10.0 s",
        "its turn on the event loop (another task or callback holds it)",
    )
    assert assess_at(snapshot(buffered=3), now=10.0, moved_at=5.0) is None
    assert assess_at(snapshot(), now=100.0) is None, "an idle task is not stalled"


@pytest.mark.parametrize(
    ("fields", "waiting_on"),
    [
        ({"in_flight": 2}, "2 call(s) of the task that have not completed"),
        ({"buffered": 1, "backpressured": True}, "the producers (output backpressure"),
        ({"buffered": 1, "barrier_pending": True}, "a window, commit or end-of-stream barrier"),
    ],
)
def test_assess_says_what_a_stalled_task_waits_on(fields: dict[str, Any], waiting_on: str) -> None:
    stall = assess_at(snapshot(**fields), now=10.0)
    assert stall is not None and stall.waiting_on.startswith(waiting_on)


def test_assess_a_task_that_progresses_without_checkpointing() -> None:
    # Three commit intervals plus the timeout: 3 x 5 s + 10 s = 25 s.
    progressing = snapshot(processed=500, committed_processed=100, committed_at=1.0)
    assert assess_at(progressing, now=25.9, moved_at=25.9) is None
    stall = assess_at(progressing, now=26.0, moved_at=26.0)
    assert stall is not None and stall.reason == "no checkpoint for 25.0 s while progressing"
    assert assess_at(snapshot(processed=500, committed_processed=500), 99.0, 99.0) is None
    no_commits = assess(
        progressing, moved_at=99.0, now=99.0, timeout_s=10, commit_s=None, since=0.0
    )
    assert no_commits is None, "without checkpoints only the first rule applies"


def test_assess_leaves_stopping_and_finished_tasks_alone() -> None:
    for fields in ({"stopping": True}, {"finished": True}):
        assert assess_at(snapshot(in_flight=1, **fields), now=1000.0) is None


def test_the_watchdog_reports_a_stall_once_fails_and_recovers() -> None:
    health = Health()
    failures: list[BaseException] = []
    watchdog = Watchdog(timeout_s=10, commit_s=5, fail=True, health=health, on_fail=failures.append)
    watchdog.start(0.0)
    with capture_logs() as logs:
        for now in range(0, 26):
            # Always progressing, never committing.
            watchdog.check([snapshot(processed=100 * (now + 1))], float(now))
    stalled = [e for e in logs if e["event"] == "task_stalled"]
    assert (
        len(stalled) == 1 and stalled[0]["reason"] == "no checkpoint for 25.0 s while progressing"
    )
    assert not health.healthy and len(failures) == 1
    assert isinstance(failures[0], TaskError) and "task.stall.fail is true" in str(failures[0])
    committed = snapshot(processed=2700, committed_processed=2700, committed_at=26.0)
    with capture_logs() as logs:
        watchdog.check([committed], 26.0)
    assert [e["event"] for e in logs] == ["task_recovered"] and health.healthy


def watching(timeout_s: float) -> tuple[Health, Watchdog]:
    """A watchdog started at 0 s that only reports (no commits watched, no failing)."""
    health = Health()
    watchdog = Watchdog(
        timeout_s=timeout_s, commit_s=None, fail=False, health=health, on_fail=print
    )
    watchdog.start(0.0)
    return health, watchdog


def test_a_stall_still_going_says_for_how_long_in_the_health_problem() -> None:
    """/healthz shows the stall as it is now, not as it was when first logged."""
    health, watchdog = watching(timeout_s=10)
    held = snapshot(in_flight=1, position=(SSP, "3"))
    with capture_logs() as logs:
        for now in range(0, 11):
            watchdog.check([held], float(now))
        assert health.problems["stalled:Partition 0"]["reason"] == "completed nothing for 10.0 s"
        moved_on = held._replace(position=(SSP, "4"))
        for now in range(11, 71):
            watchdog.check([moved_on], float(now))
    problem = health.problems["stalled:Partition 0"]
    assert problem["reason"] == "completed nothing for 70.0 s" and problem["offset"] == "4"
    assert [e["event"] for e in logs] == ["task_stalled"]  # logged once


def test_a_task_idle_for_longer_than_the_timeout_is_not_stalled_by_its_next_call() -> None:
    """Idle from 0 s to 30 s (timeout 10 s), then a message whose call takes 5 s: the time
    counts from when input waited, not from the last message completed 30 s before."""
    watchdog = Watchdog(timeout_s=10, commit_s=None, fail=True, health=Health(), on_fail=print)
    watchdog.start(0.0)
    with capture_logs() as logs:
        for now in range(0, 31):
            watchdog.check([snapshot(processed=1)], float(now))
        for now in range(31, 36):  # the call, in flight
            watchdog.check([snapshot(processed=1, in_flight=1)], float(now))
        watchdog.check([snapshot(processed=2)], 36.0)
        for now in range(37, 48):  # the next one never completes: stalled 10 s after it came
            watchdog.check([snapshot(processed=2, in_flight=1)], float(now))
    stalled = [e for e in logs if e["event"] == "task_stalled"]
    assert len(stalled) == 1 and stalled[0]["reason"] == "completed nothing for 10.0 s"


def test_a_stalled_task_that_is_being_stopped_is_not_reported_recovered() -> None:
    health, watchdog = watching(timeout_s=1)
    held = snapshot(in_flight=1, position=(SSP, "3"))
    with capture_logs() as logs:
        watchdog.check([held], 1.0)
        watchdog.check([held._replace(stopping=True)], 2.0)
    assert [e["event"] for e in logs] == ["task_stalled"]
    assert logs[0]["ssp"] == "memory.in#0" and logs[0]["offset"] == "3"
    assert list(health.problems) == ["stalled:Partition 0"]


async def test_the_job_runners_health_sees_readiness_and_stalls() -> None:
    """Under `samzapy run` the Prometheus server reports the JobRunner's Health: the
    container must record readiness and stalls there, not in a Health of its own."""
    import uuid

    from samzapy.config import load_config, resolve
    from samzapy.coordinator.job_runner import JobRunner
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


def test_a_held_event_loop_is_said_once_and_starves_no_task_into_a_stall() -> None:
    """The loop held 8 s (a sync call on it), timeout 3 s: the first check after it finds
    every task behind. It logs event_loop_held; no task is stalled for it, and a task that
    then completes nothing for a timeout is."""
    health = Health()
    failures: list[BaseException] = []
    watchdog = Watchdog(timeout_s=3, commit_s=1, fail=True, health=health, on_fail=failures.append)
    watchdog.start(0.0)
    waiting = snapshot(processed=5, buffered=10, committed_at=0.0, committed_processed=5)
    with capture_logs() as logs:
        watchdog.check([waiting], 0.5)
        watchdog.check([waiting], 8.5)  # the loop was held from 0.5 s to 8.5 s
        for now in (9.0, 9.5, 10.0, 11.0):
            watchdog.check([waiting._replace(committed_at=now)], now)
    assert [e["event"] for e in logs] == ["event_loop_held"]
    assert logs[0]["held_s"] == 8.0 and health.healthy and not failures
    with capture_logs() as logs:
        watchdog.check([waiting._replace(committed_at=11.5)], 11.5)  # 3 s after the return
    assert [e["event"] for e in logs] == ["task_stalled"]
    assert logs[0]["reason"] == "completed nothing for 3.0 s"
