"""Who this container is in its job: the coordinator the job uses, the job's consumer group,
this container's id and static share, and the committer of a job without a group member."""

from __future__ import annotations

import os
import re
import socket

from samzapy.api.errors import ConfigError
from samzapy.checkpoint.group import GroupOffsets
from samzapy.config import ResolvedConfig
from samzapy.container.systems import system_factory
from samzapy.system.ports import GroupMembership

KAFKA_GROUP = "kafka-group"
STATIC = "static"


def coordinator_of(config: ResolvedConfig) -> str:
    """``job.coordinator.factory``, or its default for the job's inputs."""
    if config.job.coordinator_factory is not None:
        return config.job.coordinator_factory
    systems = {ss.system for ss in config.task.inputs}
    factories = {config.systems[s].factory for s in systems if s in config.systems}
    return KAFKA_GROUP if factories == {"kafka"} else STATIC


def job_group_id(config: ResolvedConfig) -> str:
    """The job's Kafka consumer group: the one ``kafka-group`` containers join, and the one
    every coordinator commits the checkpointed input offsets to."""
    return f"samzapy.{config.job.name}.{config.job.id}"


def container_name(config: ResolvedConfig) -> str:
    """The id every log event carries as ``container``: ``job.container.id`` when set, else
    ``0`` for a static job and ``<host>-<pid>`` for a dynamic member of the group."""
    if config.job.container_id is not None:
        return config.job.container_id
    if coordinator_of(config) == STATIC:
        return "0"
    return f"{socket.gethostname()}-{os.getpid()}"


def fence_wait_s(membership: GroupMembership) -> float:
    """How long a static member's first assignment waits before it starts its tasks: two
    heartbeat intervals and a margin, in which a fenced predecessor stops its own."""
    return 2 * membership.heartbeat_interval_s + 0.25


def container_index(config: ResolvedConfig) -> int:
    """``job.container.id`` as an index below ``job.container.count``: an integer, or a name
    ending in one (``samzapy-2``, a StatefulSet pod's name). The one container of a job of
    one may have any other name, but not one naming another index: a sixth pod of a job
    whose count was left at 1 would run every task beside the other five."""
    raw = config.job.container_id or "0"
    count = config.job.container_count
    found = re.search(r"(\d+)$", raw)
    index = int(found.group(1)) if found else (0 if count == 1 else -1)
    if not 0 <= index < count:
        raise ConfigError(
            f"job.container.id must be an integer from 0 to job.container.count - 1 "
            f"({count - 1}), or a name ending in one, got {raw!r}",
            key="job.container.id",
        )
    return index


def group_offsets_without_membership(config: ResolvedConfig) -> GroupOffsets | None:
    """Commits to the job's group without joining it (``static``, and ``samzapy checkpoint
    set``), on the system of its first input that has consumer groups (None when none has)."""
    group_id = job_group_id(config)
    for system in dict.fromkeys(ss.system for ss in config.task.inputs):
        if system not in config.systems:
            continue
        committer = system_factory(config, system).get_offset_committer(group_id)
        if committer is not None:
            return GroupOffsets(committer, system=system, group_id=group_id)
    return None


__all__ = [
    "KAFKA_GROUP",
    "STATIC",
    "container_index",
    "container_name",
    "coordinator_of",
    "fence_wait_s",
    "group_offsets_without_membership",
    "job_group_id",
]
