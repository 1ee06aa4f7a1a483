"""A container of a ``kafka-group`` job that runs no task, and a dynamic member's clean leave,
through `samzapy run` on the real broker (docs/configuration.md, ``task.progress.interval.ms``:
"Under kafka-group it is one line per process over every task it runs [...]; none while it runs
no task"; docs/deploy.md, "Failover": a dynamic member "that stops cleanly leaves the group as
soon as it has committed and closed its tasks [...], so they move in one rebalance", logged as
``group_left``)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    create_topic,
    job_file,
    name,
    output_count,
    produce,
    wait_for,
)

#: Far longer than the test: a task that moves did so because its owner left, not because
#: the group gave up waiting for it.
SESSION_MS = 60000


def assigned(run: Job) -> list[str] | None:
    """The tasks the container holds by its log (None before its first assignment)."""
    tasks: list[str] | None = None
    for e in run.events():
        if e["event"] in ("tasks_assigned", "rebalance_completed"):
            tasks = sorted(e["tasks_kept"] + e["tasks_added"])
    return tasks


def of(run: Job, event: str) -> list[dict[str, Any]]:
    return [e for e in run.events() if e["event"] == event]


@pytest.mark.timeout(120)
def test_an_idle_member_logs_no_progress_and_a_clean_leave_hands_its_task_over_at_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, output = name("idle-src"), name("idle-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"a%d" % i) for i in range(10)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "task.progress.interval.ms": 200,
            "job.coordinator.session.timeout.ms": SESSION_MS,
        },
    )
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: assigned(first) == ["Partition 0"], 60, "the first's task", first.proc)
    wait_for(lambda: output_count(kafka_bootstrap, output) == 10, 60, "the first's output")
    second = Job(job, output, tmp_path / "second.log")
    wait_for(lambda: assigned(second) == [], 60, "the second's (empty) share", second.proc)
    time.sleep(1.5)  # seven progress intervals

    assert of(first, "progress"), first.tail()
    assert of(second, "progress") == [], "a container that runs no task logged progress"

    stopped_at = time.monotonic()
    assert first.stop() == 0
    wait_for(lambda: assigned(second) == ["Partition 0"], 30, "the handover", second.proc)
    assert time.monotonic() - stopped_at < SESSION_MS / 1000 / 4, "the task waited for the session"
    names = [e["event"] for e in first.events()]
    assert names.count("group_left") == 1, names
    assert of(first, "group_left")[0]["membership"] == "dynamic"
    # It left once its tasks were committed and closed, then summed up, and exited.
    assert names.index("group_left") < names.index("job_finished") < names.index("container_exited")

    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"b%d" % i) for i in range(5)]))
    wait_for(lambda: output_count(kafka_bootstrap, output) == 15, 60, "the second's output")
    # Its progress starts with its task, counting what this process processed.
    wait_for(
        lambda: of(second, "progress") and of(second, "progress")[-1]["processed"] == 5,
        10,
        "progress",
    )
    assert second.stop() == 0
    assert [e["event"] for e in second.events()].count("group_left") == 1
