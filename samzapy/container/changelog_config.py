"""The topic settings a store's changelog needs: those a missing one is created with, and the
start-up check of an existing one's.

A changelog is replayed whole by a restore, so it must keep the latest record of every key for
as long as the store lives: compaction does that; retention (``cleanup.policy`` ``delete``)
removes records by age or size, whatever key they hold, and a restore after that lacks the
keys last written in them (``storage/changelog_gap.py`` says so then, once it is too late).
samzapy creates its changelogs compact-only; one made by hand or by another tool may not be.

The check, made once at start-up for the changelogs that exist:

1. ask each system for the changelogs' ``cleanup.policy``, ``retention.ms`` and
   ``retention.bytes``, all of a system's topics in one request, bounded by ``CHECK_TIMEOUT_S``;
2. judge each answer (``retention_risk``, pure): a changelog that is not compacted, or that
   retention also deletes from, is logged as ``changelog_not_compacted`` (a warning, with the
   command that fixes it); the job starts all the same;
3. a changelog the system did not describe (ACLs denying DescribeConfigs, no answer in time)
   is logged at info as ``changelog_config_unchecked``, and the job starts; on a system that
   has no such settings (memory, file) there is nothing to check or say.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping

import structlog

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.config import ResolvedConfig
from samzapy.system.ports import StreamConfigs, SystemAdmin

log = structlog.get_logger("samzapy.container")

#: A missing changelog's topic config. Compacted, and (Samza's default) no record compacted
#: away sooner than 4 hours after the write that supersedes it: a crash leaves records after
#: the checkpoint that the restore writes back over (``storage/restore.py``, step 3), and
#: until then the records they supersede, from which the checkpoint's state is replayed, must
#: stay (compacted away, the restore would write the keys back as deleted).
CHANGELOG_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": str(4 * 3600 * 1000)}

#: The settings the check reads.
CHECKED_KEYS = ("cleanup.policy", "retention.ms", "retention.bytes")

#: How long the check may hold up a start (one request per system, all at once).
CHECK_TIMEOUT_S = 5.0


def retention_risk(settings: Mapping[str, str]) -> str | None:
    """Why a changelog with topic settings ``settings`` may lose, or never drop, records a
    restore replays; None when it is compact-only or kept whole, or its policy is unknown."""
    policy = settings.get("cleanup.policy")
    if policy is None:
        return None
    policies = {p.strip() for p in policy.split(",") if p.strip()}
    limits = [
        f"{key} {settings[key]}"
        for key in ("retention.ms", "retention.bytes")
        if _finite(settings.get(key))
    ]
    deletes = "delete" in policies and bool(limits)
    if "compact" not in policies:
        if deletes:
            return (
                f"retention ({' and '.join(limits)}) deletes records whatever key they hold, "
                "and nothing compacts: a restore lacks every key whose last write it deleted"
            )
        return (
            "nothing compacts: every record stays, superseded or not, so the changelog and "
            "every restore's replay grow without bound (and any retention set later deletes "
            "keys)"
        )
    if deletes:
        return (
            f"retention ({' and '.join(limits)}) deletes records besides compaction: a key not "
            "written again within it loses its latest record, and a restore lacks it"
        )
    return None


def _finite(value: str | None) -> bool:
    """Whether a retention setting limits anything (-1: no limit; unreadable: unknown)."""
    return value is not None and value.isdecimal()


def remedy(config: ResolvedConfig, changelog: SystemStream) -> str:
    """What makes ``changelog`` compact-only: for a kafka system, the command."""
    system = config.systems.get(changelog.system)
    wanted = ",".join(f"{k}={v}" for k, v in CHANGELOG_CONFIG.items())
    if system is None or system.factory != "kafka":
        return f"give it the settings samzapy creates changelogs with: {wanted}"
    servers = system.servers_text()
    return (
        f"kafka-configs.sh --bootstrap-server {servers} --alter --entity-type topics "
        f"--entity-name {changelog.stream} --add-config {wanted}"
    )


async def check_changelog_configs(
    config: ResolvedConfig,
    admins: Mapping[str, SystemAdmin],
    changelogs: Mapping[str, SystemStream],
) -> None:
    """Check the settings of the existing ``changelogs`` (store -> changelog) and log what
    the module docstring says; never raises for what it finds or cannot find out."""
    by_system: dict[str, dict[str, SystemStream]] = defaultdict(dict)
    for store, changelog in changelogs.items():
        by_system[changelog.system][store] = changelog
    # Step 1: one request per system, all at once.
    answers = await asyncio.gather(
        *(_ask(admins[system], stores.values()) for system, stores in by_system.items())
    )
    for stores, answer in zip(by_system.values(), answers, strict=True):
        if answer is None:
            continue  # a system without such settings: nothing to check
        for store, changelog in stores.items():
            settings, unread = _settings(answer, changelog.stream)
            if settings is None:
                # Step 3: the job can run without the check.
                log.info(
                    "changelog_config_unchecked",
                    store=store,
                    changelog=str(changelog),
                    reason=unread,
                )
                continue
            # Step 2.
            risk = retention_risk(settings)
            if risk is not None:
                log.warning(
                    "changelog_not_compacted",
                    store=store,
                    changelog=str(changelog),
                    cleanup_policy=settings.get("cleanup.policy"),
                    retention_ms=settings.get("retention.ms"),
                    retention_bytes=settings.get("retention.bytes"),
                    reason=risk,
                    remedy=remedy(config, changelog),
                )


def _settings(
    answer: StreamConfigs | str, stream: str
) -> tuple[Mapping[str, str] | None, str | None]:
    """The settings of ``stream`` in ``answer``, or why it holds none."""
    if isinstance(answer, str):
        return None, answer
    if stream in answer.found:
        return answer.found[stream], None
    return None, answer.unread.get(stream, "the system did not describe it")


async def _ask(
    admin: SystemAdmin, changelogs: Iterable[SystemStream]
) -> StreamConfigs | str | None:
    """The system's answer for ``changelogs``, or why there is none (a str)."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return await admin.stream_configs([c.stream for c in changelogs], CHECKED_KEYS)
    except TimeoutError:
        return f"the system did not describe the topics' configs within {CHECK_TIMEOUT_S:g} s"
    except StreamSystemError as exc:
        return str(exc)


__all__ = ["CHANGELOG_CONFIG", "check_changelog_configs", "remedy", "retention_risk"]
