"""The ``progress`` line's fields over the tasks of one run loop or of every share of a
process (docs/configuration.md, "Bootstrap streams": "the periodic progress event counts the
tasks still bootstrapping (``tasks_bootstrapping``)"; README, "Running": the lag, the
partition furthest behind and the calls in flight)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from samzapy import SystemStreamPartition, TaskName
from samzapy.container.progress import TaskProgress, progress_fields


def task(
    name: str,
    *,
    in_flight: int = 0,
    finished: bool = False,
    bootstrapping: bool = False,
    held: bool = False,
) -> TaskProgress:
    return TaskProgress(
        TaskName(name), 10, in_flight, 0, 0, 0, None, False, held, False, finished, None, 0,
        bootstrapping=bootstrapping,
    )  # fmt: skip


class Loop:
    def __init__(
        self,
        tasks: list[TaskProgress],
        lags: Mapping[TaskName, Mapping[SystemStreamPartition, Callable[[], float]]],
    ) -> None:
        self._tasks, self.lags = tasks, lags

    def task_progress(self) -> list[TaskProgress]:
        return self._tasks


def test_fields_count_running_bootstrapping_held_and_in_flight_over_every_loop() -> None:
    p0, p1, p2 = (SystemStreamPartition("kafka", "views", p) for p in range(3))
    first = Loop(
        [
            task("Partition 0", in_flight=2, bootstrapping=True),
            task("Partition 1", finished=True, held=True),  # finished: not counted
        ],
        {TaskName("Partition 0"): {p0: lambda: 5}, TaskName("Partition 1"): {p1: lambda: 0}},
    )
    second = Loop(
        [task("Partition 2", in_flight=1, held=True)], {TaskName("Partition 2"): {p2: lambda: 7}}
    )
    assert progress_fields([first, second]) == {
        "in_flight": 3,
        "tasks_running": 2,
        "tasks_bootstrapping": 1,
        "tasks_held": 1,
        "lag": 12,
        "lag_max": 7,
        "lag_max_partition": "kafka.views#2",
    }
    assert progress_fields([]) == {
        "in_flight": 0,
        "tasks_running": 0,
        "tasks_bootstrapping": 0,
        "tasks_held": 0,
        "lag": 0,
        "lag_max": 0,
        "lag_max_partition": None,
    }
