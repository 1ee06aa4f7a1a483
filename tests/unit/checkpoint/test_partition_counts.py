"""Partition counts recorded with checkpoints must agree with the inputs' at start-up."""

from __future__ import annotations

import pytest

from samzapy import StreamSystemError, SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import check_partition_counts
from samzapy.checkpoint.ports import Checkpoint

IN = SystemStream("kafka", "page-views")


def checkpoint(counts: dict[SystemStream, int]) -> Checkpoint:
    return Checkpoint({SystemStreamPartition("kafka", "page-views", 0): "5"}, counts)


def test_same_counts_pass() -> None:
    check_partition_counts({TaskName("Partition 0"): checkpoint({IN: 8})}, {IN: 8})


def test_changed_count_names_the_stream_both_counts_and_the_remedy() -> None:
    with pytest.raises(
        StreamSystemError,
        match=r"input kafka.page-views had 8 partitions when task 'Partition 0' last checkpointed "
        r"and has 12 now.*new stream",
    ):
        check_partition_counts({TaskName("Partition 0"): checkpoint({IN: 8})}, {IN: 12})


def test_a_job_without_stores_is_told_how_to_go_on_from_its_checkpoints() -> None:
    before = {TaskName("Partition 0"): checkpoint({IN: 8})}
    with pytest.raises(StreamSystemError, match="new stream") as stateful:
        check_partition_counts(before, {IN: 12})
    assert "samzapy checkpoint show" not in str(stateful.value)
    with pytest.raises(
        StreamSystemError,
        match=r"has 12 now; .*keeps no stores.*new job\.id.*`samzapy checkpoint show JOB \| "
        r"samzapy checkpoint set NEW_JOB --to -`.*oldest",
    ):
        check_partition_counts(before, {IN: 12}, stateless=True)


def test_checkpoints_without_counts_and_new_inputs_pass() -> None:
    old = Checkpoint({SystemStreamPartition("kafka", "page-views", 0): "5"})
    other = SystemStream("kafka", "clicks")
    check_partition_counts({TaskName("Partition 0"): old}, {IN: 3, other: 4})
    check_partition_counts({TaskName("Partition 0"): checkpoint({IN: 3})}, {IN: 3, other: 4})
