"""An existing changelog's topic settings, checked at start-up: one that retention deletes from,
or that nothing compacts, is a warning with the command that fixes it; one the system does not
describe (ACLs, no answer in time) is an info line, and the job starts either way."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy.api.errors import StreamSystemError
from samzapy.config import load_config, resolve
from samzapy.container import changelog_config
from samzapy.container.changelog_config import CHECKED_KEYS, retention_risk
from samzapy.container.streams import prepare_changelogs
from samzapy.system.ports import OffsetBounds, StreamConfigs

WEEK_MS = "604800000"  # Kafka's default retention.ms


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        ({"cleanup.policy": "compact", "retention.ms": WEEK_MS}, False),
        (
            {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"},
            False,
        ),
        ({"cleanup.policy": "delete", "retention.ms": WEEK_MS, "retention.bytes": "-1"}, True),
        ({"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}, True),
        ({"cleanup.policy": "compact,delete", "retention.ms": WEEK_MS}, True),
        (
            {"cleanup.policy": "delete, compact", "retention.ms": "-1", "retention.bytes": "1000"},
            True,
        ),
        ({"cleanup.policy": ""}, True),
        ({"retention.ms": WEEK_MS}, False),  # no policy said: unknown, nothing to judge
    ],
)
def test_a_changelog_is_at_risk_unless_compacted_and_not_deleted_by_retention(
    settings: dict[str, str], warned: bool
) -> None:
    assert (retention_risk(settings) is not None) is warned


def test_the_risk_names_the_retention_that_deletes() -> None:
    risk = retention_risk({"cleanup.policy": "delete", "retention.ms": WEEK_MS})
    assert risk is not None and f"retention.ms {WEEK_MS}" in risk
    grows = retention_risk({"cleanup.policy": "delete", "retention.ms": "-1"})
    assert grows is not None and "grow without bound" in grows


class ConfigAdmin:
    """A kafka-like admin whose changelogs exist, with the settings it is given."""

    def __init__(self, answer: StreamConfigs | Exception | None, *, hang: bool = False) -> None:
        self.answer = answer
        self.hang = hang
        self.asked: list[tuple[list[str], tuple[str, ...]]] = []

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        return dict.fromkeys(streams, 2)

    async def offset_bounds(self, ssps: Iterable[Any]) -> dict[Any, OffsetBounds]:
        return {ssp: OffsetBounds(None, "0") for ssp in ssps}

    async def stream_configs(
        self, streams: Iterable[str], keys: Collection[str]
    ) -> StreamConfigs | None:
        self.asked.append((sorted(streams), tuple(keys)))
        if self.hang:
            await asyncio.Event().wait()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


CONFIG = load_config(
    text="""
job.name: logged
task.class: samzapy.testing.runner:TestRunner
task.inputs: [k.in]
systems.k.samza.factory: kafka
systems.k.bootstrap.servers: 127.0.0.1:9
stores.counts.factory: rocksdb
stores.counts.changelog: k.counts-changelog
stores.totals.factory: rocksdb
stores.totals.changelog: k.totals-changelog
"""
)


def check(admin: Any) -> list[dict[str, Any]]:
    with capture_logs() as logs:
        asyncio.run(prepare_changelogs(resolve(CONFIG), {"k": admin}, 2))
    return [e for e in logs if e["event"].startswith("changelog_")]


def test_every_changelog_of_a_system_is_described_in_one_request() -> None:
    compacted = {"cleanup.policy": "compact", "retention.ms": WEEK_MS, "retention.bytes": "-1"}
    admin = ConfigAdmin(
        StreamConfigs({"counts-changelog": compacted, "totals-changelog": compacted}, {})
    )
    assert check(admin) == []
    assert admin.asked == [(["counts-changelog", "totals-changelog"], CHECKED_KEYS)]


def test_a_changelog_retention_deletes_from_is_a_warning_naming_it_and_the_fix() -> None:
    deleted = {"cleanup.policy": "delete", "retention.ms": WEEK_MS, "retention.bytes": "-1"}
    compacted = {"cleanup.policy": "compact", "retention.ms": WEEK_MS, "retention.bytes": "-1"}
    admin = ConfigAdmin(
        StreamConfigs({"counts-changelog": deleted, "totals-changelog": compacted}, {})
    )
    [event] = check(admin)
    assert event["event"] == "changelog_not_compacted"
    assert event["log_level"] == "warning"
    assert (event["store"], event["changelog"]) == ("counts", "k.counts-changelog")
    assert (event["cleanup_policy"], event["retention_ms"]) == ("delete", WEEK_MS)
    assert event["remedy"] == (
        "kafka-configs.sh --bootstrap-server 127.0.0.1:9 --alter --entity-type topics "
        "--entity-name counts-changelog --add-config "
        "cleanup.policy=compact,min.compaction.lag.ms=14400000"
    )


def test_a_changelog_the_system_does_not_describe_is_an_info_line() -> None:
    """ACLs may deny DescribeConfigs on a topic the job may read and write: the job runs."""
    compacted = {"cleanup.policy": "compact"}
    denied = "TopicAuthorizationFailedError: Authorization failed."
    admin = ConfigAdmin(
        StreamConfigs({"totals-changelog": compacted}, {"counts-changelog": denied})
    )
    [event] = check(admin)
    assert event["event"] == "changelog_config_unchecked"
    assert (event["log_level"], event["store"], event["reason"]) == ("info", "counts", denied)


def test_a_refused_request_leaves_every_changelog_of_the_system_unchecked() -> None:
    admin = ConfigAdmin(StreamSystemError("cannot describe the configs: ClusterAuthorization"))
    events = check(admin)
    assert [(e["event"], e["log_level"], e["store"]) for e in events] == [
        ("changelog_config_unchecked", "info", "counts"),
        ("changelog_config_unchecked", "info", "totals"),
    ]
    assert "ClusterAuthorization" in events[0]["reason"]


def test_a_system_that_does_not_answer_holds_the_start_only_briefly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(changelog_config, "CHECK_TIMEOUT_S", 0.01)
    events = check(ConfigAdmin(None, hang=True))
    assert [e["event"] for e in events] == ["changelog_config_unchecked"] * 2
    assert "within 0.01 s" in events[0]["reason"]
