"""How the tasks of a job are shared among the members of its group: balanced by count and
sticky (``assign_tasks``), and never given to one member while another still runs them
(``withhold_moving``, KIP-429's first phase); with standby replicas, a ``StandbyPlacement``'s
rule instead (``plan_tasks``, the Kafka assignor's plan). Pure; the Kafka assignor
(``system/kafka/group.py``) and the standby placement (``coordinator/placement.py``) apply it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from samzapy.system.group import StandbyPlacement


def assign_tasks(
    tasks: Sequence[int],
    previous: Mapping[str, Iterable[int]],
    prefer: Callable[[int, list[str]], str | None] | None = None,
) -> dict[str, list[int]]:
    """Tasks per member: counts differ by at most one; a member keeps the tasks it had (as
    far as its share allows), so a rebalance moves as few tasks as it can.

    ``previous`` maps every member to the tasks it reported owning (possibly none).
    ``prefer(task, members with room)``: the member a task no one keeps should go to, if
    one (standby replicas: the warmest); asked for every such task before the others go,
    each to the member with the fewest tasks.
    """
    members = sorted(previous)
    if not members:
        return {}
    valid = set(tasks)
    n, m = len(valid), len(members)
    owned = {member: [t for t in previous[member] if t in valid] for member in members}
    # The members that held the most get the larger shares: fewer moves.
    by_holding = sorted(members, key=lambda member: (-len(owned[member]), member))
    share = {member: n // m + (1 if i < n % m else 0) for i, member in enumerate(by_holding)}
    result: dict[str, list[int]] = {member: [] for member in members}
    taken: set[int] = set()
    for member in by_holding:
        for task in sorted(owned[member]):
            if len(result[member]) < share[member] and task not in taken:
                result[member].append(task)
                taken.add(task)
    free = [t for t in sorted(valid) if t not in taken]
    for task in free:
        chosen = (
            None
            if prefer is None
            else prefer(task, [x for x in members if len(result[x]) < share[x]])
        )
        if chosen is not None:
            result[chosen].append(task)
            taken.add(task)
    for task in free:
        if task in taken:
            continue
        member = min(
            (x for x in members if len(result[x]) < share[x]),
            key=lambda x: (len(result[x]), x),
        )
        result[member].append(task)
    return {member: sorted(ts) for member, ts in result.items()}


def withhold_moving(
    plan: Mapping[str, Sequence[int]], owned: Mapping[str, Iterable[int]]
) -> dict[str, list[int]]:
    """KIP-429's first phase: a task that ``plan`` gives to a member while another member
    still reports owning it is given to no one in this generation. Its owner, finding it
    gone from its assignment, releases it and rejoins; the next generation gives it out."""
    owners: dict[int, set[str]] = {}
    for member, tasks in owned.items():
        for task in tasks:
            owners.setdefault(task, set()).add(member)
    return {
        member: [t for t in tasks if owners.get(t, {member}) <= {member}]
        for member, tasks in plan.items()
    }


def plan_tasks(
    task_count: int,
    previous: Mapping[str, list[int]],
    reports: Mapping[str, Mapping[int, int | None]],
    placement: StandbyPlacement | None,
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
    """Active tasks per member (a moving task held back), standby and warmup tasks per
    member, and the active tasks per member planned (a moving task at its new member)."""
    if placement is None:
        active = assign_tasks(range(task_count), previous)
        none: dict[str, list[int]] = {member: [] for member in active}
        return withhold_moving(active, previous), none, dict(none), active
    active, standbys, warmups = placement.place(range(task_count), previous, reports)
    given = withhold_moving(active, previous)
    for member, tasks in active.items():
        held_back = set(tasks) - set(given[member])
        kept_warm = held_back & set(reports.get(member, {}))
        standbys[member] = sorted(set(standbys.get(member, ())) | kept_warm)
    return given, standbys, warmups, active


__all__ = ["assign_tasks", "plan_tasks", "withhold_moving"]
