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
new one (a static member's rejoin that starts no rebalance is not seen at all).

Each member's assignment also says where the tasks it gains come from (``"from"``: the
member that released one, or the one the leader last gave it to, if that one left) and where
those it loses go (``"to"``: the member the plan moves them to), as the leader describes
them; the member logs ``task_owners_changed`` (info) with ``tasks_added_from`` and
``tasks_removed_to`` when either has any (``handover``). A leader new to the role knows no
previous owner of a task no one released.

A member with standby replicas also names the id of its store directory (``"directory"``,
``container/store_directory.py``), the same for containers that share it (one volume under
``docker compose --scale``). There a standby is of no use: the active store directory is
shared too, so a task that moves opens its store warm anyway, and the standbys of one task
share one directory (``<store>/<task>.standby``), so with ``job.standbytasks.replication.
factor`` above 2 all but one of them wait for it for good. The leader warns
(``standbys_on_shared_state_directory``, with each such directory's members) whenever the
members sharing directories change. Nothing here runs per message: once per assignment, on
the leader only.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import structlog

from samzapy.system.kafka.group_wire import task_list

log = structlog.get_logger("samzapy.kafka")


def identity(instance_id: str | None, directory: str | None = None) -> dict[str, str]:
    """What this member's metadata says about where it runs (``directory``: its store
    directory's id, with standbys)."""
    out = {"host": socket.gethostname()}
    if instance_id is not None:
        out["container"] = instance_id
    if directory is not None:
        out["directory"] = directory
    return out


def described(member: str, data: Mapping[str, Any]) -> dict[str, str]:
    """``member`` and where its metadata ``data`` says it runs, checked as it comes off the
    wire (a member of an older samzapy names nothing)."""
    out = {"member": member}
    for key in ("container", "host", "directory"):
        if isinstance(value := data.get(key), str):
            out[key] = value
    return out


class GroupMembers:
    """The members of the last assignment this member made as the group's leader."""

    def __init__(self, instance_id: str | None, directory: str | None = None) -> None:
        #: What this member's metadata says about it (``identity``).
        self.identity = identity(instance_id, directory)
        self._members: dict[str, dict[str, str]] | None = None
        self._generation: int | None = None
        #: The members of each store directory shared, as last warned.
        self._shared: dict[str, list[str]] = {}
        #: Each task's member in the last assignment made (``moves``), as described.
        self._owners: dict[int, dict[str, str]] = {}

    def assigned(
        self, group: str, metadata: Mapping[str, Mapping[str, Any]], consumer: Any = None
    ) -> tuple[list[dict[str, str]], list[dict[str, str]]] | None:
        """This member assigns the group's members (``metadata``: each one's, decoded), in
        the generation aiokafka's ``consumer`` joined; the members that joined and left since
        its previous assignment, logged, or None when none did."""
        members = {m: described(m, data) for m, data in sorted(metadata.items())}
        self._check_shared(group, members)
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

    def moves(
        self,
        given: Mapping[str, list[int]],
        planned: Mapping[str, list[int]],
        previous: Mapping[str, list[int]],
        released_by: Mapping[int, str],
    ) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Per member, its assignment's ``"from"`` and ``"to"`` (module docstring): the tasks
        ``given`` it that it did not report (``previous``), by the member that released each
        (``released_by``) or last had it; those it reported and is not given, by the member
        ``planned`` for each. After ``assigned``, whose members it names."""
        members = self._members or {}
        planned_for = {t: m for m, tasks in planned.items() for t in tasks}
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for member, tasks in given.items():
            came: dict[int, dict[str, str]] = {}
            for task in set(tasks) - set(previous.get(member, ())):
                releaser = released_by.get(task)
                source = members[releaser] if releaser in members else self._owners.get(task)
                if source is not None and source["member"] != member:
                    came[task] = source
            went = {
                task: members[planned_for[task]]
                for task in set(previous.get(member, ())) - set(tasks)
                if planned_for.get(task, member) != member and planned_for[task] in members
            }
            out[member] = {"from": _by_member(came), "to": _by_member(went)}
        self._owners = {t: members[m] for m, tasks in given.items() if m in members for t in tasks}
        return out

    def _check_shared(self, group: str, members: Mapping[str, Mapping[str, str]]) -> None:
        """Warn when the members that share store directories changed (module docstring)."""
        by_directory: dict[str, list[str]] = {}
        for member, described in members.items():
            if "directory" in described:
                by_directory.setdefault(described["directory"], []).append(member)
        shared = {d: ms for d, ms in by_directory.items() if len(ms) > 1}
        if shared == self._shared:
            return
        self._shared = shared
        if shared:
            log.warning(
                "standbys_on_shared_state_directory",
                group=group,
                shared=[[dict(members[m]) for m in ms] for _, ms in sorted(shared.items())],
                reason="these containers share one store directory (job.logged.store.base.dir, "
                "one volume): a standby there brings nothing, as a task that moves opens the "
                "shared store warm, and with job.standbytasks.replication.factor above 2 the "
                "standbys of a task wait for each other's directory for good",
                remedy="set job.standbytasks.replication.factor to 1 on a shared volume, or "
                "give each container a volume of its own",
            )


def _by_member(whose: Mapping[int, dict[str, str]]) -> list[dict[str, Any]]:
    """``{3: member, 5: member}`` as ``[{**member, "tasks": [3, 5]}]``, by member id."""
    grouped: dict[str, dict[str, Any]] = {}
    for task, member in sorted(whose.items()):
        grouped.setdefault(member["member"], {**member, "tasks": []})["tasks"].append(task)
    return [grouped[m] for m in sorted(grouped)]


def handover(data: Mapping[str, Any]) -> None:
    """Log where this member's assignment (its user data ``data``, decoded) says the tasks it
    gains come from and those it loses go to, if any."""
    moved = {key: _named(data.get(key)) for key in ("from", "to")}
    if moved["from"] or moved["to"]:
        log.info(
            "task_owners_changed", tasks_added_from=moved["from"], tasks_removed_to=moved["to"]
        )


def _named(value: Any) -> list[dict[str, Any]]:
    """``[{"member": ..., "tasks": [3, 5]}]`` from the wire, checked, with task names."""
    out = []
    for whom in value if isinstance(value, list) else ():
        if isinstance(whom, dict) and isinstance(member := whom.get("member"), str):
            tasks = task_list(whom.get("tasks"))
            out.append({**described(member, whom), "tasks": [f"Partition {t}" for t in tasks]})
    return out


__all__ = ["GroupMembers", "described", "handover", "identity"]
