"""Where tasks and their standby replicas go (coordinator/placement.py), and how the group's
assignor applies it (system/assignment.py's ``plan_tasks``): pure."""

from __future__ import annotations

from collections import Counter

import pytest

from samzapy.coordinator.placement import (
    ACCEPTABLE_LAG,
    GroupStandbys,
    assign_active,
    assign_standbys,
    place,
)
from samzapy.system.assignment import assign_tasks, plan_tasks

TASKS = list(range(12))


def _owners(plan: dict[str, list[int]]) -> Counter[int]:
    return Counter(t for tasks in plan.values() for t in tasks)


def test_without_standbys_the_active_plan_is_assign_tasks() -> None:
    previous = {"a": [0, 1, 2, 3, 4], "b": [5, 6], "c": []}
    assert assign_active(TASKS, previous, {}) == assign_tasks(TASKS, previous)


def test_a_dead_members_tasks_go_to_the_members_holding_their_standbys() -> None:
    # "b" died: its tasks 4-7 are free. "a" holds warm standbys of 4 and 5, "c" of 6 and 7.
    previous = {"a": [0, 1, 2, 3], "c": [8, 9, 10, 11]}
    standbys = {"a": {4: 0, 5: 0, 8: 0}, "c": {6: 3, 7: 0, 0: 0}}
    active = assign_active(TASKS, previous, standbys)
    assert active == {"a": [0, 1, 2, 3, 4, 5], "c": [6, 7, 8, 9, 10, 11]}


def test_the_least_behind_standby_wins_and_balance_comes_first() -> None:
    # 6-8 are free; "a" has no room left (3 each), "b" room for one, "c" for two.
    previous = {"a": [0, 1, 2], "b": [3, 4], "c": [5]}
    standbys = {"a": {6: 0, 7: 0}, "b": {6: 2}, "c": {6: None, 8: 0}}
    active = assign_active(list(range(9)), previous, standbys)
    # 6: b's copy knows it is 2 behind, c's does not know; 7: a's copy, but a is full.
    assert active == {"a": [0, 1, 2], "b": [3, 4, 6], "c": [5, 7, 8]}


@pytest.mark.parametrize("members", [2, 3, 4, 5])
@pytest.mark.parametrize("replicas", [1, 2])
def test_standbys_never_sit_with_their_active_and_are_balanced(members: int, replicas: int) -> None:
    names = [f"m{i}" for i in range(members)]
    active = assign_tasks(TASKS, {n: [] for n in names})
    standbys = assign_standbys(TASKS, active, {}, replicas)
    copies = min(replicas, members - 1)
    owner = {t: m for m, ts in active.items() for t in ts}
    assert _owners(standbys) == Counter({t: copies for t in TASKS})
    for member, tasks in standbys.items():
        assert all(owner[t] != member for t in tasks)
    sizes = [len(ts) for ts in standbys.values()]
    assert max(sizes) - min(sizes) <= 1


def test_one_member_has_no_standbys() -> None:
    assert assign_standbys(TASKS, {"a": TASKS}, {}, 1) == {"a": []}


def test_standbys_are_sticky() -> None:
    active = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
    reported = {"a": {4: 0, 2: 5}, "b": {0: 0, 5: 1}, "c": {1: 0, 3: 0}}
    standbys = assign_standbys(list(range(6)), active, reported, 1)
    assert standbys == {"a": [2, 4], "b": [0, 5], "c": [1, 3]}


def test_a_standby_of_a_task_its_holder_now_runs_goes_elsewhere() -> None:
    # "a" takes task 4 over (its standby); task 4 needs a new standby, not on "a".
    active, standbys, warmups = place(
        list(range(6)), {"a": [0, 1], "b": [2, 3, 5]}, {"a": {4: 0}, "b": {0: 0}}, 1
    )
    assert warmups == {"a": [], "b": []}
    assert 4 in active["a"] and 4 not in standbys["a"]
    assert 4 in standbys["b"]


def test_the_assignor_holds_a_moving_task_back_and_keeps_it_warm_on_its_new_owner() -> None:
    # "c" joins holding a standby of 3, which "a" still runs: the balance moves a task to
    # "c"; held back this generation, task 3 stays a standby there.
    previous = {"a": [0, 1, 2, 3], "b": [4, 5, 6, 7], "c": []}
    reports: dict[str, dict[int, int | None]] = {"a": {}, "b": {}, "c": {3: 0}}
    placement = GroupStandbys(1, dict)
    given, standbys, warmups, _ = plan_tasks(8, previous, reports, placement)
    assert given == {"a": [0, 1, 2], "b": [4, 5, 6, 7], "c": []}
    assert 3 in standbys["c"]
    # Task 7 would move from "b" to "c", which has no copy of it: it warms up there first.
    assert warmups == {"a": [], "b": [], "c": [7]}
    assert 7 in standbys["c"]


def test_the_assignor_without_standbys_gives_none() -> None:
    previous = {"a": [0, 1], "b": []}
    given, standbys, warmups, _ = plan_tasks(4, previous, {}, None)
    assert standbys == {"a": [], "b": []} == warmups
    assert sorted(t for ts in given.values() for t in ts) == [0, 1, 2, 3]


def test_a_planned_move_waits_for_a_warm_copy_and_then_goes() -> None:
    # "c" joined: the balance would move one task of "a" and one of "b" to it.
    previous = {"a": [0, 1, 2], "b": [3, 4, 5], "c": []}
    cold: dict[str, dict[int, int | None]] = {"a": {}, "b": {}, "c": {}}
    active, standbys, warmups = place(list(range(6)), previous, cold, 1)
    assert active == {"a": [0, 1, 2], "b": [3, 4, 5], "c": []}  # nothing moves yet
    assert warmups["c"] == [2, 5] and {2, 5} <= set(standbys["c"])
    # Still catching up (more than ACCEPTABLE_LAG behind, or not knowing): nothing moves.
    behind = {"a": {}, "b": {}, "c": {2: ACCEPTABLE_LAG + 1, 5: None}}
    assert place(list(range(6)), previous, behind, 1)[0]["c"] == []
    # Caught up: both move (the assignor then holds them back one generation, KIP-429).
    warm = {"a": {}, "b": {}, "c": {2: 0, 5: ACCEPTABLE_LAG}}
    active, _, warmups = place(list(range(6)), previous, warm, 1)
    assert active == {"a": [0, 1], "b": [3, 4], "c": [2, 5]}
    assert warmups == {"a": [], "b": [], "c": []}


def test_a_dead_members_tasks_are_never_held_back() -> None:
    previous = {"a": [0, 1, 2], "c": []}  # "b", which ran 3-5, died
    active, _, warmups = place(list(range(6)), previous, {"a": {}, "c": {}}, 1)
    assert sorted(active["c"]) == [3, 4, 5] and warmups["c"] == []
