"""Partitions added to an input topic while `samzapy run` runs, on the real broker
(docs/deploy.md, "Adding partitions to an input"): the partition-count monitor notices at its
next check, logs ``input_partitions_changed`` and stops the job after a clean commit of what it
processed, exit 1; the new partition is read by no task. A restart then stops at once on the
start-up check, naming the input: the checkpoints recorded the old count. A job without
stores goes on as a new job started from those checkpoints, reading the new partition too.

Partitions added to an output topic ("Adding partitions to an output") are written to without
a restart once the producer's metadata refresh has found them, keyed messages and keyless; by
a job without periodic commits too, at the partition-count monitor's next check."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from samzapy.system.partitioner import partition_for

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
    read_all,
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


@pytest.mark.timeout(180)
def test_a_job_without_stores_goes_on_as_a_new_job_from_its_checkpoints(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """What the refusal tells the operator of a job without stores (docs/deploy.md): a new
    job.id started from the old job's checkpoints reads the new partition from its first
    message, and nothing of the old ones again."""
    source, output = name("grown-src"), name("grown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, output, 3))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, None, b"v%d" % i) for i in range(6)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"job.coordinator.monitor-partition-change.frequency.ms": 500},
    )
    first = Job(job, output, tmp_path / "first.log")
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job) == {0: 2, 1: 2}, 60, "6 outputs", first.proc
    )
    asyncio.run(add_partitions(kafka_bootstrap, source, 3))
    asyncio.run(produce(kafka_bootstrap, source, [(2, None, b"new-0"), (2, None, b"new-1")]))
    assert first.wait(60) == 1, first.tail()
    (failed,) = [e for e in first.events() if e["event"] == "job_failed"]
    assert "keeps no stores" in failed["error"]
    assert (
        "samzapy checkpoint show JOB | samzapy checkpoint set NEW_JOB --to -" in (failed["error"])
    )

    # As the error says: a new job.id, the input's offset default at oldest (job_file's).
    new = tmp_path / "new-job.yaml"
    new.write_text(json.dumps({**json.loads(job.read_text()), "job.id": uuid.uuid4().hex[:8]}))
    lines = checkpoint_tool("show", job).stdout
    checkpoint_tool("set", new, "--to", "-", stdin=lines)
    second = Job(new, output, tmp_path / "second.log")
    wait_for(
        lambda: checkpointed(kafka_bootstrap, new) == {0: 2, 1: 2, 2: 1}, 60, "the new", second.proc
    )
    assert second.stop() == 0, second.tail()
    assert sorted(o["v"] for o in outputs(kafka_bootstrap, output)) == sorted(
        [f"v{i}" for i in range(6)] + ["new-0", "new-1"]
    )


def checkpoint_tool(*args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``samzapy checkpoint ARGS``, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "samzapy", "checkpoint", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE.parent.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.timeout(180)
def test_under_the_group_a_rebalance_after_the_change_stops_the_job_sooner(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md: a container joining after the change moves a task, whose new owner
    refuses it on its checkpoint's count, long before the monitor's next check."""
    source, output = name("grown-src"), name("grown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, output, 3))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, None, b"v%d" % i) for i in range(6)]))
    job = job_file(tmp_path, kafka_bootstrap, source)  # the monitor's default: 60 s
    first = Job(job, output, tmp_path / "first.log")
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job) == {0: 2, 1: 2}, 60, "6 outputs", first.proc
    )
    asyncio.run(add_partitions(kafka_bootstrap, source, 3))
    second = Job(job, output, tmp_path / "second.log")
    failed = []
    for run in (first, second):
        assert run.wait(40) == 1, run.tail()
        failed += [e["error"] for e in run.events() if e["event"] == "job_failed"]
    assert any("last checkpointed and has 3 now" in error for error in failed), failed
    assert not [e for e in first.events() if e["event"] == "input_partitions_changed"]
    assert checkpointed(kafka_bootstrap, job) == {0: 2, 1: 2}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_partitions_added_to_an_output_are_written_to_after_the_metadata_refresh(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """As Kafka's Java producer (and Samza's, which hashes over its partitionsFor): keys hash
    over the new count from the first commit after the producer's metadata refresh
    (``producer.metadata.max.age.ms``, 300000 by default, 500 here), keyless batches take the
    new partitions in turn; the job goes on, and nothing is lost."""
    source, output = name("src"), name("grown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, output, 2))
    keys = [b"key-%d" % i for i in range(40)]
    asyncio.run(produce(kafka_bootstrap, source, [(0, k, b"before") for k in keys]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "task.class": "kafka_jobs:Forward",
            "task.commit.ms": 200,
            "task.processing.guarantee": guarantee,
            "systems.kafka.producer.metadata.max.age.ms": 500,
        },
    )
    eos = guarantee == "exactly-once"
    run = Job(job, output, tmp_path / "run.log")
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job, exactly_once=eos) == {0: 39},
        60,
        "40 sent",
        run.proc,
    )
    asyncio.run(add_partitions(kafka_bootstrap, output, 4))
    wait_for(
        lambda: any(e["event"] == "output_partitions_added" for e in run.events()),
        30,
        "the route to take the new partitions up",
        run.proc,
    )
    asyncio.run(produce(kafka_bootstrap, source, [(0, k, b"after") for k in keys]))
    for i in range(8):  # one keyless batch each
        asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"keyless-%d" % i)]))
        time.sleep(0.15)  # more than exactly-once's linger (100 ms): a batch each
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job, exactly_once=eos) == {0: 87},
        60,
        "88 sent",
        run.proc,
    )
    assert run.stop() == 0, run.tail()
    (added,) = [e for e in run.events() if e["event"] == "output_partitions_added"]
    assert added["stream"] == f"kafka.{output}"
    assert (added["partitions_before"], added["partitions_now"]) == (2, 4)
    records = asyncio.run(read_all(kafka_bootstrap, output, committed=True))
    placed = {(r.key, r.value): r.partition for r in records}
    assert len(placed) == len(records) == 88
    assert all(placed[k, b"before"] == partition_for(k, 2) for k in keys)
    assert all(placed[k, b"after"] == partition_for(k, 4) for k in keys)
    assert {placed[k, b"after"] for k in keys} == {0, 1, 2, 3}
    keyless = {placed[None, b"keyless-%d" % i] for i in range(8)}
    assert keyless == {0, 1, 2, 3}


@pytest.mark.timeout(120)
def test_a_job_without_periodic_commits_writes_to_added_output_partitions_as_it_runs(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``task.commit.ms: -1`` (a commit at the stop only): keys hash over the new count from
    the partition-count monitor's first check after the producer's metadata refresh."""
    source, output = name("src"), name("grown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, output, 2))
    keys = [b"key-%d" % i for i in range(40)]
    asyncio.run(produce(kafka_bootstrap, source, [(0, k, b"before") for k in keys]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "task.class": "kafka_jobs:Forward",
            "task.commit.ms": -1,
            "systems.kafka.producer.metadata.max.age.ms": 500,
            "job.coordinator.monitor-partition-change.frequency.ms": 300,
        },
    )
    run = Job(job, output, tmp_path / "run.log")
    wait_for(
        lambda: len(asyncio.run(read_all(kafka_bootstrap, output))) == 40,
        60,
        "40 sent",
        run.proc,
    )
    asyncio.run(add_partitions(kafka_bootstrap, output, 4))
    wait_for(
        lambda: any(e["event"] == "output_partitions_added" for e in run.events()),
        30,
        "the route to take the new partitions up",
        run.proc,
    )
    asyncio.run(produce(kafka_bootstrap, source, [(0, k, b"after") for k in keys]))
    wait_for(
        lambda: len(asyncio.run(read_all(kafka_bootstrap, output))) == 80,
        60,
        "80 sent",
        run.proc,
    )
    assert run.stop() == 0, run.tail()
    placed = {(r.key, r.value): r.partition for r in asyncio.run(read_all(kafka_bootstrap, output))}
    assert all(placed[k, b"before"] == partition_for(k, 2) for k in keys)
    assert all(placed[k, b"after"] == partition_for(k, 4) for k in keys)
