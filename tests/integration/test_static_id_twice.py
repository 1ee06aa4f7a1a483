"""Two `samzapy run` processes of a ``static`` exactly-once job with one ``job.container.id``,
on the real broker (docs/deploy.md, "Scaling out": under ``static`` "nothing checks this for
you"; README, "Exactly-once": the new owner "fences its producers, so nothing it writes can
count"; docs/deploy.md, "Reading the JSON logs": "A task fenced by its new owner is
``container_fenced``, a warning, instead of ``task_failed``").

The later process claims the task's transactional id, which fences the earlier one's
producer: the earlier one's next commit fails, it logs ``container_fenced`` and
``job_failed`` and exits 1, and a ``read_committed`` reader sees every input's output once."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

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
    read_all,
    wait_for,
)


@pytest.mark.timeout(120)
def test_a_second_static_container_with_the_same_id_fences_the_first_under_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, output = name("twice-src"), name("twice-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"a%d" % i) for i in range(10)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "job.coordinator.factory": "static",
            "job.container.id": "0",
            "task.processing.guarantee": "exactly-once",
            "task.commit.ms": 300,
        },
    )
    first = Job(job, output, tmp_path / "first.log")
    wait_for(
        lambda: output_count(kafka_bootstrap, output) >= 10, 60, "the first's output", first.proc
    )
    second = Job(job, output, tmp_path / "second.log")
    wait_for(
        lambda: any(e["event"] == "container_started" for e in second.events()),
        60,
        "the second's start",
        second.proc,
    )
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"b%d" % i) for i in range(10)]))
    assert first.wait(60) == 1, first.tail()

    found = first.events()
    [fenced] = [e for e in found if e["event"] == "container_fenced"]
    assert fenced["level"] == "warning" and fenced["task"] == "Partition 0"
    assert "was fenced: another container claimed its id" in fenced["error"]
    assert not [e for e in found if e["event"] == "task_failed"]
    [failed] = [e for e in found if e["event"] == "job_failed"]
    assert failed["exit_code"] == 1

    def committed() -> list[str]:
        records = asyncio.run(read_all(kafka_bootstrap, output, committed=True))
        return [json.loads(r.value)["v"] for r in records]

    expected = sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    wait_for(lambda: sorted(committed()) == expected, 60, "every output once", second.proc)
    assert second.stop() == 0
