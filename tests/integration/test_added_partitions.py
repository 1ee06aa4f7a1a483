"""Partitions added to an input topic while `samzapy run` runs, on the real broker
(docs/deploy.md, "Adding partitions to an input"): the partition-count monitor notices at its
next check, logs ``input_partitions_changed`` and stops the job after a clean commit of what it
processed, exit 1; the new partition is read by no task. A restart then stops at once on the
start-up check, naming the input: the checkpoints recorded the old count."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    add_partitions,
    checkpointed,
    create_topic,
    job_file,
    name,
    outputs,
    produce,
    wait_for,
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("coordinator", ["static", "kafka-group"])
def test_a_partition_added_while_running_stops_the_job_and_its_restart(
    kafka_bootstrap: str, tmp_path: Path, coordinator: str
) -> None:
    source, output = name("grown-src"), name("grown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, output, 3))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, None, b"v%d" % i) for i in range(6)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "job.coordinator.factory": coordinator,
            "job.coordinator.monitor-partition-change.frequency.ms": 500,
        },
    )
    first = Job(job, output, tmp_path / "first.log")
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job) == {0: 2, 1: 2}, 60, "6 outputs", first.proc
    )

    asyncio.run(add_partitions(kafka_bootstrap, source, 3))
    asyncio.run(produce(kafka_bootstrap, source, [(2, None, b"new")]))
    assert first.wait(60) == 1, first.tail()

    events = first.events()
    (changed,) = [e for e in events if e["event"] == "input_partitions_changed"]
    assert changed["stream"] == f"kafka.{source}"
    assert (changed["partitions_before"], changed["partitions_now"]) == (2, 3)
    (failed,) = [e for e in events if e["event"] == "job_failed"]
    assert (
        f"input kafka.{source} had 2 partitions when the job started and has 3 now"
        in (failed["error"])
    )
    assert failed["exit_code"] == 1
    # Nothing read from the new partition, nothing lost or committed past what was processed.
    assert checkpointed(kafka_bootstrap, job) == {0: 2, 1: 2}
    assert sorted(o["v"] for o in outputs(kafka_bootstrap, output)) == [f"v{i}" for i in range(6)]

    again = Job(job, output, tmp_path / "again.log")
    assert again.wait(60) == 1, again.tail()
    (refused,) = [e for e in again.events() if e["event"] == "job_failed"]
    assert f"input kafka.{source} had 2 partitions when task" in refused["error"]
    assert "has 3 now" in refused["error"]
