"""An input topic deleted and made again between two runs of a job, through `samzapy run` on
the real broker (docs/configuration.md, "The kafka system": a checkpointed offset Kafka
"never held (beyond the end: the topic was recreated) is dropped at start-up
(``stream_went_back``): the partition starts at its offset default").

The restart neither fails nor waits for the old offset to come back: it logs
``stream_went_back`` naming the partition and reads the new topic from its offset default."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    delete_topic,
    job_file,
    name,
    outputs,
    produce,
    wait_for,
)


async def recreate(bootstrap: str, topic: str) -> None:
    await delete_topic(bootstrap, topic)
    deadline = time.monotonic() + 30
    while True:  # the broker deletes a topic in the background
        try:
            await create_topic(bootstrap, topic, 1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


@pytest.mark.timeout(120)
def test_a_recreated_input_is_read_from_its_offset_default_after_stream_went_back(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, output = name("recreated-src"), name("recreated-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(10)]))
    job = job_file(tmp_path, kafka_bootstrap, source)  # offset default: oldest
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 9}, 60, "the first run", first.proc)
    assert first.stop() == 0

    asyncio.run(recreate(kafka_bootstrap, source))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(3)]))
    again = Job(job, output, tmp_path / "again.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 2}, 60, "the rerun", again.proc)
    assert again.stop() == 0

    [went_back] = [e for e in again.events() if e["event"] == "stream_went_back"]
    assert (went_back["task"], went_back["ssps"]) == ("Partition 0", [f"kafka.{source}#0"])
    values = [o["v"] for o in outputs(kafka_bootstrap, output)]
    assert values == [f"old{i}" for i in range(10)] + [f"new{i}" for i in range(3)]
    assert not [e for e in again.events() if e["level"] == "error"]
