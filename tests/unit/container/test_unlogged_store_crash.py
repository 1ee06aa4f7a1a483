"""A task's RocksDB store without changelog stays exact across a crash: the commit snapshots
it, and the restart opens the snapshot its checkpoint names, dropping what the crashed run's
write buffer had written back to RocksDB after the checkpoint (docs/configuration.md, "Store
snapshots"). Before, the restart kept those writes and counted their messages twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_stores import CommitAt99, WordCount

from samzapy import TaskError
from samzapy.api.system import TaskName
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.testing import TestRunner

WORDS = [f"w{i:03d}" for i in range(40)]


def job_config(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "stores.counts.factory": "rocksdb",
        "stores.counts.key.serde": "string",
        "stores.counts.msg.serde": "long",
        # Overflows every few messages: RocksDB gets writes between two commits.
        "stores.counts.write.buffer.max.bytes": 200,
        "job.logged.store.base.dir": str(tmp_path / "state"),
        "task.commit.ms": -1,
        **extra,
    }


def input_words(n: int) -> dict[int, list[str]]:
    return {p: [WORDS[(i * 7 + p) % len(WORDS)] for i in range(n)] for p in range(2)}


@pytest.fixture(autouse=True)
def _reset() -> None:
    WordCount.fail_at = None
    CommitAt99.past_commit = set()
    CommitAt99.all_past = asyncio.Event()


def stored(tmp_path: Path, tasks: int = 2) -> Counter[str]:
    """The counts in the stores of the first ``tasks`` tasks, summed (each task counts its
    own partition)."""
    total: Counter[str] = Counter()
    for p in range(tasks):
        directory = tmp_path / "state" / "test-job" / "counts" / f"Partition_{p}"
        engine = RocksDBStoreFactory().create("counts", TaskName.for_partition(p), directory, {})
        try:
            for key, value in engine.iterate(None, None):
                total[key.decode()] += int.from_bytes(value, "big", signed=True)
        finally:
            engine.close()
    return total


def crashed_then_restarted(tmp_path: Path, **extra: Any) -> list[dict[str, Any]]:
    words = input_words(300)
    config = job_config(tmp_path, **extra)
    WordCount.fail_at = 250  # CommitAt99's failure, once both tasks are past their commit
    first = TestRunner(CommitAt99, config).add_input("words", words)
    with pytest.raises(TaskError):
        first.run()
    WordCount.fail_at = None
    with capture_logs() as logs:
        TestRunner(CommitAt99, config, namespace=first.namespace).add_input("words", words).run()
    return logs


def test_a_crash_restores_the_store_to_its_checkpoint_and_counts_stay_exact(
    tmp_path: Path,
) -> None:
    logs = crashed_then_restarted(tmp_path)
    words = input_words(300)
    assert stored(tmp_path) == Counter(w for ws in words.values() for w in ws)
    restored = [e for e in logs if e["event"] == "store_restored"]
    assert len(restored) == 2
    assert all(e["snapshot"] is not None and e["kept_local"] is False for e in restored)
    assert not [e for e in logs if e["event"] == "store_kept_past_checkpoint"]


def test_with_snapshots_off_the_restart_warns_that_the_store_may_be_ahead(
    tmp_path: Path,
) -> None:
    logs = crashed_then_restarted(
        tmp_path, **{"task.transactional.state.checkpoint.enabled": False}
    )
    words = input_words(300)
    # Offsets 100..250 counted twice, as far as they reached RocksDB before the crash.
    assert sum(stored(tmp_path).values()) > sum(len(ws) for ws in words.values())
    warned = [e for e in logs if e["event"] == "store_kept_past_checkpoint"]
    assert len(warned) == 2 and all(e["log_level"] == "warning" for e in warned)
