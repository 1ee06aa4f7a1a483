"""Topic IDs in checkpoints: stored beside the partition counts, and what they decide at a
restart (``recreated``)."""

from __future__ import annotations

import json

import pytest

from samzapy import CheckpointError, SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.codec import decode_checkpoint, encode_checkpoint, recreated
from samzapy.checkpoint.ports import Checkpoint

IN = SystemStream("kafka", "page-views")
SIDE = SystemStream("kafka", "side")
P0 = SystemStreamPartition("kafka", "page-views", 0)


def test_topic_ids_round_trip_beside_the_partition_counts() -> None:
    checkpoint = Checkpoint({P0: "41"}, {IN: 2}, topic_ids={IN: "vKlMTtsYQrWCVh3lu1ap7g"})
    data = encode_checkpoint("Partition 0", checkpoint)
    assert json.loads(data)["extra"]["topic_ids"] == {"kafka.page-views": "vKlMTtsYQrWCVh3lu1ap7g"}
    assert decode_checkpoint(data, "test") == (TaskName("Partition 0"), checkpoint)


def test_a_checkpoint_of_an_older_samzapy_reads_without_topic_ids() -> None:
    document = {
        "version": 1,
        "task": "Partition 0",
        "offsets": [{"system": "kafka", "stream": "page-views", "partition": 0, "offset": "41"}],
        "extra": {"partition_counts": {"kafka.page-views": 2}},
    }
    _, checkpoint = decode_checkpoint(json.dumps(document).encode(), "old")
    assert checkpoint == Checkpoint({P0: "41"}, {IN: 2})
    assert checkpoint.topic_ids == {}
    assert "topic_ids" not in json.loads(encode_checkpoint("Partition 0", checkpoint))["extra"]


@pytest.mark.parametrize("value", [["x"], {"page-views": "x"}, {"kafka.page-views": 7}])
def test_malformed_topic_ids_are_a_corrupt_checkpoint(value: object) -> None:
    document = {"version": 1, "task": "Partition 0", "offsets": [], "extra": {"topic_ids": value}}
    with pytest.raises(CheckpointError, match=r"corrupt checkpoint here: .*topic"):
        decode_checkpoint(json.dumps(document).encode(), "here")


def test_an_input_whose_topic_id_changed_was_recreated() -> None:
    checkpoint = Checkpoint({P0: "41"}, topic_ids={IN: "old", SIDE: "same"})
    assert recreated(checkpoint, {IN: "new", SIDE: "same"}) == {IN: ("old", "new")}


def test_without_an_id_on_either_side_nothing_is_recreated() -> None:
    """A checkpoint of an older samzapy records none; a system (or broker) that gives no IDs
    now, or an input the look-up did not find, is not compared either."""
    assert recreated(Checkpoint({P0: "41"}), {IN: "new"}) == {}
    assert recreated(Checkpoint({P0: "41"}, topic_ids={IN: "old"}), {}) == {}
    assert recreated(Checkpoint({P0: "41"}, topic_ids={IN: "old"}), {SIDE: "x"}) == {}
