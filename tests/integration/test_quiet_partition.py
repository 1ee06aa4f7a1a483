"""A partition that delivered nothing during a run loses nothing written while the job was
down, under the default configuration; on the real broker through `samzapy run`.

Kafka's offset default is ``upcoming`` (as in Samza). A job reading a 2-partition topic gets
messages on partition 0 only; it commits and is stopped (SIGTERM); a message is then written
to partition 1, and the job restarted. The checkpoint covered partition 0 only, so the
restart started partition 1 at ``upcoming`` again, past the message: it was never processed.
The checkpoint now holds partition 1 too, as where the run started it (its last processed
offset being the one before), and the group's offsets (both coordinators, exactly-once too)
say the same; the message written before the first start stays unread, as ``upcoming`` said.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_group_offsets import group  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    job_file,
    name,
    outputs,
    produce,
    wait_for,
)


def default_job(tmp_path: Path, bootstrap: str, source: str, **extra: str | int) -> Path:
    """``job_file`` without its ``oldest`` offset default: Kafka's own, ``upcoming``."""
    path = job_file(tmp_path, bootstrap, source, **{"task.commit.ms": 300, **extra})
    cfg = json.loads(path.read_text())
    del cfg["systems.kafka.default.stream.samza.offset.default"]
    path.write_text(json.dumps(cfg))
    return path


def values(bootstrap: str, out: str, partition: int) -> list[str]:
    return [r["v"] for r in outputs(bootstrap, out) if r["p"] == partition]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("coordinator", "guarantee"),
    [("static", "at-least-once"), ("kafka-group", "at-least-once"), ("static", "exactly-once")],
)
def test_a_partition_quiet_during_a_run_resumes_where_that_run_started_it(
    kafka_bootstrap: str, tmp_path: Path, coordinator: str, guarantee: str
) -> None:
    source, out = name("quiet"), name("quiet-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(1, None, b"before")]))
    job = default_job(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"job.coordinator.factory": coordinator, "task.processing.guarantee": guarantee},
    )
    exactly_once = guarantee == "exactly-once"
    first = Job(job, out, tmp_path / "first.log")
    # Upcoming: a message written before the consumer took its position is not read; write
    # until one is.
    deadline = time.monotonic() + 60
    while not values(kafka_bootstrap, out, 0):
        assert first.proc.poll() is None, first.tail()
        assert time.monotonic() < deadline, "partition 0's messages were never processed"
        asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"p0")]))
        time.sleep(1)
    wait_for(
        lambda: 0 in checkpointed(kafka_bootstrap, job, exactly_once=exactly_once),
        30,
        "partition 0 checkpointed",
        first.proc,
    )
    assert first.stop() == 0, first.tail()
    # Partition 1 resumes at offset 1, after the message written before the first start.
    assert checkpointed(kafka_bootstrap, job, exactly_once=exactly_once)[1] == 0
    assert group(kafka_bootstrap, job)[0][1] == 1

    asyncio.run(produce(kafka_bootstrap, source, [(1, None, b"while-down")]))
    second = Job(job, out, tmp_path / "second.log")
    try:
        wait_for(
            lambda: bool(values(kafka_bootstrap, out, 1)),
            30,
            "the message written to partition 1 while the job was down",
            second.proc,
        )
    finally:
        assert second.stop() == 0, second.tail()
    assert values(kafka_bootstrap, out, 1) == ["while-down"]
