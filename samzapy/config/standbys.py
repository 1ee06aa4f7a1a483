"""Checks of the group: ``job.coordinator.factory: kafka-group`` needs every input on Kafka,
and standby replicas (``job.standbytasks.replication.factor``) need the group.

The kafka-group coordinator's assignor places standby replicas and fails a task over to one;
a ``static`` job (explicitly, or by default because an input is not on Kafka) has neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.config.guarantee import parse_system_stream

KEY = "job.standbytasks.replication.factor"
#: samzapy's systems that have no consumer group (a module:Class system may have one).
_WITHOUT_GROUPS = ("memory", "file")


def standby_problems(
    values: Mapping[str, Any],
    factories: Mapping[str, str | None],
    problem: Callable[[str | None, str], None],
) -> None:
    """Report kafka-group with an input on another system (the systems' consumers would
    refuse it at start-up), and a replication factor above 1 under the static coordinator."""
    parsed = map(parse_system_stream, values.get("task.inputs") or ())
    inputs = [ss for ss in parsed if ss is not None]
    coordinator = values.get("job.coordinator.factory")
    if coordinator == "kafka-group":
        outside = sorted(
            {
                f"{ss[0]}.{ss[1]} ({factories.get(ss[0])})"
                for ss in inputs
                if factories.get(ss[0]) in _WITHOUT_GROUPS
            }
        )
        if outside:
            problem(
                "job.coordinator.factory",
                "job.coordinator.factory is kafka-group, which needs every input on a kafka "
                f"system (its consumer group places the tasks), but {', '.join(outside)} "
                "is not: use static",
            )
    factor = values.get(KEY)
    if not isinstance(factor, int) or factor <= 1:
        return
    if coordinator is None:  # the default: kafka-group when every input is on kafka
        kinds = {factories.get(ss[0]) for ss in inputs}
        coordinator = "kafka-group" if kinds == {"kafka"} else "static"
    if coordinator == "static":
        problem(
            KEY,
            f"{KEY} is {factor}, but standby replicas need job.coordinator.factory "
            "kafka-group (every input on a kafka system): a static job has no group to "
            "place them or to fail over to them; set it to 1 or use kafka-group",
        )


__all__ = ["standby_problems"]
