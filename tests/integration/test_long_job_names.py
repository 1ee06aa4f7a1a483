"""A job whose job.name is as long as Kafka's names allow runs on the real broker: its
checkpoint streams are cut to fit (the exactly-once one was 253 characters, refused by the
broker as an invalid topic), and a name too long for its derived topics is refused before
anything starts, naming job.name."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samzapy.checkpoint.stream import MAX_STREAM_NAME_LENGTH, checkpoint_stream_name
from samzapy.checkpoint.transactional import exactly_once_stream

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    ROOT,
    Job,
    create_topic,
    job_file,
    name,
    output_count,
    produce,
    read_all,
    wait_for,
)

LONG_NAME = "l" * 230  # with a job.id of 8: a checkpoint stream name of 260, cut to 249


def committed_checkpoints(bootstrap: str, job: Path) -> int:
    """How many tasks have an exactly-once checkpoint, read committed."""
    cfg = json.loads(job.read_text())
    topic = exactly_once_stream(checkpoint_stream_name(cfg["job.name"], cfg["job.id"]))
    assert len(topic) <= MAX_STREAM_NAME_LENGTH
    records = asyncio.run(read_all(bootstrap, topic, committed=True))
    return len({record.key for record in records if record.value})


@pytest.mark.timeout(240)
def test_an_exactly_once_job_with_a_long_name_runs_and_commits(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, b"k", b"v%d" % i) for i in range(100)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"job.name": LONG_NAME, "task.processing.guarantee": "exactly-once"},
    )
    run = Job(job, out, tmp_path / "run.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 100, 90, "100 outputs", run.proc)
    wait_for(lambda: committed_checkpoints(kafka_bootstrap, job) == 2, 60, "checkpoints", run.proc)
    assert run.stop() == 0, run.tail()


def test_a_job_name_too_long_for_its_intermediate_stream_is_refused_before_it_starts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    cfg = {
        "job.name": "j" * 240,
        "app.class": "app_jobs:WordTotals",
        "app.words": name("words"),
        "app.totals": name("totals"),
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": kafka_bootstrap,
        "stores.counts.factory": "inmemory",
    }
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(cfg))
    done = subprocess.run(
        [sys.executable, "-m", "samzapy", "run", str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), str(HERE)))},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "job.name, job.id: Kafka topic 'jjj" in done.stdout + done.stderr
    assert "shorten job.name (240 characters)" in done.stdout + done.stderr
