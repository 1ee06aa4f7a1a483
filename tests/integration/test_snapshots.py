"""Store snapshots on a real broker: a count over a million keys killed with -9 restarts from
the snapshot its checkpoint names, replaying nothing of its changelog, and stays exact.

The job counts 1,000,000 distinct keys over four partitions (a RocksDB store with a Kafka
changelog, one checkpoint with a snapshot every two seconds). It is killed with SIGKILL once it
has processed 600,000 messages, so its stores hold 600,000 keys and writes past the last
checkpoint; the restart must open each task's snapshot (``store_restored``: ``snapshot`` set,
``records`` 0, where a full restore replays every changelog record before the checkpoint),
drop what the killed run wrote after its checkpoint, and finish with every key counted once.
The counts are read from the stores themselves after a clean stop.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from samzapy.api.system import TaskName
from samzapy.storage.rocksdb import RocksDBStoreFactory

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, name, output_count, wait_for  # noqa: E402
from test_state_jobs import (  # noqa: E402
    PARTITIONS,
    STORE,
    checkpointed,
    processed,
    produce_words,
    state_job_file,
    store_dir,
)

KEYS = 1_000_000
KILL_AT = 600_000


def stored_counts(tmp_path: Path) -> Counter[int]:
    """How many keys hold each count, over every task's store, read through samzapy's
    RocksDB engine (values as the long serde wrote them: 8 bytes, big-endian)."""
    counts: Counter[int] = Counter()
    for partition in range(PARTITIONS):
        task = TaskName.for_partition(partition)
        directory = store_dir(tmp_path) / f"Partition_{partition}"
        engine = RocksDBStoreFactory().create(STORE, task, directory, {})
        try:
            counts.update(int.from_bytes(v, "big") for _, v in engine.iterate(None, None))
        finally:
            engine.close()
    return counts


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_million_key_store_restarts_from_its_snapshot_after_kill_9(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, changelog = name("keys"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    keys = {p: [f"k{i:07d}" for i in range(p, KEYS, PARTITIONS)] for p in range(PARTITIONS)}
    asyncio.run(produce_words(kafka_bootstrap, source, keys))
    job = state_job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        changelog,
        **{
            "task.commit.ms": 2000,
            "task.progress.interval.ms": 200,
            # Each write sent as it happens: the kill leaves changelog records past the
            # checkpoint, which the restart from the snapshot must take back.
            f"stores.{STORE}.write.buffer.max.bytes": 0,
        },
    )
    first = Job(job, "unused", tmp_path / "first.log")
    wait_for(lambda: processed(first) >= KILL_AT, 180, f"{KILL_AT} processed", first.proc)
    first.stop(signal.SIGKILL)
    at_kill = sum(checkpointed(kafka_bootstrap, job).values()) + PARTITIONS
    written = output_count(kafka_bootstrap, changelog)
    assert KILL_AT // 2 <= at_kill < written < KEYS, (at_kill, written)

    second = Job(job, "unused", tmp_path / "second.log")
    ends = {p: KEYS // PARTITIONS - 1 for p in range(PARTITIONS)}
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == ends, 180, "the end", second.proc)
    assert second.stop() == 0

    restored = [e for e in second.events() if e["event"] == "store_restored"]
    assert len(restored) == PARTITIONS
    # Each task opened the snapshot its checkpoint names: nothing replayed, where a full
    # restore replays every changelog record up to the checkpoint (at_kill of them).
    assert all(e["snapshot"] is not None and e["kept_local"] is False for e in restored)
    assert [e["records"] for e in restored] == [0] * PARTITIONS
    # What the killed run wrote after its checkpoint was read, and only to be dropped.
    assert sum(e["dropped_after_checkpoint"] for e in restored) == written - at_kill
    assert stored_counts(tmp_path) == {1: KEYS}  # every key, each counted once
