"""A task's choice among its partitions' queues: Samza's round-robin, message by message."""

from __future__ import annotations

from samzapy.api.system import SystemStreamPartition
from samzapy.container.inputs import InputQueue, TaskInputs


def queues(*contents: list[str], capacity: int = 100) -> tuple[list[InputQueue], TaskInputs]:
    made = [InputQueue(SystemStreamPartition("k", "s", i), capacity) for i in range(len(contents))]
    for q, items in zip(made, contents, strict=True):
        q.queue.extend(items)  # type: ignore[arg-type]
    return made, TaskInputs(made, space_freed=lambda: None)


def test_each_partition_in_turn_skipping_the_empty_ones() -> None:
    _, inputs = queues(["a1", "a2", "a3"], ["b1"], [], ["d1", "d2"])
    taken = [inputs.choose() for _ in range(7)]
    assert taken == ["a1", "b1", "d1", "a2", "d2", "a3", None]


def test_the_turn_goes_on_from_where_it_was_when_messages_arrive() -> None:
    made, inputs = queues(["a1"], ["b1"])
    assert [inputs.choose(), inputs.choose(), inputs.choose()] == ["a1", "b1", None]
    made[0].queue.append("a2")  # type: ignore[arg-type]
    made[1].queue.append("b2")  # type: ignore[arg-type]
    assert [inputs.choose(), inputs.choose()] == ["a2", "b2"]


def test_no_partition_left_chooses_nothing() -> None:
    made, inputs = queues(["a1"], ["b1"])
    for q in made:
        inputs.end(q.ssp)
    assert inputs.choose() is None


def test_fewer_partitions_after_a_hold() -> None:
    made, inputs = queues(["a1", "a2"], ["b1", "b2"], ["c1", "c2"])
    assert [inputs.choose(), inputs.choose(), inputs.choose()] == ["a1", "b1", "c1"]
    inputs.hold_all_but({made[1].ssp})
    assert [inputs.choose(), inputs.choose()] == ["b2", None]
    inputs.release()
    assert sorted(str(inputs.choose()) for _ in range(2)) == ["a2", "c2"]


def test_consumers_are_woken_when_a_queue_is_drained_to_its_low_mark() -> None:
    woken: list[int] = []
    made = [InputQueue(SystemStreamPartition("k", "s", i), 4) for i in range(2)]
    for q in made:
        q.queue.extend(range(4))  # type: ignore[arg-type]
    inputs = TaskInputs(made, space_freed=lambda: woken.append(1))
    low = made[0].low_mark
    while len(made[0].queue) > low:
        inputs.choose()
    assert woken
