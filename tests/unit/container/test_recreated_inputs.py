"""Start-up with checkpoints whose inputs were recreated since (``stale_offsets.py``): an input
whose topic ID differs from the checkpoint's has its offsets forgotten, whatever the new topic
holds, its control bookkeeping rewound as for a partition that went back, and the IDs found
are what the checkpoints written from then on record."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from structlog.testing import capture_logs

from samzapy import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.checkpoint.ports import Checkpoint
from samzapy.checkpoint.writer import TaskCheckpointWriter
from samzapy.container.stale_offsets import checked, forget_recreated_inputs
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.reconcile import TaskControl, saved_epochs
from samzapy.system.ports import OffsetBounds, SystemAdmin

IN = SystemStream("kafka", "lines")
OTHER = SystemStream("kafka", "other")
IN0 = SystemStreamPartition("kafka", "lines", 0)
IN1 = SystemStreamPartition("kafka", "lines", 1)
OTHER0 = SystemStreamPartition("kafka", "other", 0)
MID0 = SystemStreamPartition("kafka", "words", 0)
P0, P1 = TaskName("Partition 0"), TaskName("Partition 1")


class Admin(SystemAdmin):
    """Every partition holds 100 messages; ``ids`` are the topics' IDs (None: none given)."""

    def __init__(self, ids: dict[str, str] | None) -> None:
        self.ids = ids
        self.asked: list[list[str]] = []

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        return dict.fromkeys(streams, 2)

    async def create_stream(self, stream: str, partitions: int, **kwargs: object) -> None:
        raise AssertionError("not used")

    async def topic_ids(self, streams: Iterable[str]) -> dict[str, str] | None:
        self.asked.append(list(streams))
        return self.ids

    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        return {ssp: OffsetBounds("0", "100") for ssp in ssps}


def writer_control(epochs: Mapping[SystemStreamPartition, int]) -> dict[str, object]:
    control = TaskControl(carrying=[])
    control.writer = WriterOrigins("w", epochs)
    return control.to_json()


def test_the_offsets_of_a_recreated_input_are_forgotten_and_its_epoch_moves_on() -> None:
    before = {
        P0: Checkpoint(
            {IN0: "41", OTHER0: "7"},
            {IN: 2, OTHER: 1},
            control=writer_control({IN0: 3, OTHER0: 0}),
            topic_ids={IN: "old", OTHER: "kept"},
        ),
        P1: Checkpoint({IN1: "12"}, {IN: 2}, topic_ids={IN: "old"}),
    }
    with capture_logs() as logs:
        after = forget_recreated_inputs(before, {IN: "new", OTHER: "kept"})
    assert after[P0].offsets == {OTHER0: "7"}
    assert saved_epochs(after[P0].control) == {str(IN0): 4, str(OTHER0): 0}
    assert after[P1].offsets == {}
    [event] = [e for e in logs if e["event"] == "input_topic_recreated"]
    assert event["log_level"] == "warning"
    assert (event["stream"], event["checkpointed_topic_id"], event["topic_id"]) == (
        "kafka.lines",
        "old",
        "new",
    )
    assert (event["partitions"], event["tasks"]) == ([0, 1], ["Partition 0", "Partition 1"])
    assert "samzapy checkpoint set --to oldest" in event["action"]


def test_checkpoints_without_ids_or_with_the_same_ids_are_kept_as_they_are() -> None:
    before = {
        P0: Checkpoint({IN0: "41"}, {IN: 2}),  # an older samzapy's
        P1: Checkpoint({IN1: "12"}, {IN: 2}, topic_ids={IN: "same"}),
    }
    with capture_logs() as logs:
        assert forget_recreated_inputs(before, {IN: "same"}) == before
        assert forget_recreated_inputs(before, {}) == before  # no IDs given now
    assert logs == []


async def test_checked_looks_the_ids_up_once_per_system_and_returns_them() -> None:
    admin = Admin({"lines": "new", "other": "o"})
    found = {P0: Checkpoint({IN0: "41"}, {IN: 2}, topic_ids={IN: "old"})}
    checkpoints, ids = await checked(found, {IN: 2, OTHER: 1}, {"kafka": admin})
    assert checkpoints[P0].offsets == {}
    assert ids == {IN: "new", OTHER: "o"}
    assert admin.asked == [["lines", "other"]]


async def test_a_system_without_ids_checks_nothing_and_records_none() -> None:
    found = {P0: Checkpoint({IN0: "41"}, {IN: 2}, topic_ids={IN: "old"})}
    checkpoints, ids = await checked(found, {IN: 2}, {"kafka": Admin(None)})
    assert (checkpoints, ids) == (found, {})


async def test_the_writer_records_the_ids_found_in_every_checkpoint_and_the_claim() -> None:
    manager = InMemoryCheckpointManager(f"recreated-{uuid.uuid4().hex}")
    last = Checkpoint({IN0: "41"}, {IN: 2}, topic_ids={IN: "old"})
    writer = TaskCheckpointWriter(manager, P0, last, topic_ids={IN: "new"})
    await writer.claim()
    assert (await manager.read_last(P0)) == Checkpoint(
        {IN0: "41"}, {IN: 2}, epoch=1, topic_ids={IN: "new"}
    )
    keeping = TaskCheckpointWriter(manager, P1, None)  # samzapy checkpoint set's
    await keeping.write(last)
    assert (await manager.read_last(P1)).topic_ids == {IN: "old"}


def run_writer(writer: WriterOrigins, offsets: Iterable[int]) -> list[bytes]:
    return [writer.tag(IN0, str(o), 0, f"{o}".encode()) for o in offsets]


def test_a_writer_reading_a_recreated_input_sends_records_its_readers_take_as_new() -> None:
    """The writer had read offsets 0 to 4 of the old topic and its reader applied what it
    sent; the new topic holds more (0 to 9). The restart reads it from the start, in the
    next epoch, so the reader applies every record instead of dropping the first five as
    copies of the old ones."""
    first = WriterOrigins.starting("w", [IN0], saved={}, checkpointed={})
    old = run_writer(first, range(5))
    control = TaskControl(carrying=[])
    control.writer = first
    checkpoint = Checkpoint({IN0: "4"}, {IN: 2}, control=control.to_json(), topic_ids={IN: "a"})
    [restarted] = forget_recreated_inputs({P0: checkpoint}, {IN: "b"}).values()
    again = WriterOrigins.starting(
        "w", [IN0], saved=saved_epochs(restarted.control), checkpointed=restarted.offsets
    )
    new = run_writer(again, range(10))
    reader = ReaderOrigins([MID0])
    assert [reader.admit(MID0, r) for r in old] == [True] * 5
    assert [reader.admit(MID0, r) for r in new] == [True] * 10
    assert reader.admit(MID0, old[-1]) is False  # a late copy of the old epoch still is one
