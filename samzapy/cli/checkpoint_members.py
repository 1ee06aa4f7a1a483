"""What ``samzapy checkpoint set`` says of the job's consumer group: the live members that
make it refuse before it writes, and those that joined while it wrote.

A container under ``kafka-group`` joins the group before it reads its tasks' checkpoints,
so one that read them before ``set`` wrote is a member when ``set`` looks again after.
"""

from __future__ import annotations

from collections.abc import Sequence

from samzapy.api.errors import SamzapyError
from samzapy.config import ResolvedConfig
from samzapy.coordinator.identity import job_group_id

#: A member of a consumer group: its member id, client id and host.
Member = tuple[str, str, str]


class JobRunningError(SamzapyError):
    """The job's consumer group has live members: its checkpoints are not to be moved."""


def _group(config: ResolvedConfig, members: Sequence[Member]) -> tuple[str, str]:
    listed = "; ".join(
        f"{member} (client {client}, host {host})" for member, client, host in members
    )
    return f"consumer group {job_group_id(config)!r} of job {config.job.name!r}", listed


def running_error(config: ResolvedConfig, members: Sequence[Member]) -> JobRunningError:
    """Why ``set`` refuses before it writes: the job's group has live ``members``."""
    group, listed = _group(config, members)
    session_ms = config.job.coordinator_session_timeout_ms
    return JobRunningError(
        f"refused: {group} has {len(members)} live member(s): {listed}. Moving the offsets of "
        "a running job would be undone by its next commit: stop every container of the job, "
        "then run this again (a container killed, or stopped with job.container.id set, stays "
        "a member until its session times out: job.coordinator.session.timeout.ms, "
        f"{session_ms} ms)"
    )


def joined_error(
    config: ResolvedConfig, written: int, members: Sequence[Member]
) -> JobRunningError:
    """Why ``set`` fails after it wrote ``written`` checkpoints: ``members`` joined the
    group meanwhile. The move stands (written under an epoch above any such container's),
    but a container that read its checkpoints before the write runs from their offsets."""
    group, listed = _group(config, members)
    return JobRunningError(
        f"wrote {written} checkpoint(s), but {group} gained {len(members)} member(s) while set "
        f"ran: {listed}. A container that started meanwhile may run from the offsets it read "
        "before the move (they no longer count at its next start): stop every container of "
        "the job, then run this again"
    )


__all__ = ["JobRunningError", "Member", "joined_error", "running_error"]
