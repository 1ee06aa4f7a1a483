"""Group-by-partition: task k reads partition k of every input that has one; the job has as
many tasks as its widest input has partitions; broadcast partitions reach every task once."""

from __future__ import annotations

import json

import pytest

from samzapy import ConfigError, SystemStream, SystemStreamPartition, TaskName
from samzapy.config import load_config, resolve
from samzapy.container.grouper import group_by_partition
from samzapy.container.plan import job_model

VIEWS = SystemStream("kafka", "page-views")
CLICKS = SystemStream("kafka", "clicks")
RULES = SystemStream("kafka", "rules")


def ssp(ss: SystemStream, p: int) -> SystemStreamPartition:
    return SystemStreamPartition(ss.system, ss.stream, p)


def test_task_k_reads_partition_k_of_every_input() -> None:
    tasks = group_by_partition({VIEWS: 2, CLICKS: 2})
    assert [(t.name, t.partition, t.ssps) for t in tasks] == [
        (TaskName("Partition 0"), 0, (ssp(VIEWS, 0), ssp(CLICKS, 0))),
        (TaskName("Partition 1"), 1, (ssp(VIEWS, 1), ssp(CLICKS, 1))),
    ]


def test_the_widest_input_sets_the_task_count_and_narrow_inputs_skip_high_tasks() -> None:
    tasks = group_by_partition({VIEWS: 12, CLICKS: 14})
    assert len(tasks) == 14
    assert tasks[11].ssps == (ssp(VIEWS, 11), ssp(CLICKS, 11))
    assert tasks[13].ssps == (ssp(CLICKS, 13),)


def test_broadcast_partitions_reach_every_task_and_are_not_grouped() -> None:
    tasks = group_by_partition({VIEWS: 2, RULES: 3}, [(RULES, [0])])
    assert [t.ssps for t in tasks] == [
        (ssp(VIEWS, 0), ssp(RULES, 0)),
        (ssp(VIEWS, 1), ssp(RULES, 1), ssp(RULES, 0)),
        (ssp(RULES, 2), ssp(RULES, 0)),
    ]


def test_only_the_listed_partitions_of_a_broadcast_stream_outside_the_inputs_are_read() -> None:
    """docs/configuration.md: Samza would group its other partitions by number, as inputs;
    samzapy reads the listed ones only (kafka.rules#1 and #2 reach no task)."""
    tasks = group_by_partition({VIEWS: 2}, [(RULES, [0])], {RULES: 3})
    assert [t.ssps for t in tasks] == [
        (ssp(VIEWS, 0), ssp(RULES, 0)),
        (ssp(VIEWS, 1), ssp(RULES, 0)),
    ]


def test_a_job_of_broadcast_inputs_only_has_one_task() -> None:
    tasks = group_by_partition({}, [(RULES, [0, 1])])
    assert [(t.name, t.ssps) for t in tasks] == [
        (TaskName("Partition 0"), (ssp(RULES, 0), ssp(RULES, 1)))
    ]


def test_a_broadcast_partition_beyond_the_stream_is_a_config_error() -> None:
    with pytest.raises(
        ConfigError, match=r"task.broadcast.inputs names partition 3 of kafka.rules, which has 3"
    ):
        group_by_partition({RULES: 3}, [(RULES, [3])])


def test_no_inputs_no_tasks() -> None:
    assert group_by_partition({}) == []


def test_a_broadcast_stream_outside_the_inputs_is_checked_too() -> None:
    """A broadcast stream need not be in ``task.inputs``; a partition beyond its count is
    still a configuration error before any consumer is asked for it."""
    config = resolve(
        load_config(
            text=json.dumps(
                {
                    "job.name": "j",
                    "task.class": "x:Y",
                    "task.inputs": ["kafka.page-views"],
                    "task.broadcast.inputs": ["kafka.rules#[1-3]"],
                    "systems.kafka.samza.factory": "memory",
                }
            )
        )
    )
    with pytest.raises(
        ConfigError, match=r"task.broadcast.inputs names partition 3 of kafka.rules, which has 3"
    ):
        job_model(config, {VIEWS: 2, RULES: 3})
    models, count = job_model(config, {VIEWS: 2, RULES: 4})
    assert count == 2
    assert models[1].ssps == (ssp(VIEWS, 1), ssp(RULES, 1), ssp(RULES, 2), ssp(RULES, 3))
