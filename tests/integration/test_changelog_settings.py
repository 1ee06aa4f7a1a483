"""An existing changelog's topic settings checked at start-up, on a real broker.

A changelog made before the job by hand or another tool may have ``cleanup.policy`` ``delete``
(Kafka's default): retention then deletes the records a restore needs, which a restore only
notices once they are gone (``test_changelog_gaps.py``). The start says so at once, with the
command that makes it compact-only, and the job runs all the same.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from state_jobs import STORE  # noqa: E402
from test_changelog_gaps import Counts  # noqa: E402

KAFKA_DEFAULT_RETENTION_MS = "604800000"


def _checked(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    wanted = ("changelog_not_compacted", "changelog_config_unchecked")
    return [e for e in events if e["event"] in wanted]


async def _make_compact(bootstrap: str, topic: str) -> None:
    """What the warning's remedy does (kafka-configs.sh --alter ... --add-config)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        settings = {"cleanup.policy": "compact", "min.compaction.lag.ms": "14400000"}
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, settings)])
    finally:
        await admin.close()


async def test_a_changelog_retention_deletes_from_is_a_warning_and_the_job_runs(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("delete")
    await job.run("a", "b")
    [warning] = _checked(job.events)
    assert warning["event"] == "changelog_not_compacted"
    assert warning["log_level"] == "warning"
    assert (warning["store"], warning["changelog"]) == (STORE, f"kafka.{job.changelog}")
    assert warning["cleanup_policy"] == "delete"
    assert warning["retention_ms"] == KAFKA_DEFAULT_RETENTION_MS
    assert warning["remedy"].startswith(
        f"kafka-configs.sh --bootstrap-server {kafka_bootstrap} --alter --entity-type topics "
        f"--entity-name {job.changelog} --add-config cleanup.policy=compact"
    )
    assert job.store() == {"a": 1, "b": 1}
    # Once the remedy ran, the next start has nothing to say.
    await _make_compact(kafka_bootstrap, job.changelog)
    await job.run("a")
    assert _checked(job.events) == []
    assert job.store() == {"a": 2, "b": 1}


async def test_a_compacted_changelog_made_beforehand_is_no_warning(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    job = Counts(tmp_path, kafka_bootstrap)
    await job.start("compact")
    await job.run("a")
    assert _checked(job.events) == []
    assert job.store() == {"a": 1}
