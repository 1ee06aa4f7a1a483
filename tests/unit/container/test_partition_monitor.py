"""The partition-count monitor (``container/partition_monitor.py``): a partition added to an
input while the job runs stops the job, after a clean commit of what it processed, with
``input_partitions_changed`` and the start-up check's error; a restart then fails on that
check. A look-up that fails is logged once and the job goes on; an input that no longer exists
is logged once as missing, the others still checked."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.container.clock import LoopClock
from samzapy.container.partition_monitor import PartitionCountMonitor, changed_counts


class Nothing(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


def write(root: Path, partition: int, lines: int) -> None:
    (root / "in").mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"n": i}) + "\n" for i in range(lines))
    (root / "in" / f"{partition}.jsonl").write_text(text)


def config(tmp_path: Path, *overrides: str) -> Any:
    text = f"""
job.name: monitored
task.class: {__name__}:Nothing
task.inputs: [files.in]
task.commit.ms: -1
task.checkpoint.factory: file
task.checkpoint.dir: {tmp_path / "checkpoints"}
systems.files.samza.factory: file
systems.files.path: {tmp_path / "data"}
systems.files.follow: true
systems.files.poll.interval.ms: 20
job.coordinator.monitor-partition-change.frequency.ms: 30
"""
    return resolve(load_config(text=text, env={}, overrides=overrides))


def checkpointed(tmp_path: Path) -> dict[str, list[Any]]:
    return {
        path.stem: [(o["partition"], o["offset"]) for o in json.loads(path.read_text())["offsets"]]
        for path in sorted((tmp_path / "checkpoints").glob("*.json"))
    }


async def until(condition: Any, what: str) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_only_the_counts_that_differ_are_changes() -> None:
    a, b = SystemStream("k", "a"), SystemStream("k", "b")
    assert changed_counts({a: 2, b: 4}, {a: 2, b: 4}) == []
    assert changed_counts({b: 4, a: 2}, {a: 3, b: 4}) == [(a, 2, 3)]


async def test_a_partition_added_while_running_stops_the_job_after_a_clean_commit(
    tmp_path: Path,
) -> None:
    write(tmp_path / "data", 0, 3)
    write(tmp_path / "data", 1, 2)
    container = SamzaContainer(config(tmp_path))
    with capture_logs() as logs:
        run = asyncio.ensure_future(container.run())
        await until(lambda: container.processed == 5, "the first 5 messages")
        await asyncio.sleep(0.1)  # several checks that find nothing changed
        assert not run.done()
        write(tmp_path / "data", 2, 4)
        with pytest.raises(
            StreamSystemError,
            match=r"input files.in had 2 partitions when the job started and has 3 now; "
            r"a stream's partition count must never change",
        ):
            await asyncio.wait_for(run, 10)

    (changed,) = [e for e in logs if e["event"] == "input_partitions_changed"]
    assert changed["stream"] == "files.in"
    assert (changed["partitions_before"], changed["partitions_now"]) == (2, 3)
    assert "new job.id" in changed["action"]
    # The job keeps no stores: a new job started from its checkpoints reads the new partition.
    assert "samzapy checkpoint show JOB | samzapy checkpoint set NEW_JOB" in changed["action"]
    assert changed["log_level"] == "error"
    # Stopped as a SIGTERM stops it: what it processed is committed, partition 2 never read.
    assert [e["reason"] for e in logs if e["event"] == "stop_requested"] == [
        "input partition count changed"
    ]
    assert container.processed == 5
    assert checkpointed(tmp_path) == {"Partition_0": [(0, "2")], "Partition_1": [(1, "1")]}

    # The restart refuses the new count, naming the input (docs/deploy.md).
    with pytest.raises(
        StreamSystemError, match=r"input files.in had 2 partitions when task.*keeps no stores"
    ):
        await SamzaContainer(config(tmp_path)).run()


async def test_a_failing_look_up_is_logged_once_and_the_job_goes_on(tmp_path: Path) -> None:
    write(tmp_path / "data", 0, 1)
    container = SamzaContainer(config(tmp_path))
    with capture_logs() as logs:
        run = asyncio.ensure_future(container.run())
        await until(lambda: container.processed == 1, "the first message")
        write(tmp_path / "data", 2, 1)  # a gap: the file system cannot count the partitions
        await asyncio.sleep(0.2)  # several failing checks
        (tmp_path / "data" / "in" / "2.jsonl").unlink()
        await until(
            lambda: any(e["event"] == "partition_count_lookup_recovered" for e in logs),
            "the next check that succeeds",
        )
        container.request_stop("test")
        await asyncio.wait_for(run, 10)  # no failure

    (failed,) = [e for e in logs if e["event"] == "partition_count_lookup_failed"]
    assert "has a gap in its partition files" in failed["error"]
    assert failed["log_level"] == "warning"
    assert not [e for e in logs if e["event"] == "input_partitions_changed"]


@pytest.mark.parametrize("ms", ["0", "-1"])
async def test_zero_or_minus_one_turns_the_checks_off(tmp_path: Path, ms: str) -> None:
    key = "job.coordinator.monitor-partition-change.frequency.ms"
    cfg = config(tmp_path, f"{key}={ms}")
    asked: list[Any] = []

    class Admin:
        async def partition_counts(self, names: Any) -> dict[str, int]:
            asked.append(names)
            return {"a": 2}

    monitor = PartitionCountMonitor(cfg.job.monitor_partition_change_ms, LoopClock())
    monitor.start({"k": Admin()}, {SystemStream("k", "a"): 1}, lambda reason: None)  # type: ignore[dict-item]
    await asyncio.sleep(0.05)
    assert asked == [] and monitor.changed is None
    with pytest.raises(ConfigError, match=f"{key} must be an integer >= -1"):
        config(tmp_path, f"{key}=-2")


async def test_a_missing_input_is_logged_as_missing_and_the_others_are_still_checked() -> None:
    """A deleted input is not a failed look-up (a Kafka consumer fails the job for it, the
    topic watch): logged once as missing, while the other inputs' counts are still compared
    (before, the look-up raised for the missing one, and no count was checked)."""
    a, b = SystemStream("k", "a"), SystemStream("k", "b")
    answers = [{"a": 2, "b": 3}, {"b": 3}, {"b": 3}, {"a": 2, "b": 3}, {"b": 3}, {"b": 4}]
    stopped: list[str] = []

    class Admin:
        async def partition_counts(self, names: Any) -> dict[str, int]:
            return answers.pop(0) if len(answers) > 1 else answers[0]

    monitor = PartitionCountMonitor(10, LoopClock())
    with capture_logs() as logs:
        monitor.start({"k": Admin()}, {a: 2, b: 3}, stopped.append)  # type: ignore[dict-item]
        await until(lambda: stopped, "the change of k.b")
    assert [(e["event"], e["stream"]) for e in logs] == [
        ("input_stream_missing", "k.a"),
        ("input_stream_found", "k.a"),
        ("input_stream_missing", "k.a"),
        ("input_partitions_changed", "k.b"),
    ]
    assert logs[0]["log_level"] == "warning" and logs[-1]["partitions_now"] == 4
    assert stopped == ["input partition count changed"]
