"""The commit protocol and the remaining run-loop rules, with plug-in systems and managers.

The classes here are loaded by the container from their ``module:Class`` names, the way a
user's own system or checkpoint manager would be.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs

from samzapy import (
    AsyncStreamTask,
    OutgoingMessageEnvelope,
    RequestScope,
    SerdeError,
    StreamSystemError,
    StreamTask,
    SystemStream,
    SystemStreamPartition,
    TaskFencedError,
    TaskName,
    WindowableTask,
)
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.container.slots import TURN_MESSAGES
from samzapy.system.ports import (
    OffsetBounds,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)
from samzapy.testing import ManualClock, TestRunner

LOG: list[tuple[str, Any]] = []


class RecordingProducer(SystemProducer):
    def __init__(self) -> None:
        self.unflushed = 0

    def send(
        self, system_stream: SystemStream, partition: int | None, key: Any, message: Any
    ) -> None:
        self.unflushed += 1
        LOG.append(("send", message))

    async def flush(self) -> None:
        await asyncio.sleep(0)
        LOG.append(("flush", self.unflushed))
        self.unflushed = 0


class RecordingAdmin(SystemAdmin):
    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        return {s: 1 for s in streams}

    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        return None

    async def offset_bounds(self, ssps: Iterable[Any]) -> dict[Any, OffsetBounds]:
        return {ssp: OffsetBounds(None, "0") for ssp in ssps}


class RecordingFactory(SystemFactory):
    def get_admin(self) -> SystemAdmin:
        return RecordingAdmin()

    def get_consumer(self) -> SystemConsumer:
        raise AssertionError("not an input system")

    def get_producer(self) -> SystemProducer:
        return RecordingProducer()


class RecordingCheckpoints(CheckpointManager):
    def __init__(self, **kwargs: str) -> None:
        self.kwargs = kwargs

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        return None

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        LOG.append(("checkpoint", dict(checkpoint.offsets)))


class Forward(StreamTask):
    def process(self, envelope, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(SystemStream("rec", "out"), envelope.message))
        if envelope.message % 3 == 2:
            coordinator.commit()


def test_commit_flushes_producers_before_writing_the_checkpoint() -> None:
    LOG.clear()
    runner = TestRunner(
        Forward,
        {
            "systems.rec.samza.factory": f"{__name__}:RecordingFactory",
            "task.checkpoint.factory": f"{__name__}:RecordingCheckpoints",
        },
    )
    runner.add_input("in", list(range(9))).run()
    checkpoints = [i for i, e in enumerate(LOG) if e[0] == "checkpoint"]
    assert len(checkpoints) >= 3
    for i in checkpoints:
        covered = int(next(iter(LOG[i][1].values())))
        sends_before = [e for e in LOG[:i] if e[0] == "send"]
        # Every output of a covered message was sent and then flushed before the checkpoint.
        assert len(sends_before) >= covered + 1
        last_send = max(j for j, e in enumerate(LOG[:i]) if e[0] == "send")
        assert any(e[0] == "flush" for e in LOG[last_send:i]), LOG


def test_window_of_a_pooled_sync_task_runs_on_the_pool() -> None:
    threads: list[int] = []

    class Task(WindowableTask, StreamTask):
        def process(self, envelope, collector, coordinator):
            import time

            time.sleep(0.002)

        def window(self, collector, coordinator):
            threads.append(threading.get_ident())

    TestRunner(Task, {"job.container.thread.pool.size": 2, "task.window.ms": 5}).add_input(
        "in", {p: list(range(20)) for p in range(2)}
    ).run()
    assert threads, "window never ran"
    assert threading.get_ident() not in threads


async def test_progress_is_logged_at_the_configured_interval() -> None:
    clock = ManualClock()

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            pass

    runner = TestRunner(Task, {"task.progress.interval.ms": 1000}, clock=clock)
    runner.add_input("in", list(range(10)))
    with capture_logs() as logs:
        job = asyncio.ensure_future(runner.run_async(timeout=5))
        for _ in range(50):
            await asyncio.sleep(0)
            if job.done():
                break
        await job
    # The job ended before a second passed on its clock: no progress line, but a summary.
    assert [e for e in logs if e["event"] == "progress"] == []
    (summary,) = [e for e in logs if e["event"] == "job_finished"]
    assert summary["processed"] == 10


async def test_progress_line_reports_processed_and_rate() -> None:
    clock = ManualClock()
    reached, release = asyncio.Event(), asyncio.Event()

    from samzapy import AsyncStreamTask

    class Task(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            if envelope.message == 5:
                reached.set()
                await release.wait()

    runner = TestRunner(Task, {"task.progress.interval.ms": 1000}, clock=clock)
    runner.add_input("in", list(range(10)))
    with capture_logs() as logs:
        job = asyncio.ensure_future(runner.run_async(timeout=5))
        await reached.wait()
        await clock.advance_and_settle(1.0)
        release.set()
        await job
    (progress,) = [e for e in logs if e["event"] == "progress"]
    assert progress["processed"] == 5
    assert progress["in_flight"] == 1
    assert progress["rate"] > 0


def _file_job(tmp_path: Path, lines: Sequence[str], **extra: Any) -> Any:
    d = tmp_path / "data" / "in"
    d.mkdir(parents=True)
    (d / "0.jsonl").write_text("".join(line + "\n" for line in lines))
    cfg: Mapping[str, Any] = {
        "job.name": "deser",
        "task.class": "x:Y",
        "task.inputs": ["files.in"],
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
        **extra,
    }
    return resolve(load_config(text=json.dumps(cfg)))


class Collect(StreamTask):
    seen: ClassVar[list[Any]] = []

    def process(self, envelope, collector, coordinator):
        Collect.seen.append((envelope.offset, envelope.message))


async def test_undeserializable_message_fails_naming_partition_and_offset(tmp_path: Path) -> None:
    Collect.seen = []
    config = _file_job(tmp_path, ['{"a": 1}', "{not json", '{"a": 3}'])
    with pytest.raises(SerdeError, match=r"offset 1 of files.in#0"):
        await SamzaContainer(config, task_factory=Collect).run()
    assert ("2", {"a": 3}) not in Collect.seen


async def test_drop_deserialization_errors_counts_and_logs_once(tmp_path: Path) -> None:
    Collect.seen = []
    config = _file_job(
        tmp_path,
        ['{"a": 1}', "{bad", "{worse", '{"a": 4}'],
        **{"task.drop.deserialization.errors": True},
    )
    container = SamzaContainer(config, task_factory=Collect)
    with capture_logs() as logs:
        await container.run()
    assert Collect.seen == [("0", {"a": 1}), ("3", {"a": 4})]
    dropped = [e for e in logs if e["event"] == "message_dropped"]
    assert len(dropped) == 1 and dropped[0]["ssp"] == "files.in#0" and dropped[0]["offset"] == "1"
    snapshot = container.metrics.snapshot()
    assert snapshot["container"]["deserialization-errors"] == 2


def test_stream_reset_offset_false_wins_over_system_default(tmp_path: Path) -> None:
    """A stream's explicit samza.reset.offset: false keeps its checkpoint even when the
    system's default.stream.samza.reset.offset is true."""
    seen: list[int] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)
            if envelope.message == 2:
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    config = {"systems.memory.default.stream.samza.reset.offset": True}
    first = TestRunner(Task, config).add_input("in", [0, 1, 2, 3, 4])
    first.run()
    TestRunner(Task, config, namespace=first.namespace).add_input("in", []).run()
    assert seen == [0, 1, 2, 0, 1, 2]  # reset: starts again from the oldest
    seen.clear()
    kept = {**config, "streams.in.samza.reset.offset": False}
    TestRunner(Task, kept, namespace=first.namespace).add_input("in", []).run()
    assert seen == [3, 4]


class FailingProducer(RecordingProducer):
    async def flush(self) -> None:
        await asyncio.sleep(0)
        LOG.append(("flush_failed", self.unflushed))
        raise StreamSystemError("cannot deliver to rec.out partition 0: broker said no")


class FailingFactory(RecordingFactory):
    def get_producer(self) -> SystemProducer:
        return FailingProducer()


def _failing_runner(**extra: Any) -> TestRunner:
    config = {
        "systems.rec.samza.factory": f"{__name__}:FailingFactory",
        "task.checkpoint.factory": f"{__name__}:RecordingCheckpoints",
        **extra,
    }
    return TestRunner(Forward, config).add_input("in", list(range(9)))


def test_failed_send_fails_the_container_before_any_checkpoint() -> None:
    LOG.clear()
    with pytest.raises(StreamSystemError, match="broker said no"):
        _failing_runner().run()
    assert [e for e in LOG if e[0] == "checkpoint"] == []


class FencedProducer(RecordingProducer):
    async def flush(self) -> None:
        raise TaskFencedError("the transactional producer 'p' was fenced: another container")


class FencedFactory(RecordingFactory):
    def get_producer(self) -> SystemProducer:
        return FencedProducer()


def test_a_producer_fenced_at_a_commit_is_container_fenced_naming_the_task() -> None:
    """docs/deploy.md: "A task fenced by its new owner is container_fenced, a warning,
    instead of task_failed", and events about a task carry ``task``: a fence found by the
    commit's flush (under exactly-once, the task's own producer) names the task too, and no
    checkpoint is written after it, even under task.drop.producer.errors."""
    LOG.clear()
    runner = TestRunner(
        Forward,
        {
            "systems.rec.samza.factory": f"{__name__}:FencedFactory",
            "task.checkpoint.factory": f"{__name__}:RecordingCheckpoints",
            "task.drop.producer.errors": True,
        },
    )
    with capture_logs() as logs, pytest.raises(TaskFencedError, match="was fenced") as raised:
        runner.add_input("in", list(range(9))).run()
    assert raised.value.task_name == TaskName("Partition 0")
    assert [e for e in LOG if e[0] == "checkpoint"] == []
    [fenced] = [e for e in logs if e["event"] == "container_fenced"]
    assert (fenced["log_level"], fenced["task"]) == ("warning", TaskName("Partition 0"))
    assert not [e for e in logs if e["event"] == "task_failed"]


def test_drop_producer_errors_keeps_going_and_counts() -> None:
    LOG.clear()
    result = _failing_runner(**{"task.drop.producer.errors": True}).run()
    assert [e for e in LOG if e[0] == "checkpoint"][-1] == (
        "checkpoint",
        {SystemStreamPartition("memory", "in", 0): "8"},
    )
    assert result.metrics.snapshot()["container"]["producer-errors"] >= 1


class SlowProducer(RecordingProducer):
    """Holds the job back after 5 unflushed messages until the test releases it."""

    gate: asyncio.Future[None] | None = None
    released = False

    def backpressure(self) -> asyncio.Future[None] | None:
        if SlowProducer.released or self.unflushed < 5:
            return None
        if SlowProducer.gate is None:
            SlowProducer.gate = asyncio.get_running_loop().create_future()
            LOG.append(("held", self.unflushed))
        return SlowProducer.gate


class SlowFactory(RecordingFactory):
    def get_producer(self) -> SystemProducer:
        return SlowProducer()


@pytest.mark.parametrize("task_kind", ["sync", "async"])
async def test_producer_backpressure_holds_tasks_back_until_released(task_kind: str) -> None:
    LOG.clear()
    SlowProducer.gate, SlowProducer.released = None, False
    seen: list[int] = []

    class SyncTask(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)
            collector.send(OutgoingMessageEnvelope(SystemStream("rec", "out"), envelope.message))

    class AsyncTask(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            SyncTask.process(self, envelope, collector, coordinator)  # type: ignore[arg-type]

    task = SyncTask if task_kind == "sync" else AsyncTask
    runner = TestRunner(task, {"systems.rec.samza.factory": f"{__name__}:SlowFactory"})
    n = 3 * TURN_MESSAGES
    runner.add_input("in", list(range(n)))
    job = asyncio.ensure_future(runner.run_async(timeout=10))
    for _ in range(100):
        await asyncio.sleep(0)
    # Held back at the start of a turn once 5 sends are unflushed: a sync task may have
    # begun its last turn with up to 4 (a short turn when the queue was still filling) and
    # finishes that turn (TURN_MESSAGES); an async one stops at 5.
    assert 5 <= len(seen) < 5 + TURN_MESSAGES
    assert any(e[0] == "held" for e in LOG)
    held_at = len(seen)
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(seen) == held_at
    assert SlowProducer.gate is not None
    SlowProducer.released = True  # the recording producer never drains by itself
    SlowProducer.gate.set_result(None)
    await asyncio.wait_for(job, 10)
    assert seen == list(range(n))


class DeferredProducer(RecordingProducer):
    """Delivers what was sent before a flush began only when that flush ends, some time later
    (as a Kafka producer does): a commit that overlaps another task's flush must wait for it."""

    durable: ClassVar[set[Any]] = set()

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Any] = []

    def send(
        self, system_stream: SystemStream, partition: int | None, key: Any, message: Any
    ) -> None:
        self.pending.append(message)

    async def flush(self) -> None:
        taken, self.pending = self.pending, []
        await asyncio.sleep(0.002)
        DeferredProducer.durable.update(taken)


class DeferredFactory(RecordingFactory):
    def get_producer(self) -> SystemProducer:
        return DeferredProducer()


class CoveredCheckpoints(RecordingCheckpoints):
    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        for ssp, offset in checkpoint.offsets.items():
            covered = {(ssp.partition, n) for n in range(int(offset) + 1)}
            missing = covered - DeferredProducer.durable
            if missing:
                LOG.append(("not_durable", task_name, sorted(missing)[:3]))
        LOG.append(("checkpoint", dict(checkpoint.offsets)))


def test_a_checkpoint_waits_for_output_another_tasks_flush_is_carrying() -> None:
    LOG.clear()
    DeferredProducer.durable = set()

    class Emit(StreamTask):
        def process(self, envelope, collector, coordinator):
            p = envelope.system_stream_partition.partition
            collector.send(
                OutgoingMessageEnvelope(SystemStream("rec", "out"), (p, int(envelope.offset)))
            )
            coordinator.commit()

    runner = TestRunner(
        Emit,
        {
            "systems.rec.samza.factory": f"{__name__}:DeferredFactory",
            "task.checkpoint.factory": f"{__name__}:CoveredCheckpoints",
        },
    )
    runner.add_input("in", {p: list(range(30)) for p in range(3)}).run()
    assert [e for e in LOG if e[0] == "checkpoint"], "no checkpoint written"
    assert [e for e in LOG if e[0] == "not_durable"] == []
