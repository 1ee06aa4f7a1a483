"""A store's changelog made at start-up: compacted, one partition per task, and compacted no
sooner than min.compaction.lag.ms after a write (Samza's default, 4 hours)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy.api.errors import StoreError
from samzapy.config import load_config, resolve
from samzapy.container.streams import prepare_changelogs
from samzapy.system.ports import OffsetBounds


class RecordingAdmin:
    """The calls ``prepare_changelogs`` makes: partition counts, create_stream, offset bounds
    of extra partitions and the existing changelogs' settings (none here: a memory system)."""

    def __init__(self, existing: dict[str, int] | None = None) -> None:
        self.existing = existing or {}
        self.created: list[tuple[str, int, dict[str, str] | None]] = []

    async def offset_bounds(self, ssps: list[Any]) -> dict[Any, OffsetBounds]:
        return {ssp: OffsetBounds(None, "0") for ssp in ssps}  # empty

    async def partition_counts(self, streams: list[str]) -> dict[str, int]:
        return {s: self.existing[s] for s in streams if s in self.existing}

    async def stream_configs(self, streams: list[str], keys: Any) -> None:
        return None

    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: dict[str, str] | None = None,
    ) -> None:
        self.created.append((stream, partitions, config))


CONFIG = load_config(
    text="""
job.name: logged
task.class: samzapy.testing.runner:TestRunner
task.inputs: [mem.in]
systems.mem.samza.factory: memory
stores.counts.factory: rocksdb
stores.counts.changelog: mem.counts-changelog
"""
)


def prepare(admin: RecordingAdmin, task_count: int) -> None:
    admins: dict[str, Any] = {"mem": admin}
    asyncio.run(prepare_changelogs(resolve(CONFIG), admins, task_count))


def test_a_missing_changelog_is_compacted_no_sooner_than_four_hours_after_a_write() -> None:
    """Records after a checkpoint that a crash leaves are written back over by the restore
    (restore.py, step 3); until then the records they supersede, which the checkpoint's state
    is replayed from, must stay: compacted away, the restore would replay without them and
    write the touched keys back as deleted."""
    admin = RecordingAdmin()
    prepare(admin, 3)
    assert admin.created == [
        (
            "counts-changelog",
            3,
            {"cleanup.policy": "compact", "min.compaction.lag.ms": "14400000"},
        )
    ]


def test_an_existing_changelog_is_kept_and_one_with_too_few_partitions_refused() -> None:
    admin = RecordingAdmin({"counts-changelog": 3})
    prepare(admin, 3)
    assert admin.created == []
    with pytest.raises(StoreError, match=r"has 3 partitions; the job has 4 tasks"):
        prepare(admin, 4)


def test_a_changelog_with_more_partitions_than_tasks_is_used_when_the_extra_are_empty() -> None:
    """Task N restores from partition N: empty extra partitions lose nothing (Kafka cannot
    take partitions away), so the job starts, saying they stay unused. Extra partitions that
    hold records fail the start (tests/integration/test_changelog_gaps.py)."""
    admin = RecordingAdmin({"counts-changelog": 5})
    with capture_logs() as logs:
        prepare(admin, 3)
    unused = [e for e in logs if e["event"] == "changelog_partitions_unused"]
    assert [(e["partitions"], e["tasks"]) for e in unused] == [(5, 3)]
