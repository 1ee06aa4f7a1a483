"""Changelogs that no longer hold what a store's restore needs, on a real broker.

A logged store's state as of a checkpoint is its changelog replayed up to the checkpointed
offset; a restart keeps a local copy only for the tail it lacks. When the changelog was
deleted and made again (its offsets start over), truncated (retention, kafka-delete-records)
or has partitions no task reads, the restore cannot give that state back from it. Each test
checks that the restart says so, and that the store then holds what its changelog holds, as
a restore on any other host would.

A word count (``state_jobs.WordCount``) runs in-process over one input partition, with a
RocksDB store ``counts`` and a Kafka changelog; each run processes what the input holds and
stops cleanly.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from structlog.testing import capture_logs

from samzapy.api.system import TaskName
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.storage.rocksdb import RocksDBStoreFactory

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from state_jobs import STORE, WordCount  # noqa: E402
from test_kafka_jobs import create_topic, name, produce, read_all  # noqa: E402

JOB = "gaps-it"
TASK = TaskName.for_partition(0)


def _config(tmp_path: Path, bootstrap: str, source: str, changelog: str, job_id: str) -> Any:
    cfg = {
        "job.name": JOB,
        "job.id": job_id,
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.class": "state_jobs:WordCount",
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        f"stores.{STORE}.factory": "rocksdb",
        f"stores.{STORE}.key.serde": "string",
        f"stores.{STORE}.msg.serde": "long",
        f"stores.{STORE}.changelog": f"kafka.{changelog}",
    }
    return resolve(load_config(text=json.dumps(cfg)))


class Counts:
    """One job's word count: ``run`` processes the words the input holds beyond what it
    processed before, then stops cleanly; what each run logged is kept."""

    def __init__(self, tmp_path: Path, bootstrap: str) -> None:
        self.tmp_path, self.bootstrap = tmp_path, bootstrap
        self.source, self.changelog = name("words"), name("counts-changelog")
        self.job_id = uuid.uuid4().hex[:8]
        self.events: list[dict[str, Any]] = []

    async def start(self) -> None:
        await create_topic(self.bootstrap, self.source, 1)

    async def run(self, *words: str) -> None:
        """Send ``words`` to the input, and count them (what the run logged: ``events``)."""
        await produce(self.bootstrap, self.source, [(0, None, w.encode()) for w in words])
        config = _config(self.tmp_path, self.bootstrap, self.source, self.changelog, self.job_id)
        container = SamzaContainer(config, task_factory=WordCount)
        with capture_logs() as logs:
            job = asyncio.ensure_future(container.run())
            deadline = time.monotonic() + 60
            while container.processed < len(words):
                if job.done():
                    job.result()
                    raise AssertionError("the job ended early")
                assert time.monotonic() < deadline, "timed out"
                await asyncio.sleep(0.05)
            container.request_stop("test done")
            await job
        self.events = logs

    def store(self) -> dict[str, int]:
        """What task 0's store holds, read through samzapy's RocksDB engine."""
        directory = self.tmp_path / "state" / JOB / STORE / "Partition_0"
        engine = RocksDBStoreFactory().create(STORE, TASK, directory, {})
        try:
            return {k.decode(): int.from_bytes(v, "big") for k, v in engine.iterate(None, None)}
        finally:
            engine.close()

    async def changelog_state(self) -> dict[str, int]:
        """The changelog's last value per key (what a restore from it alone gives)."""
        state: dict[str, int] = {}
        for record in await read_all(self.bootstrap, self.changelog, committed=True):
            if record.value is None:
                state.pop(record.key.decode(), None)
            else:
                state[record.key.decode()] = int.from_bytes(record.value, "big")
        return state


async def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the broker no longer lists it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in await admin.list_topics():
            assert time.monotonic() < deadline, f"{topic} still listed"
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


def _warnings(events: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == event]


async def test_a_changelog_made_again_wipes_the_kept_store(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The changelog deleted and created again while the job was stopped, and written to
    (one record, below the checkpointed offset): the local store closed cleanly at an offset
    the new changelog never held is not kept, since its state is not in the changelog and the
    next writes would take offsets it believes it holds. It is wiped and restored from what
    the changelog holds (up to its end: the checkpointed offset will never come), with a
    warning naming the store, the task and the offsets."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start()
    await job.run("a", "b", "c")
    assert job.store() == {"a": 1, "b": 1, "c": 1}
    await delete_topic(kafka_bootstrap, job.changelog)
    await create_topic(kafka_bootstrap, job.changelog, 1)
    await produce(kafka_bootstrap, job.changelog, [(0, b"z", (5).to_bytes(8, "big"))])
    await job.run("a")
    lost = _warnings(job.events, "changelog_behind_checkpoint")
    assert len(lost) == 1
    assert lost[0]["store"] == STORE and lost[0]["task"] == TASK
    assert lost[0]["upcoming"] == "1" and int(lost[0]["checkpointed"]) > 1
    assert lost[0]["local_offset"] == lost[0]["checkpointed"]  # closed cleanly at it
    restored = _warnings(job.events, "store_restored")
    assert [(e["kept_local"], e["records"]) for e in restored] == [(False, 1)]
    # The store and its changelog agree: a restore elsewhere gives the same state.
    assert job.store() == await job.changelog_state() == {"z": 5, "a": 1}
