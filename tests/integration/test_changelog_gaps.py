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
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from structlog.testing import capture_logs

from samzapy.api.errors import StoreError
from samzapy.api.system import TaskName
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.coordinator.standby import Standbys
from samzapy.metrics import Health, MetricsRegistry
from samzapy.storage.rocksdb import RocksDBStoreFactory

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from state_jobs import STORE, WordCount  # noqa: E402
from test_kafka_jobs import create_topic, delete_topic, name, produce, read_all  # noqa: E402

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

    async def start(self, changelog_policy: str | None = None, partitions: int = 1) -> None:
        """Create the input; with ``changelog_policy``, the changelog too, with that
        ``cleanup.policy`` (samzapy creates a missing one ``compact``, on which Kafka
        refuses to delete records) and ``partitions``."""
        await create_topic(self.bootstrap, self.source, 1)
        if changelog_policy is not None:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                topic = NewTopic(
                    self.changelog,
                    partitions,
                    1,
                    topic_configs={"cleanup.policy": changelog_policy},
                )
                await admin.create_topics([topic])
            finally:
                await admin.close()

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

    async def standby(self, until: str | None = None) -> None:
        """Keep a standby of task 0 (its own directory, beside the task's) until it has
        caught up with the task's latest checkpoint (or has logged the event ``until``),
        then close it (what each step logged: ``events``)."""
        config = _config(self.tmp_path, self.bootstrap, self.source, self.changelog, self.job_id)
        standbys = Standbys(config, metrics=MetricsRegistry(), health=Health(), interval=0.05)
        with capture_logs() as logs:
            await standbys.start()
            try:
                await standbys.assign({0})
                deadline = time.monotonic() + 10
                while (
                    standbys.report().get(0) != 0 if until is None else not _warnings(logs, until)
                ):
                    assert time.monotonic() < deadline, f"no standby {until or 'caught up'}"
                    await asyncio.sleep(0.05)
            finally:
                await standbys.stop()
        self.events = logs

    def store(self, suffix: str = "") -> dict[str, int]:
        """What task 0's store (``.standby``: its standby's copy) holds, read through
        samzapy's RocksDB engine."""
        directory = self.tmp_path / "state" / JOB / STORE / f"Partition_0{suffix}"
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


async def delete_records(bootstrap: str, topic: str, before: int) -> None:
    """``kafka-delete-records``: partition 0 of ``topic`` starts at offset ``before``."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_records({TopicPartition(topic, 0): RecordsToDelete(before)})
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


async def test_a_truncated_changelog_is_restored_with_a_warning_on_a_new_host(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The changelog's first records deleted (kafka-delete-records, retention) and the task
    restored on a host without its store: what the deleted records held is gone, which the
    restore says, naming the offsets the store needed and those the changelog still has; the
    store gets what the changelog holds, and the job goes on."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("compact,delete")
    await job.run("a", "b", "c")  # changelog: a, b, c at offsets 0 to 2
    shutil.rmtree(tmp_path / "state")
    await delete_records(kafka_bootstrap, job.changelog, 2)
    await job.run("a")
    truncated = _warnings(job.events, "changelog_truncated")
    assert len(truncated) == 1
    gap = truncated[0]
    assert gap["store"] == STORE and gap["task"] == TASK
    assert (gap["needed_from"], gap["oldest"], gap["checkpointed"]) == ("0", "2", "3")
    assert job.store() == await job.changelog_state() == {"c": 1, "a": 1}


async def test_a_kept_store_behind_a_truncated_changelog_is_wiped(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A store closed cleanly on this host, after which the task ran elsewhere and the
    changelog lost the records the store lacks: replaying the rest on top of it would give
    a state no other host has (the deleted updates missing, the older ones kept). The store
    is wiped and restored from what the changelog holds, with a warning."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("compact,delete")
    await job.run("a", "b", "c")  # changelog: a, b, c at 0 to 2; the store marked at 3
    shutil.copytree(tmp_path / "state", tmp_path / "kept")
    await job.run("a", "d")  # another host: a=2 at 3, d at 4
    shutil.rmtree(tmp_path / "state")
    (tmp_path / "kept").rename(tmp_path / "state")  # back here, the store at 3
    await delete_records(kafka_bootstrap, job.changelog, 4)
    await job.run("e")
    truncated = _warnings(job.events, "changelog_truncated")
    assert [(e["needed_from"], e["oldest"], e["local"]) for e in truncated] == [("3", "4", "kept")]
    restored = _warnings(job.events, "store_restored")
    assert [e["kept_local"] for e in restored] == [False]
    assert job.store() == await job.changelog_state() == {"d": 1, "e": 1}


async def test_a_changelog_with_records_in_partitions_no_task_restores_fails_the_start(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Task N's store restores from changelog partition N. A changelog with more partitions
    than the job has tasks, one of the extra ones holding records (the state of a task the
    job no longer has, or another job's), would have those records never restored: the start
    fails, naming the store, the changelog, both counts and the partition."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("compact", partitions=3)
    await produce(kafka_bootstrap, job.changelog, [(2, b"z", (5).to_bytes(8, "big"))])
    with pytest.raises(
        StoreError,
        match=rf"changelog kafka.{job.changelog} of store 'counts' has 3 partitions; the job "
        r"has 1 task, .* but partition 2 \(offsets 0 to 1\) holds records no task",
    ):
        await job.run("a")


async def test_a_standby_behind_a_truncated_changelog_starts_over(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A standby's copy closed at an offset whose next records were deleted would, caught up
    on what is left and promoted, be kept by the restore as it is (its marker is past the
    gap): it starts over from what the changelog holds instead, with the same warning."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("compact,delete")
    await job.run("a", "b", "c")  # changelog: a, b, c at 0 to 2
    await job.standby()  # the copy at 3
    assert job.store(".standby") == {"a": 1, "b": 1, "c": 1}
    await job.run("a", "d")  # a=2 at 3, d at 4
    await delete_records(kafka_bootstrap, job.changelog, 4)
    await job.standby()
    truncated = _warnings(job.events, "changelog_truncated")
    assert [(e["needed_from"], e["oldest"], e["local"]) for e in truncated] == [
        ("3", "4", "standby")
    ]
    assert job.store(".standby") == await job.changelog_state() == {"d": 1}


async def test_a_standby_drops_its_copy_when_its_changelog_is_made_again(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A standby caught up to a checkpoint past the end of its changelog, made again: its
    copy no longer matches the changelog, and carrying on from its offset once the task's
    checkpoints pass it would apply the new changelog's tail on top of the old state. It
    drops the copy at once, with a warning, and starts over from the new changelog."""
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start()
    await job.run("a", "b", "c")  # changelog: a, b, c at 0 to 2
    await job.standby()  # the copy at 3
    await delete_topic(kafka_bootstrap, job.changelog)
    await create_topic(kafka_bootstrap, job.changelog, 1)
    await produce(kafka_bootstrap, job.changelog, [(0, b"z", (5).to_bytes(8, "big"))])
    await job.standby(until="changelog_behind_checkpoint")
    lost = _warnings(job.events, "changelog_behind_checkpoint")
    assert [(e["local_offset"], e["checkpointed"], e["upcoming"]) for e in lost] == [
        ("3", "3", "1")
    ]
    await job.run("a", "b", "c", "d")  # the new changelog: z at 0, then 1 to 4; checkpoint 5
    await job.standby()
    assert job.store(".standby") == await job.changelog_state()
    assert job.store(".standby") == {"z": 5, "a": 1, "b": 1, "c": 1, "d": 1}
