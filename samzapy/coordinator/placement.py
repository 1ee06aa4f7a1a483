"""Where a job's tasks and their standby replicas go (``job.standbytasks.replication.factor``).

Pure: the group's leader calls ``place`` through ``GroupStandbys`` (the assignor of
``system/kafka/group.py`` knows it only as a ``StandbyPlacement``). Each member reports the
tasks it runs and the standbys it keeps, with how far each standby is behind the task's latest
checkpoint (its *lag*, in changelog records; None while it does not know).

1. Active tasks: balanced by count (counts differ by at most one) and sticky (a member keeps
   the tasks it reports, as far as its share allows), as ``assign_tasks``; a task no one keeps
   (its owner died or left, or the balance took it away) goes to a member with room that holds
   a standby of it, the least behind first, else to the member with the fewest tasks.
2. Warm first, move when caught up (KIP-441), for planned moves: a task the balance would
   move from a member that still runs it to one that holds no warm copy of it (none, or one
   more than ``ACCEPTABLE_LAG`` records behind its checkpoint) stays where it runs, and the
   other member gets it as a *warmup* standby; the member rejoins once that standby has
   caught up (``standby.py``), and the next rebalance moves the task. Counts may differ by
   more than one meanwhile. A task whose owner died or left is never held back.
3. Standbys: each task gets ``replicas`` of them (at most one per member, never on the member
   the task is given to, so at most members - 1). A member keeps the standbys it reports, the
   least behind first, while it holds no more than its share of all the standbys; the rest go
   to the eligible members with the fewest standbys.

The assignor then holds a moving task back for one generation (KIP-429) and lets its new owner
keep its standby of it meanwhile (``system/kafka/group.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence

from samzapy.system.assignment import assign_tasks
from samzapy.system.ports import StandbyPlacement

#: A member's standbys: task -> lag behind the task's latest checkpoint (records), or None.
Report = Mapping[int, int | None]
#: How far behind its checkpoint a standby may be for a planned move to go to it (Kafka
#: Streams' ``acceptable.recovery.lag``).
ACCEPTABLE_LAG = 10_000


def _warmth(lag: int | None) -> tuple[int, int]:
    """Sort key: a standby that knows its lag before one that does not, less behind first."""
    return (0, lag) if lag is not None else (1, 0)


def assign_active(
    tasks: Sequence[int],
    previous: Mapping[str, Iterable[int]],
    standbys: Mapping[str, Report],
) -> dict[str, list[int]]:
    """Step 1: tasks per member (module docstring). ``previous`` maps every member to the
    tasks it reported running (possibly none); ``standbys`` to the standbys it reported."""

    def warmest(task: int, room: list[str]) -> str | None:
        holders = [(_warmth(standbys[x][task]), x) for x in room if task in standbys.get(x, {})]
        return min(holders)[1] if holders else None

    return assign_tasks(tasks, previous, warmest)


def hold_back_cold_moves(
    active: dict[str, list[int]],
    previous: Mapping[str, Iterable[int]],
    standbys: Mapping[str, Report],
) -> dict[str, list[int]]:
    """Step 2: keep each planned move to a member without a warm copy where it runs; the
    warmups (member -> tasks it should warm up). ``active`` is changed in place."""
    runs = {t: member for member, ts in previous.items() if member in active for t in ts}
    warmups: dict[str, list[int]] = {member: [] for member in active}
    for member, tasks in active.items():
        for task in list(tasks):
            owner = runs.get(task)
            if owner is None or owner == member:
                continue
            lag = standbys.get(member, {}).get(task)
            if lag is not None and lag <= ACCEPTABLE_LAG:
                continue
            tasks.remove(task)
            active[owner].append(task)
            warmups[member].append(task)
    for member in active:
        active[member].sort()
    return warmups


def assign_standbys(
    tasks: Sequence[int],
    active: Mapping[str, Iterable[int]],
    standbys: Mapping[str, Report],
    replicas: int,
) -> dict[str, list[int]]:
    """Step 3: standby tasks per member (module docstring), given the active ``active``."""
    members = sorted(active)
    result: dict[str, list[int]] = {member: [] for member in members}
    copies = min(replicas, len(members) - 1)
    if copies <= 0:
        return result
    owner = {t: member for member, ts in active.items() for t in ts}
    valid = sorted(set(tasks))
    cap = math.ceil(len(valid) * copies / len(members))
    placed: dict[int, list[str]] = {t: [] for t in valid}
    # Sticky: the members that keep a standby of the task, the least behind first.
    for task in valid:
        holders = sorted(
            (_warmth(standbys.get(x, {})[task]), x)
            for x in members
            if task in standbys.get(x, {}) and owner.get(task) != x
        )
        for _, member in holders:
            if len(placed[task]) < copies and len(result[member]) < cap:
                placed[task].append(member)
                result[member].append(task)
    # The rest: the eligible members with the fewest standbys.
    for task in valid:
        while len(placed[task]) < copies:
            eligible = [x for x in members if x != owner.get(task) and x not in placed[task]]
            if not eligible:
                break
            member = min(eligible, key=lambda x: (len(result[x]), x))
            placed[task].append(member)
            result[member].append(task)
    _even_out(result, placed, owner)
    return {member: sorted(ts) for member, ts in result.items()}


def _even_out(
    result: dict[str, list[int]], placed: dict[int, list[str]], owner: Mapping[int, str]
) -> None:
    """Move standbys from the busiest member to the idlest while their counts differ by
    more than one and a move is allowed (the task is not the idlest's, nor already there)."""
    for _ in range(sum(len(ts) for ts in result.values())):
        busiest = max(result, key=lambda x: (len(result[x]), x))
        idlest = min(result, key=lambda x: (len(result[x]), x))
        if len(result[busiest]) - len(result[idlest]) <= 1:
            return
        movable = [t for t in result[busiest] if owner.get(t) != idlest and idlest not in placed[t]]
        if not movable:
            return
        task = movable[-1]
        result[busiest].remove(task)
        result[idlest].append(task)
        placed[task][placed[task].index(busiest)] = idlest


def place(
    tasks: Sequence[int],
    previous: Mapping[str, Iterable[int]],
    standbys: Mapping[str, Report],
    replicas: int,
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
    """Active, standby and warmup tasks per member: steps 1 to 3 (a warmup is a standby
    too: it is in both)."""
    active = assign_active(tasks, previous, standbys)
    warmups = hold_back_cold_moves(active, previous, standbys)
    placed = assign_standbys(tasks, active, standbys, replicas)
    for member, tasks_ in warmups.items():
        placed[member] = sorted(set(placed[member]) | set(tasks_))
    return active, placed, warmups


class GroupStandbys(StandbyPlacement):
    """This member's side of standby placement: what it reports in its metadata, the rule
    the leader applies, and the standby tasks of its latest assignment."""

    def __init__(
        self, replicas: int, report: Callable[[], Report], state_directory: str | None = None
    ) -> None:
        """``replicas``: standbys per task (the replication factor minus one)."""
        self.replicas = replicas
        self.state_directory = state_directory
        self._report = report
        #: The standby tasks of the latest assignment, and those of them that warm up for a
        #: move here.
        self.assigned_standbys: list[int] = []
        self.assigned_warmups: list[int] = []

    def report(self) -> dict[int, int | None]:
        return dict(self._report())

    def place(
        self,
        tasks: Sequence[int],
        previous: Mapping[str, Iterable[int]],
        standbys: Mapping[str, Mapping[int, int | None]],
    ) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
        return place(tasks, previous, standbys, self.replicas)

    def assigned(self, standbys: Sequence[int], warmups: Sequence[int] = ()) -> None:
        self.assigned_standbys = sorted(standbys)
        self.assigned_warmups = sorted(warmups)


__all__ = [
    "ACCEPTABLE_LAG",
    "GroupStandbys",
    "assign_active",
    "assign_standbys",
    "hold_back_cold_moves",
    "place",
]
