"""GroupOffsets: the checkpoints' input offsets copied to the consumer group in the
background; a failed commit is logged once, kept, and retried with the next checkpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from structlog.testing import capture_logs

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.checkpoint.group import GroupOffsets
from samzapy.container.progress import lag_summary
from samzapy.system.ports import GroupOffsetCommitter

A0 = SystemStreamPartition("kafka", "a", 0)
A1 = SystemStreamPartition("kafka", "a", 1)
FILE = SystemStreamPartition("files", "f", 0)


class Committer(GroupOffsetCommitter):
    def __init__(self) -> None:
        self.commits: list[dict[SystemStreamPartition, int]] = []
        self.fail = False
        self.stopped = False

    async def commit(self, offsets: Mapping[SystemStreamPartition, int]) -> None:
        await asyncio.sleep(0)
        if self.fail:
            raise StreamSystemError("coordinator away")
        self.commits.append(dict(offsets))

    async def stop(self) -> None:
        self.stopped = True


def offsets() -> tuple[Committer, GroupOffsets]:
    committer = Committer()
    return committer, GroupOffsets(committer, system="kafka", group_id="samzapy.j.1")


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_offsets_of_the_group_system_go_one_past_the_last_processed() -> None:
    committer, group = offsets()
    group.checkpointed({A0: "41", FILE: "7", A1: "not-a-number"})
    await settle()
    assert committer.commits == [{A0: 42}]


async def test_checkpoints_written_together_go_out_in_few_requests() -> None:
    committer, group = offsets()
    group.checkpointed({A0: "1"})
    group.checkpointed({A1: "5"})
    group.checkpointed({A0: "3"})
    await settle()
    assert committer.commits == [{A0: 4, A1: 6}]


async def test_a_failed_commit_is_logged_once_and_retried_with_the_next_checkpoint() -> None:
    committer, group = offsets()
    committer.fail = True
    with capture_logs() as logs:
        group.checkpointed({A0: "1", A1: "1"})
        await settle()
        group.checkpointed({A0: "2"})
        await settle()
        assert committer.commits == []
        committer.fail = False
        group.checkpointed({A0: "3"})
        await settle()
    # The failed ones are carried, under what the later checkpoint brought.
    assert committer.commits == [{A0: 4, A1: 2}]
    events = [e["event"] for e in logs]
    assert events.count("group_commit_failed") == 1
    assert events.count("group_commit_resumed") == 1


async def test_the_offsets_of_tasks_that_left_are_never_committed_late() -> None:
    committer, group = offsets()
    committer.fail = True  # a rebalance under way when the leaving task checkpoints
    group.checkpointed({A0: "10", A1: "100"})
    await settle()
    group.forget([A1])  # its task moved to another container, which commits from now on
    committer.fail = False
    group.checkpointed({A0: "11"})
    await settle()
    assert committer.commits == [{A0: 12}]


async def test_stop_commits_what_is_pending_then_closes() -> None:
    committer, group = offsets()
    group.checkpointed({A0: "9"})
    await group.stop()
    assert committer.commits == [{A0: 10}]
    assert committer.stopped


async def test_stop_gives_up_on_a_commit_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("samzapy.checkpoint.group.STOP_TIMEOUT_S", 0.05)
    committer, group = offsets()
    gate = asyncio.Event()

    async def hang(offsets: Mapping[SystemStreamPartition, int]) -> None:
        await gate.wait()

    committer.commit = hang  # type: ignore[method-assign]
    group.checkpointed({A0: "9"})
    with capture_logs() as logs:
        await group.stop()
    assert [e["event"] for e in logs] == ["group_commit_failed"]
    assert committer.stopped


class Consumer:
    def __init__(self, high: int | None, start: int | None, fetch: int | None = None) -> None:
        self.high, self.start, self.fetch = high, start, fetch

    def high_watermark(self, ssp: SystemStreamPartition) -> int | None:
        return self.high

    def start_offset(self, ssp: SystemStreamPartition) -> int | None:
        return self.start

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        return self.fetch


def test_a_partition_s_lag_counts_from_the_next_message_to_process() -> None:
    from samzapy.checkpoint.offsets import OffsetTracker
    from samzapy.container.gauges import _lag
    from samzapy.container.inputs import InputQueue

    tracker, queue = OffsetTracker(), InputQueue(A0, 100)
    # Nothing processed: from where the consumer started (upcoming: nothing to catch up on).
    assert _lag(Consumer(500, 500), A0, tracker, queue)() == 0  # type: ignore[arg-type]
    assert _lag(Consumer(500, 0), A0, tracker, queue)() == 500  # type: ignore[arg-type]
    assert _lag(Consumer(None, 0), A0, tracker, queue)() == 0  # type: ignore[arg-type]
    tracker.last_processed = "41"
    assert _lag(Consumer(500, 0), A0, tracker, queue)() == 458  # type: ignore[arg-type]
    # All it was handed processed: what lies before the consumer's fetch offset holds no
    # message (a transaction's commit marker at 42).
    assert _lag(Consumer(43, 0, fetch=43), A0, tracker, queue)() == 0  # type: ignore[arg-type]
    assert _lag(Consumer(50, 0, fetch=43), A0, tracker, queue)() == 7  # type: ignore[arg-type]
    # Messages handed over and not processed yet count from the next one to process.
    queue.queue.append(IncomingMessageEnvelope(A0, "42", None, b"m"))
    assert _lag(Consumer(50, 0, fetch=43), A0, tracker, queue)() == 8  # type: ignore[arg-type]
    queue.queue.clear()
    tracker.invoked("42")
    assert _lag(Consumer(50, 0, fetch=43), A0, tracker, queue)() == 8  # type: ignore[arg-type]


def test_the_progress_lag_sums_partitions_and_names_the_furthest_behind() -> None:
    lags = [(A0, lambda: 3.0), (A1, lambda: 10.0), (FILE, lambda: 0.0)]
    assert lag_summary(lags) == {"lag": 13, "lag_max": 10, "lag_max_partition": str(A1)}
    assert lag_summary([]) == {"lag": 0, "lag_max": 0, "lag_max_partition": None}


class CommitFailedError(Exception):
    """Named as aiokafka's error for a commit the group's rebalance refused."""


@pytest.mark.parametrize(("cause", "level"), [(CommitFailedError(), "info"), (None, "warning")])
async def test_a_commit_a_rebalance_refused_is_logged_at_info(
    cause: Exception | None, level: str
) -> None:
    """A rebalance is the normal course of a deploy: the commit it refused is retried with the
    next checkpoint, as any, but is no warning to page on; any other failure is."""
    committer, group = offsets()

    async def refused(offsets: Mapping[SystemStreamPartition, int]) -> None:
        raise StreamSystemError("cannot commit offsets to consumer group") from cause

    committer.commit = refused  # type: ignore[method-assign]
    with capture_logs() as logs:
        group.checkpointed({A0: "1"})
        await settle()
    [failed] = [e for e in logs if e["event"] == "group_commit_failed"]
    assert failed["log_level"] == level
