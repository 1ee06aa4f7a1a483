"""Origins: the record format of types 3 and 5, the writer's epochs and the reader's drop rule."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from samzapy.api.system import SystemStreamPartition
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.reconcile import TaskControl, saved_epochs
from samzapy.control.wire import (
    ORIGIN_END,
    USER_MESSAGE,
    USER_MESSAGE_WITH_COMPACT_ORIGIN,
    USER_MESSAGE_WITH_FLOOR,
    USER_MESSAGE_WITH_ORIGIN,
    FrameError,
    Origin,
    compact_position,
    decode,
    decode_origin,
    decode_timed,
    frame_with_compact_origin,
    frame_with_origin,
    origin_prefix,
    position,
    source_id,
    with_event_time,
)

IN0 = SystemStreamPartition("kafka", "lines", 0)
IN1 = SystemStreamPartition("kafka", "lines", 1)
MID0 = SystemStreamPartition("kafka", "words", 0)
MID1 = SystemStreamPartition("kafka", "words", 1)


def origin_of(record: bytes) -> Origin:
    kind, _payload = decode(record)
    assert kind in (USER_MESSAGE_WITH_ORIGIN, USER_MESSAGE_WITH_FLOOR)
    return decode_origin(record)


# -- the record format ---------------------------------------------------------------------------


def test_a_tagged_record_carries_source_position_and_body() -> None:
    writer = WriterOrigins("Partition 1", {IN1: 4})
    record = writer.tag(IN1, "17", 2, b'"word"')
    assert decode(record) == (USER_MESSAGE_WITH_ORIGIN, b'"word"')
    origin = origin_of(record)
    assert origin.describe() == {
        "source": source_id("Partition 1", "kafka.lines.1").hex(),
        "epoch": 4,
        "offset": 17,
        "ordinal": 2,
    }
    assert origin.position == position(4, 17, 2)
    # Compact (type 5): the type byte, the source, a byte of sizes, then 4, 17 and 2 in a
    # byte each, where type 3 gives them 16 bytes.
    assert record[0] == USER_MESSAGE_WITH_COMPACT_ORIGIN
    assert record[9:13] == bytes([1 << 4 | 1 << 2 | 1, 4, 17, 2])
    assert len(record) == 13 + len(b'"word"') < ORIGIN_END + len(b'"word"')


@pytest.mark.parametrize(
    ("epoch", "offset", "ordinal"),
    [(0, 0, 0), (0, 255, 0), (0, 256, 1), (2**24 - 1, 2**64 - 1, 2**24 - 1), (3, 2**40, 70_000)],
)
def test_a_compact_origin_reads_as_the_same_origin_in_type_3(
    epoch: int, offset: int, ordinal: int
) -> None:
    prefix = origin_prefix(source_id("w", "kafka.lines.0"), epoch)
    compact = frame_with_compact_origin(prefix, offset, ordinal, b"body")
    fixed = frame_with_origin(prefix, offset, ordinal, b"body")
    assert compact[0] == USER_MESSAGE_WITH_COMPACT_ORIGIN and len(compact) < len(fixed)
    assert decode(compact) == decode(fixed) == (USER_MESSAGE_WITH_ORIGIN, b"body")
    assert decode_origin(compact) == decode_origin(fixed)
    assert compact_position(compact) == position(epoch, offset, ordinal)
    timed = with_event_time(compact, 1_700_000_000_000)
    assert decode_timed(timed) == (USER_MESSAGE_WITH_ORIGIN, b"body", 1_700_000_000_000)
    assert decode_origin(timed) == decode_origin(fixed)


def test_a_reader_drops_a_type_5_copy_of_a_type_3_record_and_the_reverse() -> None:
    """A writer upgraded mid-stream (type 3 before, type 5 after) replays what it sent."""
    prefix = origin_prefix(source_id("w", "kafka.lines.0"), 0)
    reader = ReaderOrigins([MID0])
    assert reader.admit(MID0, frame_with_origin(prefix, 10, 0, b"v"))
    assert not reader.admit(MID0, frame_with_compact_origin(prefix, 10, 0, b"v"))
    assert reader.admit(MID0, frame_with_compact_origin(prefix, 11, 0, b"v"))
    assert not reader.admit(MID0, frame_with_origin(prefix, 11, 0, b"v"))
    assert reader.admit(MID0, frame_with_origin(prefix, 11, 1, b"v"))
    assert reader.dropped == 2


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (b"\x05" + bytes(8), "cut short: 9 bytes, expected at least 10"),
        (b"\x05" + bytes(8) + b"\x31\x07", "cut short: 11 bytes, expected at least 14"),
        (b"\x05" + bytes(8) + b"\x90" + bytes(12), "gives an offset of 9 bytes"),
        (b"\x85" + bytes(8) + b"\x10\x07" + bytes(7), "event time .* cut short"),
    ],
)
def test_a_compact_origin_cut_short_or_mis_sized_is_a_frame_error(
    record: bytes, error: str
) -> None:
    with pytest.raises(FrameError, match=error):
        decode_timed(record)


def test_a_record_with_its_event_time_is_admitted_and_dropped_as_one_without() -> None:
    writer = WriterOrigins("Partition 1", {IN1: 0})
    reader = ReaderOrigins([MID0])
    first = with_event_time(writer.tag(IN1, "5", 0, b"a"), 1_700_000_000_000)
    floored = with_event_time(writer.tag(IN1, "6", 0, b"b", floor="6"), 1_700_000_000_001)
    assert reader.admit(MID0, first)
    assert not reader.admit(MID0, first)  # a replay's copy
    assert not reader.admit(MID0, writer.tag(IN1, "5", 0, b"a"))  # the same without time
    assert reader.admit(MID0, floored)
    assert not reader.admit(MID0, floored)


def test_positions_compare_as_bytes_in_the_order_of_their_numbers() -> None:
    numbers = [
        (e, o, n) for e in (0, 1, 255, 2**31) for o in (0, 9, 10, 256, 2**62) for n in (0, 1, 300)
    ]
    as_bytes = sorted(numbers, key=lambda t: position(*t))
    assert as_bytes == sorted(numbers)


def test_an_offset_that_is_no_integer_sends_the_record_without_origin() -> None:
    writer = WriterOrigins("t", {IN0: 0})
    assert decode(writer.tag(IN0, "not-a-number", 0, b"x")) == (USER_MESSAGE, b"x")


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (b"\x03", "cut short"),
        (b"\x03" + bytes(23), "cut short"),
        (origin_prefix(bytes(8), 0)[:-1], "cut short"),
        (b"\x04" + bytes(31), "cut short"),
    ],
)
def test_a_cut_or_malformed_origin_is_a_frame_error(record: bytes, problem: str) -> None:
    with pytest.raises(FrameError, match=problem):
        decode(record)


def test_an_empty_body_after_an_origin_is_an_empty_message() -> None:
    record = WriterOrigins("t", {IN0: 0}).tag(IN0, "3", 0, b"")
    assert origin_of(record).message == b""


# -- the writer's epochs -------------------------------------------------------------------------


def test_a_first_start_and_a_restart_before_any_checkpoint_share_epoch_zero() -> None:
    first = WriterOrigins.starting("t", [IN0], saved=None, checkpointed={})
    again = WriterOrigins.starting("t", [IN0], saved=None, checkpointed={})
    assert first.epochs == again.epochs == {IN0: 0}


def test_a_restart_keeps_the_checkpointed_epoch() -> None:
    saved = {"kafka.lines#0": 3}
    assert str(IN0) == "kafka.lines#0"
    writer = WriterOrigins.starting("t", [IN0, IN1], saved=saved, checkpointed={IN0: "41"})
    assert writer.epochs == {IN0: 3, IN1: 0}
    assert origin_of(writer.tag(IN0, "42", 0, b"x")).position == position(3, 42, 0)


def test_a_reset_of_a_checkpointed_partition_moves_to_the_next_epoch_every_time_the_same() -> None:
    saved = {str(IN0): 3, str(IN1): 7}
    for _ in range(2):  # a crash before the first checkpoint derives the same epoch again
        writer = WriterOrigins.starting(
            "t", [IN0, IN1], saved=saved, checkpointed={IN0: "41"}, reset=[IN0, IN1]
        )
        # IN1 had no checkpointed offset: the earlier run read it from its default too.
        assert writer.epochs == {IN0: 4, IN1: 7}


def test_a_partition_that_went_back_past_its_checkpoint_moves_to_the_next_epoch() -> None:
    # A recreated topic: the consumer found the checkpointed offset gone and read from 0.
    writer = WriterOrigins.starting("t", [IN0], saved={str(IN0): 2}, checkpointed={IN0: "500"})
    writer.observe(IN0, "0")
    assert origin_of(writer.tag(IN0, "0", 0, b"x")).position == position(3, 0, 0)
    writer.observe(IN0, "1")
    assert origin_of(writer.tag(IN0, "1", 0, b"x")).position == position(3, 1, 0)
    assert writer.to_json() == {str(IN0): 3}


def test_the_reset_is_settled_at_the_first_message_read_not_the_first_sent() -> None:
    """The recreated topic's first messages send nothing to a framed stream, and a commit
    records their offsets: the epoch it records is already the new one."""
    writer = WriterOrigins.starting("t", [IN0], saved={str(IN0): 2}, checkpointed={IN0: "500"})
    writer.observe(IN0, "0")  # filtered: no send
    saved = writer.to_json()
    assert saved == {str(IN0): 3}
    after = WriterOrigins.starting("t", [IN0], saved=saved, checkpointed={IN0: "9"})
    after.observe(IN0, "10")
    assert origin_of(after.tag(IN0, "10", 0, b"x")).position == position(3, 10, 0)


def test_a_partition_read_on_past_its_checkpoint_keeps_its_epoch() -> None:
    writer = WriterOrigins.starting("t", [IN0], saved={str(IN0): 2}, checkpointed={IN0: "500"})
    writer.observe(IN0, "501")
    assert origin_of(writer.tag(IN0, "501", 0, b"x")).position == position(2, 501, 0)
    assert not writer.unresolved


def test_epochs_of_partitions_not_read_now_are_carried_on() -> None:
    """An epoch never goes back: a run that does not read a partition keeps its epoch."""
    writer = WriterOrigins.starting("t", [IN1], saved={str(IN0): 4, str(IN1): 1}, checkpointed={})
    assert writer.to_json() == {str(IN0): 4, str(IN1): 1}


def test_epochs_travel_in_the_control_checkpoint() -> None:
    control = TaskControl(carrying=[])
    control.writer = WriterOrigins("t", {IN0: 5})
    assert control.checkpointed
    assert saved_epochs(control.to_json()) == {str(IN0): 5}
    assert not TaskControl(carrying=[]).checkpointed


# -- the reader's drop rule ----------------------------------------------------------------------


def run_writer(
    writer: WriterOrigins,
    inputs: dict[SystemStreamPartition, list[int]],
    order: list[SystemStreamPartition],
    fan_out: int = 3,
) -> dict[SystemStreamPartition, list[bytes]]:
    """What ``writer`` sends to two partitions when it reads ``inputs`` in ``order`` (input
    partition by input partition, each in offset order): ``fan_out`` records a message, to
    the partitions picked by the record's content (a function of the message)."""
    out: dict[SystemStreamPartition, list[bytes]] = {MID0: [], MID1: []}
    cursors = {ssp: iter(offsets) for ssp, offsets in inputs.items()}
    for ssp in order:
        offset = next(cursors[ssp])
        for ordinal in range(fan_out):
            body = f"{ssp.partition}:{offset}:{ordinal}".encode()
            target = MID0 if (offset + ordinal) % 2 == 0 else MID1
            out[target].append(writer.tag(ssp, str(offset), ordinal, body))
    return out


def applied(reader: ReaderOrigins, ssp: SystemStreamPartition, records: list[bytes]) -> list[bytes]:
    taken = []
    for record in records:
        if reader.admit(ssp, record):
            taken.append(origin_of(record).message)
    return taken


def interleaving(
    counts: dict[SystemStreamPartition, int], seed: int
) -> list[SystemStreamPartition]:
    order = [ssp for ssp, n in counts.items() for _ in range(n)]
    random.Random(seed).shuffle(order)
    return order


@pytest.mark.parametrize("seed", range(5))
def test_a_replay_from_the_checkpoint_is_applied_once_however_inputs_interleave(seed: int) -> None:
    """The writer reads two inputs interleaved, crashes after 30 messages having sent them,
    and restarts from a checkpoint taken halfway: its replay interleaves the inputs
    differently. Each reader partition applies every record once."""
    first_order = interleaving({IN0: 20, IN1: 20}, seed)[:30]
    first = run_writer(
        WriterOrigins("w", {IN0: 0, IN1: 0}),
        {IN0: list(range(20)), IN1: list(range(20))},
        first_order,
    )
    done = {ssp: first_order.count(ssp) // 2 for ssp in (IN0, IN1)}  # checkpointed counts
    replay = run_writer(
        WriterOrigins.starting(
            "w", [IN0, IN1], saved={}, checkpointed={s: str(n - 1) for s, n in done.items()}
        ),
        {ssp: list(range(n, 20)) for ssp, n in done.items()},
        interleaving({ssp: 20 - n for ssp, n in done.items()}, seed + 100),
    )
    for mid in (MID0, MID1):
        reader = ReaderOrigins([mid])
        taken = applied(reader, mid, first[mid] + replay[mid])
        expected = {origin_of(r).message for r in first[mid] + replay[mid]}
        assert sorted(taken) == sorted(expected)  # each once, none lost
        assert len(taken) == len(set(taken))
        assert reader.dropped > 0


def test_a_reader_restarted_from_its_checkpoint_drops_what_it_had_applied_by_then() -> None:
    writer = WriterOrigins("w", {IN0: 0})
    records = run_writer(writer, {IN0: list(range(10))}, [IN0] * 10, fan_out=1)[MID0]
    reader = ReaderOrigins([MID0])
    applied(reader, MID0, records[:3])
    restored = ReaderOrigins([MID0])
    restored.restore(reader.to_json())
    # The reader replays from its own checkpoint (after record 3), then the writer's replay
    # of everything follows.
    assert applied(restored, MID0, records[3:] + records) == [
        origin_of(r).message for r in records[3:]
    ]


def test_a_writer_reset_is_taken_as_new_records() -> None:
    first = WriterOrigins.starting("w", [IN0], saved={}, checkpointed={})
    records = run_writer(first, {IN0: list(range(5))}, [IN0] * 5, fan_out=1)[MID0]
    again = WriterOrigins.starting(
        "w", [IN0], saved=first.to_json(), checkpointed={IN0: "4"}, reset=[IN0]
    )
    reprocessed = run_writer(again, {IN0: list(range(5))}, [IN0] * 5, fan_out=1)[MID0]
    reader = ReaderOrigins([MID0])
    assert len(applied(reader, MID0, records + reprocessed)) == len(records) + len(reprocessed)
    # A zombie of the old epoch, late, is a copy.
    assert applied(reader, MID0, records[-1:]) == []


def test_a_writer_that_moved_containers_is_the_same_source() -> None:
    """The task's name, not the container, is the source: a task moved to another container
    resumes from its checkpoint and its replay is dropped."""
    before = WriterOrigins.starting("Partition 3", [IN0], saved={}, checkpointed={})
    records = run_writer(before, {IN0: list(range(6))}, [IN0] * 6, fan_out=2)[MID0]
    after = WriterOrigins.starting(
        "Partition 3", [IN0], saved=before.to_json(), checkpointed={IN0: "2"}
    )
    replay = run_writer(after, {IN0: list(range(3, 6))}, [IN0] * 3, fan_out=2)[MID0]
    reader = ReaderOrigins([MID0])
    assert len(applied(reader, MID0, records + replay)) == len(records)
    assert reader.dropped == len(replay)


def test_writers_and_partitions_are_kept_apart() -> None:
    a = WriterOrigins("a", {IN0: 0})
    b = WriterOrigins("b", {IN0: 0})
    reader = ReaderOrigins([MID0, MID1])
    ra = a.tag(IN0, "5", 0, b"a5")
    rb = b.tag(IN0, "1", 0, b"b1")
    assert applied(reader, MID0, [ra, rb]) == [b"a5", b"b1"]
    # The same writer's lower position on another partition is not a copy.
    assert applied(reader, MID1, [a.tag(IN0, "1", 0, b"a1")]) == [b"a1"]


@pytest.mark.parametrize("seed", range(20))
def test_the_reader_admits_what_a_model_of_highest_positions_admits(seed: int) -> None:
    """Brute force against the drop rule's model, per (reader partition, source): a record
    is new when its position is above the highest applied. Runs of one source on a
    partition, switches of partition and source, copies, positions going back, new epochs,
    event-time flags and restarts from the reader's checkpoint, at random."""
    rng = random.Random(seed)
    writers = {name: WriterOrigins(name, {IN0: 0, IN1: 0}) for name in ("a", "b", "c")}
    highest: dict[tuple[SystemStreamPartition, bytes], bytes] = {}
    reader = ReaderOrigins([MID0, MID1])
    mid, name, ssp, offset = MID0, "a", IN0, 0
    for step in range(3000):
        if rng.random() < 0.1:
            mid = rng.choice([MID0, MID1])
        if rng.random() < 0.1:
            name, ssp = rng.choice(list(writers)), rng.choice([IN0, IN1])
        if rng.random() < 0.01:  # the writer reset: its next epoch
            epoch = writers[name].epochs[IN0] + 1
            writers[name] = WriterOrigins(name, {IN0: epoch, IN1: epoch})
        offset = max(0, offset + rng.choice([1, 1, 1, 0, -1, -5]))
        record = writers[name].tag(ssp, str(offset), rng.choice([0, 0, 1]), b"m%d" % step)
        if rng.random() < 0.2:
            record = with_event_time(record, step)
        origin = origin_of(record)
        key = (mid, origin.source)
        at = position(origin.epoch, origin.offset, origin.ordinal)
        expected = key not in highest or at > highest[key]
        if expected:
            highest[key] = at
        assert reader.admit(mid, record) is expected, (step, origin)
        if rng.random() < 0.005:  # a restart from the reader's checkpoint
            saved = reader.to_json()
            reader = ReaderOrigins([MID0, MID1])
            reader.restore(saved)


def test_bookkeeping_grows_with_sources_not_messages() -> None:
    writer = WriterOrigins("w", {IN0: 0, IN1: 0})
    reader = ReaderOrigins([MID0])
    for offset, ssp in itertools.product(range(1000), (IN0, IN1)):
        reader.admit(MID0, writer.tag(ssp, str(offset), 0, b"x"))
    assert len(reader.applied[MID0]) == 2
    assert reader.to_json() == {
        str(MID0): {
            source_id("w", "kafka.lines.0").hex(): [0, 999, 0],
            source_id("w", "kafka.lines.1").hex(): [0, 999, 0],
        }
    }


# -- a writer with several calls in flight (type 4) ----------------------------------------------


def async_run(
    writer: WriterOrigins,
    offsets: list[int],
    rng: random.Random,
    *,
    window: int = 4,
    fan_out: int = 3,
    crash_after: int | None = None,
) -> tuple[dict[SystemStreamPartition, list[tuple[int, bytes]]], int, int]:
    """What an async writer with ``window`` calls in flight sends when its calls make their
    sends in a random interleaving (each its own in order), stopping after ``crash_after``
    sends: each partition's ``(send number, record)``s; the offset a checkpoint taken at the
    stop could record (the last of the completed prefix), and the sends before it."""
    out: dict[SystemStreamPartition, list[tuple[int, bytes]]] = {MID0: [], MID1: []}
    waiting = list(offsets)
    in_flight: list[list[int]] = []  # [offset, sends made]
    completed: dict[int, int] = {}  # offset -> the send that completed it
    sent = 0
    while waiting or in_flight:
        while waiting and len(in_flight) < window:
            in_flight.append([waiting.pop(0), 0])
        if crash_after is not None and sent >= crash_after:
            break
        call = rng.choice(in_flight)
        offset, ordinal = call
        floor = str(min(c[0] for c in in_flight))
        body = f"{offset}:{ordinal}".encode()
        target = MID0 if (offset * 7 + ordinal) % 3 else MID1
        out[target].append((sent, writer.tag(IN0, str(offset), ordinal, body, floor)))
        sent += 1
        call[1] += 1
        if call[1] == fan_out:
            in_flight.remove(call)
            completed[offset] = sent
    done = offsets[0] - 1
    while done + 1 in completed:
        done += 1
    return out, done, max((completed[o] for o in offsets if o <= done), default=0)


def merged(a: list[bytes], b: list[bytes], rng: random.Random) -> list[bytes]:
    """A random merge of two writers' records on one partition, each in its own order."""
    a, b, out = list(a), list(b), []
    while a or b:
        source = a if (a and (not b or rng.random() < 0.5)) else b
        out.append(source.pop(0))
    return out


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("zombie", [False, True], ids=["restart", "zombie"])
def test_a_replay_of_a_writer_with_calls_in_flight_is_applied_once(seed: int, zombie: bool) -> None:
    """The writer crashes part-way with calls in flight, some of whose sends were made; the
    new run replays from its checkpoint with its calls interleaved differently. With
    ``zombie`` the old run goes on writing meanwhile (same epoch) and finishes: what it sent
    after the checkpoint mixes with the new run's records. Every record is applied exactly
    once, none is lost."""
    rng = random.Random(seed)
    offsets = list(range(40))
    crash = rng.randint(5, 90)
    old, done, checkpointed_at = async_run(
        WriterOrigins("w", {IN0: 0}), offsets, random.Random(seed * 7), crash_after=crash
    )
    if zombie:  # the old run goes on (the same interleaving) and finishes, same epoch
        old, _, _ = async_run(WriterOrigins("w", {IN0: 0}), offsets, random.Random(seed * 7))
    checkpointed = {IN0: str(done)} if done >= 0 else {}
    new, _, _ = async_run(
        WriterOrigins.starting("w", [IN0], saved={}, checkpointed=checkpointed),
        offsets[done + 1 :],
        rng,
    )
    for mid in (MID0, MID1):
        # Everything sent before the checkpoint comes first; what the old run sent after it
        # may mix with the new run's records.
        before = [r for n, r in old[mid] if n < checkpointed_at]
        after = [r for n, r in old[mid] if n >= checkpointed_at]
        replay = [r for _, r in new[mid]]
        records = before + (merged(after, replay, rng) if zombie else after + replay)
        reader = ReaderOrigins([mid])
        taken = applied(reader, mid, records)
        assert len(taken) == len(set(taken))
        assert set(taken) == {origin_of(r).message for r in records}
        # The bookkeeping stays small: a few windows of positions, not every message.
        state = reader.to_json()[str(mid)][source_id("w", "kafka.lines.0").hex()]
        assert len(state["seen"]) <= 3 * 4 * 3


def test_an_unordered_state_survives_the_checkpoint() -> None:
    writer = WriterOrigins("w", {IN0: 0})
    records = [
        writer.tag(IN0, "5", 0, b"5:0", "4"),
        writer.tag(IN0, "4", 0, b"4:0", "4"),
        writer.tag(IN0, "6", 0, b"6:0", "4"),
    ]
    reader = ReaderOrigins([MID0])
    assert applied(reader, MID0, records) == [b"5:0", b"4:0", b"6:0"]
    restored = ReaderOrigins([MID0])
    restored.restore(json.loads(json.dumps(reader.to_json())))
    late = writer.tag(IN0, "4", 1, b"4:1", "4")  # sent after 6:0 by a call still in flight
    assert applied(restored, MID0, [*records, late]) == [b"4:1"]


def test_a_writer_moving_to_one_call_in_flight_keeps_what_it_applied() -> None:
    async_writer = WriterOrigins("w", {IN0: 0})
    reader = ReaderOrigins([MID0])
    first = [async_writer.tag(IN0, "3", 0, b"3:0", "2"), async_writer.tag(IN0, "2", 0, b"2:0", "2")]
    assert applied(reader, MID0, first) == [b"3:0", b"2:0"]
    # Restarted with concurrency 1 from a checkpoint at 1: 2 and 3 again, then 4.
    sync_writer = WriterOrigins.starting("w", [IN0], saved={}, checkpointed={IN0: "1"})
    again = [sync_writer.tag(IN0, str(o), 0, f"{o}:0".encode()) for o in (2, 3, 4)]
    assert applied(reader, MID0, again) == [b"4:0"]
    assert reader.applied[MID0][source_id("w", "kafka.lines.0")] == position(0, 4, 0)
