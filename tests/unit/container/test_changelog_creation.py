"""A store's changelog made at start-up: compacted, one partition per task, and compacted no
sooner than min.compaction.lag.ms after a write (Samza's default, 4 hours)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samzapy.api.errors import StoreError
from samzapy.config import load_config, resolve
from samzapy.container.streams import prepare_changelogs


class RecordingAdmin:
    """The two calls ``prepare_changelogs`` makes: partition counts and create_stream."""

    def __init__(self, existing: dict[str, int] | None = None) -> None:
        self.existing = existing or {}
        self.created: list[tuple[str, int, dict[str, str] | None]] = []

    async def partition_counts(self, streams: list[str]) -> dict[str, int]:
        return {s: self.existing[s] for s in streams if s in self.existing}

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
