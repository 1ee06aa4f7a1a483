"""A send to another system under exactly-once, on the real broker (docs/configuration.md,
``task.processing.guarantee``): "It needs [...] every declared output stream on one kafka
system [...]; anything else is a configuration error, and a send to another system fails the
job."

The job tags each message of its input to an output topic, in the task's transaction; one
message also makes it send to a stream of a ``file`` system that the job declares nowhere (a
task class names its outputs in code), which a transaction cannot cover: the send is refused
at run time. Declared under ``streams.<id>``, the same stream is a configuration error.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from samzapy.api.errors import ConfigError, StreamSystemError, TaskError
from samzapy.api.system import SystemStreamPartition
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.checkpoint.transactional import SUFFIX as TRANSACTIONAL_SUFFIX
from samzapy.container import SamzaContainer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import _config, create_topic, name, produce, read_all  # noqa: E402

#: The input, in three parts: a commit after ``commit`` (offset 9); then messages whose outputs
#: stay in the open transaction; then ``aside`` (offset 15), whose send is refused, and more.
FIRST = [b"v%d" % i for i in range(9)] + [b"commit"]
SECOND = [b"v%d" % i for i in range(10, 15)]
THIRD = [b"aside"] + [b"v%d" % i for i in range(16, 20)]
ASIDE = len(FIRST) + len(SECOND)
REFUSAL = (
    "cannot send to files.aside: task.processing.guarantee is exactly-once, and a task's "
    "outputs commit in a transaction of kafka system 'kafka'; system 'files' has none"
)


def _job(bootstrap: str, source: str, job_id: str, files: Path, **extra: Any) -> Any:
    return _config(
        bootstrap,
        source,
        **{
            "job_id": job_id,
            "task.class": "kafka_jobs:TagAndSendAside",
            "task.processing.guarantee": "exactly-once",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "systems.files.samza.factory": "file",
            "systems.files.path": str(files),
            **extra,
        },
    )


async def _checkpointed(bootstrap: str, job_id: str) -> int | None:
    """The last processed offset of the input's partition 0 in the committed checkpoints."""
    topic = checkpoint_stream_name("kafka-it", job_id) + TRANSACTIONAL_SUFFIX
    latest = None
    for record in await read_all(bootstrap, topic, committed=True):
        for entry in (json.loads(record.value) if record.value else {}).get("offsets", []):
            latest = int(entry["offset"])
    return latest


async def _tagged(bootstrap: str, topic: str, *, committed: bool) -> Counter[int]:
    """How many times the output holds each input offset's record."""
    return Counter(
        json.loads(r.value)["o"] for r in await read_all(bootstrap, topic, committed=committed)
    )


async def _until(
    check: Callable[[], Awaitable[bool]], job: asyncio.Future[None], what: str
) -> None:
    deadline = time.monotonic() + 60
    while not await check():
        if job.done():
            job.result()
            raise AssertionError(f"the job ended before {what}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_a_send_to_another_system_fails_the_job_and_its_transaction_never_commits(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out, job_id = name("in"), name("out"), uuid.uuid4().hex[:8]
    files = tmp_path / "files"
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    monkeypatch.setenv("SAMZAPY_TEST_ASIDE", "files.aside")
    await create_topic(kafka_bootstrap, source, 1)
    await create_topic(kafka_bootstrap, out, 1)
    await produce(kafka_bootstrap, source, [(0, None, v) for v in FIRST])
    # A commit only when the task asks for one (after ``commit``).
    container = SamzaContainer(
        _job(kafka_bootstrap, source, job_id, files, **{"task.commit.ms": 600_000})
    )
    job = asyncio.ensure_future(container.run())

    async def committed_first() -> bool:
        return await _checkpointed(kafka_bootstrap, job_id) == len(FIRST) - 1

    await _until(committed_first, job, "the first commit")
    await produce(kafka_bootstrap, source, [(0, None, v) for v in SECOND])

    async def second_written() -> bool:  # on the broker, in the open transaction
        written = await _tagged(kafka_bootstrap, out, committed=False)
        return set(range(len(FIRST), ASIDE)) <= set(written)

    await _until(second_written, job, "the open transaction's outputs")
    await produce(kafka_bootstrap, source, [(0, None, v) for v in THIRD])

    # The job fails, naming the stream, both systems, and the task's message.
    with pytest.raises(TaskError) as failed:
        await asyncio.wait_for(job, 30)
    assert isinstance(failed.value.__cause__, StreamSystemError)
    assert str(failed.value.__cause__) == REFUSAL
    ssp = SystemStreamPartition("kafka", source, 0)
    assert f"task 'Partition 0' (processing {ssp} at offset {ASIDE})" in str(failed.value)
    assert REFUSAL in str(failed.value)
    assert not files.exists(), "the file system was written to"
    # Nothing past the commit before is checkpointed, and the open transaction's outputs,
    # on the broker, are not read committed.
    assert await _checkpointed(kafka_bootstrap, job_id) == len(FIRST) - 1
    committed = await _tagged(kafka_bootstrap, out, committed=True)
    assert committed == Counter(range(len(FIRST))), committed

    # The task fixed (it sends nothing aside): the restart resumes, losing and repeating
    # nothing a read_committed reader sees.
    monkeypatch.delenv("SAMZAPY_TEST_ASIDE")
    total = len(FIRST) + len(SECOND) + len(THIRD)
    fixed = SamzaContainer(_job(kafka_bootstrap, source, job_id, files, **{"task.commit.ms": 50}))
    job = asyncio.ensure_future(fixed.run())

    async def processed_the_rest() -> bool:
        return fixed.processed >= total - len(FIRST)

    await _until(processed_the_rest, job, "the rest processed")
    fixed.request_stop("test done")
    await asyncio.wait_for(job, 30)
    assert fixed.processed == total - len(FIRST), "the restart did not resume at the commit"
    assert await _checkpointed(kafka_bootstrap, job_id) == total - 1
    assert await _tagged(kafka_bootstrap, out, committed=True) == Counter(range(total))
    assert not files.exists()


def test_a_declared_stream_on_another_system_is_a_configuration_error(tmp_path: Path) -> None:
    """Declared streams: "anything else is a configuration error", naming the key."""
    with pytest.raises(ConfigError) as refused:
        _job("127.0.0.1:9", "in", "j", tmp_path, **{"streams.aside.samza.system": "files"})
    assert refused.value.problems == (
        "streams.aside.samza.system must be the checkpoints' kafka system 'kafka' when "
        "task.processing.guarantee is exactly-once (it is written by the job), got 'files'",
    )
