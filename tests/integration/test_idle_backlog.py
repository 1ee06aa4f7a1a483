"""A backlogged partition is not idle, on the real broker through `samzapy run`.

Partition 0 of the input holds a backlog of 20,000 messages, 10 ms of event time apart, which
the paced job takes seconds to work through; partition 1 holds 201 messages a second apart
over the same 200 s, read at once. The input's idle timeout (500 ms) is far shorter than the
time the task takes to drain half its queue of partition 0, during which that partition is not
polled. Told idle then, partition 0's task made the readers of the intermediate stream leave
it out of their minimum: their watermark jumped to partition 1's 200 s, and the rest of the
backlog was late there (7,701 of the 20,000 dropped in one run). Every message must count,
the last second's too once both partitions, drained, are idle.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_app_jobs import app_job_file  # noqa: E402
from test_kafka_jobs import Job, create_topic, name, produce, read_all, wait_for  # noqa: E402

BACKLOG = 20_000
STEP_MS = 10


def counted(bootstrap: str, topic: str) -> int:
    """The messages of the backlog's words counted in the panes written so far."""
    records = asyncio.run(read_all(bootstrap, topic))
    return sum(int(r.value.decode()) for r in records if not r.key.startswith(b"x@"))


@pytest.mark.timeout(120)
def test_a_backlog_longer_than_the_idle_timeout_loses_nothing_after_partition_by(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("backlog"), name("backlog-panes")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    items = [
        (0, None, json.dumps({"w": f"w{i % 5}", "t": i * STEP_MS}).encode()) for i in range(BACKLOG)
    ]
    items += [(1, None, json.dumps({"w": "x", "t": i * 1000}).encode()) for i in range(201)]
    asyncio.run(produce(kafka_bootstrap, source, items))
    job = app_job_file(
        tmp_path,
        kafka_bootstrap,
        "app_jobs:IdleCountsPerSecond",
        **{"app.words": source, "app.panes": out, "app.idle.ms": 500, "app.pace.us": 200},
    )
    run = Job(job, "unused", tmp_path / "run.log")
    try:  # the last second closes once both partitions are idle, having nothing left
        wait_for(
            lambda: (
                counted(kafka_bootstrap, out) >= BACKLOG
                or "late_message_dropped" in run.log.read_text()
            ),
            60,
            "the backlog's panes",
            run.proc,
        )
    finally:
        assert run.stop() == 0, run.tail()
    assert "late_message_dropped" not in run.log.read_text()
    assert counted(kafka_bootstrap, out) == BACKLOG
