"""What the members of a job's consumer group tell each other, checked as it comes off the
wire: the member metadata and assignment user data of samzapy's assignor (``group.py``; an
assignment's ``"from"`` and ``"to"``, where its moving tasks come from and go to:
``group_members.py``).

A member's metadata is a JSON object: the tasks it runs (``"tasks": [3, 5]``), when it
released tasks since the last rebalance (``"released": {"3": 1712345678.9}``), its standbys'
lags (``"standbys": {"3": 120}``), the job it belongs to (``"job": ["pageviews", "1"]``,
``job.name`` and ``job.id``), when its membership was created (``"since"``, wall clock,
s), and where it runs (``"container"``, ``"host"``, with standbys its store directory's id
``"directory"``: ``group_members.py``). The group's
name ``samzapy.<job.name>.<job.id>`` is the same for job ``a.b`` id ``1`` and job ``a`` id
``b.1``: the leader gives tasks only to the members of the job that held the group
first, the one whose oldest member was created first (``first_job``), whichever job's member
leads (a colliding job started later, or crash-looping, never takes the group from a running
one when a member of it happens to lead); each other member's assignment carries
``"refused"``, the message it fails with (``refusal``), the leader's own included. A member of
an older samzapy names no job: it is taken as the leader's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import structlog

log = structlog.get_logger("samzapy.kafka")

#: A job's ``job.name`` and ``job.id``.
Job = tuple[str, str]


def decode(data: bytes | None) -> dict[str, Any]:
    """A metadata or user data object; {} for anything else."""
    try:
        decoded = json.loads(data or b"{}")
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def released_times(value: Any) -> dict[int, float]:
    """``{"3": 1712345678.9}`` from the wire, checked."""
    out: dict[int, float] = {}
    if isinstance(value, dict):
        for task, at in value.items():
            if isinstance(at, int | float) and str(task).isdigit():
                out[int(task)] = float(at)
    return out


def standby_report(value: Any) -> dict[int, int | None]:
    """``{"3": 120, "5": null}`` from the wire, checked."""
    out: dict[int, int | None] = {}
    if isinstance(value, dict):
        for task, lag in value.items():
            if str(task).isdigit():
                out[int(task)] = lag if type(lag) is int else None
    return out


def task_list(value: Any) -> list[int]:
    """``[3, 5]`` from the wire, checked."""
    return sorted({t for t in value if type(t) is int} if isinstance(value, list) else ())


def job_of(data: Mapping[str, Any]) -> Job | None:
    """The job a member's metadata names; None when it names none (an older samzapy)."""
    value = data.get("job")
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    return None


def since_of(data: Mapping[str, Any]) -> float | None:
    """When a member's membership was created; None when it does not say."""
    value = data.get("since")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def first_job(
    leader: Job | None, jobs: Mapping[str, Job | None], since: Mapping[str, float | None]
) -> Job | None:
    """The job of the member created first (of ``jobs``, each member's job; ``since``, when
    each was created): the job that held the group. A member naming no job is the
    ``leader``'s, one naming no time the oldest (an older samzapy's); a tie goes to the
    leader's job. None when the leader names no job (it refuses no one)."""
    if leader is None:
        return None
    first: dict[Job, float] = {}
    for member, job in jobs.items():
        at = since.get(member)
        owner = leader if job is None else job
        first[owner] = min(first.get(owner, math.inf), -math.inf if at is None else at)
    return min(first, key=lambda job: (first[job], job != leader), default=leader)


def strangers(leader: Job | None, jobs: Mapping[str, Job | None]) -> dict[str, Job]:
    """The members (of ``jobs``, each member's job) that belong to another job than the
    ``leader``'s; a member naming no job, or a leader naming none, is no stranger."""
    if leader is None:
        return {}
    return {member: job for member, job in jobs.items() if job is not None and job != leader}


def refusal(group_id: str, leader: Job, job: Job) -> str:
    """What a member of ``job`` refused for ``leader``, the job holding ``group_id``
    (``first_job``), fails with."""
    return (
        f"job.name, job.id: consumer group {group_id!r} is used by another job "
        f"(job.name {leader[0]!r} job.id {leader[1]!r}), whose containers joined it first; "
        f"this job (job.name {job[0]!r} job.id {job[1]!r}) maps to the same group name, and "
        "sharing it would split the tasks of both jobs between them: change job.name or "
        "job.id of this job so that the names differ"
    )


def refusals(group_id: str, leader: Job, refused: Mapping[str, Job]) -> Iterator[tuple[str, bytes]]:
    """The assignment user data of each of the ``refused`` members (``strangers``), logged."""
    if refused:
        log.warning(
            "group_members_refused",
            group=group_id,
            members=sorted(refused),
            jobs=sorted({f"{name}/{job_id}" for name, job_id in refused.values()}),
            reason="they belong to another job whose job.name and job.id map to this group",
        )
    for member, job in refused.items():
        yield member, json.dumps({"refused": refusal(group_id, leader, job)}).encode()


__all__ = [
    "Job",
    "decode",
    "first_job",
    "job_of",
    "refusal",
    "refusals",
    "released_times",
    "since_of",
    "standby_report",
    "strangers",
    "task_list",
]
