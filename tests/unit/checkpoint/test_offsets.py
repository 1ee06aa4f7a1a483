"""The offset tracker: the low watermark of contiguous completed invocations, which is all a
checkpoint may record (at-least-once rests on it)."""

from __future__ import annotations

import random

from samzapy.checkpoint.offsets import OffsetTracker


def test_nothing_processed_until_the_first_invocation_completes() -> None:
    tracker = OffsetTracker()
    entry = tracker.invoked("0")
    assert tracker.last_processed is None
    tracker.completed(entry)
    assert tracker.last_processed == "0"
    assert list(tracker.pending()) == []


def test_a_completion_after_a_gap_does_not_move_the_watermark() -> None:
    tracker = OffsetTracker()
    first, second, third = (tracker.invoked(o) for o in ("5", "6", "7"))
    tracker.completed(third)
    tracker.completed(second)
    assert tracker.last_processed is None, "offset 5 is still in flight"
    assert [e.offset for e in tracker.pending() if not e.done] == ["5"]
    tracker.completed(first)
    assert tracker.last_processed == "7"


def test_offsets_need_not_be_contiguous_numbers() -> None:
    # Kafka offsets skip (transaction markers, compaction); the order of invocation counts.
    tracker = OffsetTracker()
    a, b = tracker.invoked("10"), tracker.invoked("14")
    tracker.completed(a)
    assert tracker.last_processed == "10"
    tracker.completed(b)
    assert tracker.last_processed == "14"


def test_a_restart_resumes_from_the_checkpointed_offset() -> None:
    tracker = OffsetTracker("41")
    assert tracker.last_processed == "41"
    entry = tracker.invoked("42")
    assert tracker.last_processed == "41", "in flight is not processed"
    tracker.completed(entry)
    assert tracker.last_processed == "42"


def test_out_of_order_completions_never_cover_an_unfinished_invocation() -> None:
    rng = random.Random(7)
    for _ in range(200):
        tracker = OffsetTracker()
        entries = [tracker.invoked(str(i)) for i in range(20)]
        done: set[int] = set()
        for i in rng.sample(range(20), 20):
            tracker.completed(entries[i])
            done.add(i)
            prefix = 0
            while prefix in done:
                prefix += 1
            expected = None if prefix == 0 else str(prefix - 1)
            assert tracker.last_processed == expected
        assert tracker.last_processed == "19"
