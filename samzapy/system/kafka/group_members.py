"""Who is in a kafka-group job's consumer group, as its leader sees it at each assignment.

A member's id (the broker's, ``<client or instance id>-<uuid>``) says little about where it
runs, and the broker does not hand a static member's ``group_instance_id`` to the assignor:
each member's metadata therefore names its ``job.container.id`` (``"container"``, a static
member only) and its host (``"host"``, its hostname: a pod's or docker container's name).

The leader compares the members of each assignment it makes with those of the previous one
it made, by member id, and logs ``group_members_changed`` when they differ: ``joined``,
``left`` and ``members``, each member as ``{"member", "container", "host"}`` (what its
metadata carries), with the group's ``generation`` and ``previous_generation``, the one it
last assigned. A member leading for the first time (``previous_generation`` null) has no
previous one: every member is ``joined``. A static member that restarted is a new member id
with the same ``container``: it is in ``left`` under its old id and in ``joined`` under its
new one (a static member's rejoin that starts no rebalance is not seen at all). Nothing
here runs per message: once per assignment, on the leader only.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import structlog

log = structlog.get_logger("samzapy.kafka")


def identity(instance_id: str | None) -> dict[str, str]:
    """What this member's metadata says about where it runs."""
    out = {"host": socket.gethostname()}
    if instance_id is not None:
        out["container"] = instance_id
    return out


def described(member: str, data: Mapping[str, Any]) -> dict[str, str]:
    """``member`` and where its metadata ``data`` says it runs, checked as it comes off the
    wire (a member of an older samzapy names nothing)."""
    out = {"member": member}
    for key in ("container", "host"):
        if isinstance(value := data.get(key), str):
            out[key] = value
    return out


class GroupMembers:
    """The members of the last assignment this member made as the group's leader."""

    def __init__(self, instance_id: str | None) -> None:
        #: What this member's metadata says about it (``identity``).
        self.identity = identity(instance_id)
        self._members: dict[str, dict[str, str]] | None = None
        self._generation: int | None = None

    def assigned(
        self, group: str, metadata: Mapping[str, Mapping[str, Any]], consumer: Any = None
    ) -> tuple[list[dict[str, str]], list[dict[str, str]]] | None:
        """This member assigns the group's members (``metadata``: each one's, decoded), in
        the generation aiokafka's ``consumer`` joined; the members that joined and left since
        its previous assignment, logged, or None when none did."""
        members = {m: described(m, data) for m, data in sorted(metadata.items())}
        coordinator = getattr(consumer, "_coordinator", None)
        generation = getattr(coordinator, "generation", None)
        generation = generation if type(generation) is int else None
        previous, previous_generation = self._members, self._generation
        self._members, self._generation = members, generation
        before = previous or {}
        joined = [d for m, d in members.items() if m not in before]
        left = [d for m, d in before.items() if m not in members]
        if previous is not None and not joined and not left:
            return None
        log.info(
            "group_members_changed",
            group=group,
            generation=generation,
            previous_generation=previous_generation if previous is not None else None,
            joined=joined,
            left=left,
            members=list(members.values()),
        )
        return joined, left


__all__ = ["GroupMembers", "described", "identity"]
