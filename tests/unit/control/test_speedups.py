"""The C fast paths of framed records (samzapy/_speedups.c) give what the Python ones give.

``wire.decode_timed_fast``, ``WriterOrigins.tagger`` and ``ReaderOrigins.admitter`` take their
common case in C where the extension was built and hand every other call to the Python
function or method. Each test runs the same calls through the accelerated callable and through
the Python one, on twin objects in the same state, and compares results, errors and the state
left behind, over the cases the C code decides itself and those it must pass on.
"""

from __future__ import annotations

import collections
import os
import random
import struct
import subprocess
import sys
from typing import Any

import pytest

from samzapy.api.envelope import KV_ACCELERATED
from samzapy.api.system import SystemStreamPartition
from samzapy.control import wire
from samzapy.control.origins import ReaderOrigins, WriterOrigins
from samzapy.control.wire import (
    EVENT_TIME,
    WatermarkMessage,
    decode_origin,
    decode_timed,
    decode_timed_fast,
    encode_control,
    frame,
    frame_with_compact_origin,
    frame_with_floor,
    frame_with_origin,
    origin_prefix,
    source_id,
    with_event_time,
)

SSP = SystemStreamPartition("kafka", "in", 3)
OTHER = SystemStreamPartition("kafka", "in", 4)


def outcome(call: Any, *args: Any) -> tuple[str, Any]:
    """What ``call(*args)`` gives: its result, or its exception's type and message."""
    try:
        return "returned", call(*args)
    except Exception as exc:
        return "raised", (type(exc).__name__, str(exc))


def test_the_fast_paths_are_there_wherever_the_extension_is_built() -> None:
    # An extension built before these paths existed (a stale build) would pass every test
    # below through the Python methods: KV's constructor says whether it was built.
    writer, reader = WriterOrigins("job-1/Partition 3", {SSP: 0}), ReaderOrigins([SSP])
    accelerated = [
        decode_timed_fast is not decode_timed,
        writer.tagger != writer.tag,
        reader.admitter != reader.admit,
    ]
    assert accelerated == [KV_ACCELERATED] * 3


# -- decode_timed ------------------------------------------------------------------------------

PREFIX = origin_prefix(source_id("job-1/Partition 3", "kafka.in.3"), 2)


def records() -> list[Any]:
    body = b'{"user":"u1"}'
    made = [
        frame(body),
        frame(b""),
        frame_with_origin(PREFIX, 12, 0, body),
        frame_with_origin(PREFIX, 2**64 - 1, 2**32 - 1, b""),
        frame_with_floor(PREFIX, 12, 1, 7, body),
        frame_with_compact_origin(PREFIX, 12, 0, body),
        frame_with_compact_origin(PREFIX, 2**64 - 1, 2**24 - 1, b""),
        frame_with_compact_origin(PREFIX, 0, 0, body),
        b"\x05" + bytes(8) + b"\x90" + bytes(9) + b"sizes byte: a 9-byte offset",
        b"\x05" + bytes(8) + b"\x10\x00" + b"a 1-byte offset written with its leading zero",
        b"\x05" + bytes(8) + b"\x00",  # the shortest: no numbers, no body
        b"\x05" + bytes(8) + b"\xff" + bytes(24),  # a 15-byte offset
        b"\x05" + bytes(8) + b"\x8f" + b"\xff" * 14 + b"body",  # the longest numbers
        b"\x85" + bytes(8) + b"\x80" + bytes(8) + bytes(7),  # its event time a byte short
        encode_control(WatermarkMessage("Partition 0", 2, 1000)),
        b"\x01not json",
        b"\x09unknown type",
        b"",
    ]
    for record in list(made[:8]):
        for event_time in (0, 1_700_000_000_000, -(2**62), 2**62, -1):
            made.append(with_event_time(record, event_time))
    for record in list(made):  # each cut short at every length, the empty one included
        made += [record[:n] for n in range(len(record))]
    made += [bytearray(made[0]), memoryview(made[2]), "text", None, 7]
    return made


@pytest.mark.parametrize("record", records(), ids=repr)
def test_decode_timed_fast_decodes_as_decode_timed(record: Any) -> None:
    fast = outcome(lambda: decode_timed_fast(record))
    assert fast == outcome(lambda: decode_timed(record))
    if fast[0] == "returned" and fast[1][0] in (0, 3, 4):  # a user message, not a control
        # (a type-5 record reads as type 3: its origin in another form)
        kind, body, event_time = fast[1]
        assert type(kind) is int and type(body) is bytes
        assert event_time is None or type(event_time) is int


def test_decode_timed_fast_reads_the_event_time_as_a_signed_number() -> None:
    record = with_event_time(frame(b"x"), -5)
    assert record[0] == EVENT_TIME
    assert decode_timed_fast(record) == (wire.USER_MESSAGE, b"x", -5)


# -- WriterOrigins.tag -------------------------------------------------------------------------

OFFSETS = [
    "0",
    "12345",
    "007",
    "18446744073709551615",  # 2**64 - 1: the largest an 8-byte offset holds
    "18446744073709551616",
    "00000000000000000000001",
    "-1",
    "+5",
    " 5",
    "5 ",
    "5_0",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: int() reads it
    "",
    "1e3",
    "abc",
    "END_OF_STREAM",
]
ORDINALS = [0, 1, 2**24 - 1, 2**24, 2**32 - 1, 2**32, -1, True]


def writers() -> tuple[WriterOrigins, WriterOrigins]:
    return tuple(  # type: ignore[return-value]
        WriterOrigins("job-1/Partition 3", {SSP: 2, OTHER: 0}) for _ in range(2)
    )


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("ordinal", ORDINALS)
def test_tagger_tags_as_tag(offset: str, ordinal: int) -> None:
    fast, python = writers()
    for first in (True, False):  # before the partition's prefix is made, and after
        for payload in (b"body", b"", bytearray(b"body")):
            for floor in (None, "3"):
                args = (SSP, offset, ordinal, payload, floor)
                assert outcome(fast.tagger, *args) == outcome(python.tag, *args)
                assert fast.to_json() == python.to_json(), first
    assert fast.tagger(OTHER, "5", 0, b"x") == python.tag(OTHER, "5", 0, b"x")


@pytest.mark.parametrize("epoch", [2**24 - 1, 2**24, 2**32 - 1])
def test_tagger_writes_type_3_for_an_epoch_beyond_3_bytes(epoch: int) -> None:
    fast, python = (WriterOrigins("job-1/Partition 3", {SSP: epoch}) for _ in range(2))
    for _ in range(2):  # before the partition's prefix is made, and after
        record = fast.tagger(SSP, "12", 1, b"x")
        assert record == python.tag(SSP, "12", 1, b"x")
        assert record[0] == (5 if epoch < 2**24 else 3)
        assert decode_origin(record).describe()["epoch"] == epoch


def test_tagger_follows_a_reset_of_the_partition() -> None:
    fast, python = writers()
    for writer in (fast, python):
        writer.unresolved[SSP] = 100  # resumed after offset 100
        writer.tag(SSP, "100", 0, b"x")  # the prefix of epoch 2 made
        writer.observe(SSP, "50")  # the partition went back: epoch 3
    assert fast.tagger(SSP, "50", 0, b"x") == python.tag(SSP, "50", 0, b"x")
    assert decode_origin(fast.tagger(SSP, "50", 0, b"x")).epoch == 3


def test_tagger_passes_an_unhashable_partition_to_tag() -> None:
    fast, python = writers()
    assert outcome(lambda: fast.tagger([], "5", 0, b"x")) == outcome(
        lambda: python.tag([], "5", 0, b"x")  # type: ignore[arg-type]
    )


# -- ReaderOrigins.admit -----------------------------------------------------------------------


def replayed_records(seed: int) -> list[tuple[SystemStreamPartition, bytes]]:
    """Records of several sources and epochs, each source's climbing with replays of earlier
    stretches (a writer restarting), some with several calls in flight (type 4), the others
    of type 3 or 5 (their origin in compact form) mixed, and some with an event time."""
    rng = random.Random(seed)
    prefixes = [origin_prefix(source_id(f"job-{w}/Partition 0", "kafka.in.0"), 0) for w in range(3)]
    out: list[tuple[SystemStreamPartition, bytes]] = []
    offsets = [0, 0, 0]
    for _ in range(400):
        w = rng.randrange(3)
        ssp = SSP if rng.random() < 0.8 else OTHER
        epoch_prefix = prefixes[w][:-4] + struct.pack(">I", rng.choice((0, 0, 0, 1)))
        if rng.random() < 0.1:
            offsets[w] = max(0, offsets[w] - rng.randrange(1, 20))  # a replay
        offsets[w] += rng.randrange(0, 3)
        ordinal = rng.randrange(3)
        if rng.random() < 0.1:
            record = frame_with_floor(
                epoch_prefix, offsets[w], ordinal, max(0, offsets[w] - 2), b"v"
            )
        elif rng.random() < 0.5:  # samzapy before type 5, or a large epoch or ordinal
            record = frame_with_origin(epoch_prefix, offsets[w], ordinal, b"v")
        else:
            record = frame_with_compact_origin(epoch_prefix, offsets[w], ordinal, b"v")
        if rng.random() < 0.2:
            record = with_event_time(record, rng.randrange(-(10**12), 10**12))
        out.append((ssp, record))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_admitter_admits_as_admit(seed: int) -> None:
    fast, python = ReaderOrigins([SSP, OTHER]), ReaderOrigins([SSP, OTHER])
    for ssp, record in replayed_records(seed):
        assert fast.admitter(ssp, record) == python.admit(ssp, record), record.hex()
        assert (fast.to_json(), fast.dropped) == (python.to_json(), python.dropped)


def test_type_5_records_of_every_sizes_byte_and_length_are_read_and_admitted_alike() -> None:
    """Every sizes byte, the record cut at every length: the C paths read no byte past its end
    (the one after it, a bytes object's trailing NUL, would read as a 0 there and admit a
    record cut in its numbers that the Python one refuses)."""
    applied = frame_with_origin(PREFIX, 1, 0, b"v")  # below every record here: C decides
    for kind in (5, 5 | EVENT_TIME):
        for sizes in range(256):
            full = bytes([kind]) + PREFIX[1:9] + bytes([sizes]) + b"\x7f" * 22 + b"body"
            for end in range(len(full) - 3):
                record = full[:end]
                fast, python = ReaderOrigins([SSP]), ReaderOrigins([SSP])
                for reader in (fast, python):
                    reader.admit(SSP, applied)
                assert outcome(fast.admitter, SSP, record) == outcome(python.admit, SSP, record)
                assert (fast.applied, fast.dropped) == (python.applied, python.dropped)
                assert outcome(decode_timed_fast, record) == outcome(decode_timed, record)


def test_admitter_after_a_restore_and_on_records_it_passes_on() -> None:
    saved = ReaderOrigins([SSP])
    first = frame_with_origin(PREFIX, 10, 0, b"v")
    saved.admit(SSP, first)
    fast, python = ReaderOrigins([SSP, OTHER]), ReaderOrigins([SSP, OTHER])
    fast.restore(saved.to_json())
    python.restore(saved.to_json())
    cases: list[tuple[Any, Any]] = [
        (SSP, first),  # a copy of what the checkpoint covers
        (SSP, frame_with_origin(PREFIX, 11, 0, b"v")),
        (SSP, frame_with_compact_origin(PREFIX, 11, 0, b"v")),  # the same position, type 5
        (SSP, frame_with_compact_origin(PREFIX, 11, 1, b"v")),
        (SSP, frame_with_compact_origin(PREFIX, 13, 0, b"v")[:11]),  # cut short
        (SSP, first[:20]),  # cut short
        (SystemStreamPartition("kafka", "in", 9), first),  # a partition the task does not read
        (SSP, bytearray(frame_with_origin(PREFIX, 12, 0, b"v"))),
    ]
    for ssp, record in cases:
        assert outcome(fast.admitter, ssp, record) == outcome(python.admit, ssp, record)
        assert (fast.to_json(), fast.dropped) == (python.to_json(), python.dropped)


# A source whose hash another key of the partition's dict shares, and whose ``__eq__`` replaces
# that dict while admit looks the source up: the dict the C path holds must outlive the call.
# PYTHONMALLOC=debug fills freed memory, so a dict used after it was freed crashes there.
REPLACED_WHILE_LOOKED_UP = """
from samzapy.api.system import SystemStreamPartition
from samzapy.control.origins import ReaderOrigins
from samzapy.control.wire import frame_with_origin, origin_prefix, position, source_id

SSP = SystemStreamPartition("kafka", "in", 3)
record = frame_with_origin(origin_prefix(source_id("w", "kafka.in.3"), 0), 10, 0, b"v")
source = record[1:9]

def outcome(reader, call):
    armed = []

    class Colliding:
        def __hash__(self):
            return hash(source)

        def __eq__(self, other):
            if armed:
                armed.clear()
                reader.applied[SSP] = {}
                [{i: i} for i in range(1000)]
            return False

    reader.applied[SSP][Colliding()] = b"x"
    reader.applied[SSP][source] = position(0, 5, 0)
    armed.append(True)
    return call(SSP, record), reader.applied[SSP], reader.dropped

fast, python = ReaderOrigins([SSP]), ReaderOrigins([SSP])
print(outcome(fast, fast.admitter) == outcome(python, python.admit))
"""


def test_admitter_keeps_the_partitions_dict_while_a_key_of_it_runs_python_code() -> None:
    env = {**os.environ, "PYTHONMALLOC": "debug"}
    out = subprocess.run(
        [sys.executable, "-c", REPLACED_WHILE_LOOKED_UP], env=env, capture_output=True, text=True
    )
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr


# -- Calls of other shapes: keywords, wrong counts, subclasses, huge numbers -------------------


class _Str(str):
    pass


class _Bytes(bytes):
    pass


class _Int(int):
    pass


def tag_calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    good = (SSP, "12", 3, b"body")
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (good, {"floor": None}),
        (good, {"floor": "5"}),
        ((SSP, "12"), {"ordinal": 3, "payload": b"body"}),
        ((), {"ssp": SSP, "offset": "12", "ordinal": 3, "payload": b"body"}),
        ((), {}),
        ((SSP,), {}),
        ((SSP, "12", 3), {}),
        ((*good, None, None), {}),
        ((*good, None), {"floor": None}),
        (good, {"nope": 1}),
    ]
    for at, odd in [
        (1, _Str("12")),
        (1, "\xe9"),  # one byte a character, not ASCII
        (1, "1" * 21),
        (1, None),
        (1, 12),
        (2, _Int(3)),
        (2, 2**64),
        (2, -(2**64)),
        (2, 2**200),
        (2, 3.0),
        (3, _Bytes(b"body")),
        (3, memoryview(b"body")),
        (3, None),
        (0, ("kafka", "in", 3)),  # a plain tuple equal to SSP
        (0, _Str("kafka.in.3")),
        (0, {}),  # unhashable
    ]:
        args = list(good)
        args[at] = odd
        calls.append((tuple(args), {}))
    return calls


@pytest.mark.parametrize(("args", "kwargs"), tag_calls(), ids=repr)
def test_tagger_called_otherwise_does_as_tag(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    fast, python = writers()
    for writer in (fast, python):
        writer.tag(SSP, "1", 0, b"")  # the prefix made: the C path is open
    for _ in range(2):
        assert outcome(lambda: fast.tagger(*args, **kwargs)) == outcome(
            lambda: python.tag(*args, **kwargs)
        )
        assert fast.to_json() == python.to_json()


def admit_calls() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    record = frame_with_origin(PREFIX, 11, 0, b"v")
    compact = frame_with_compact_origin(PREFIX, 11, 0, b"v")
    return [
        ((SSP,), {"record": record}),
        ((), {"ssp": SSP, "record": record}),
        ((), {}),
        ((SSP,), {}),
        ((SSP, record, None), {}),
        ((SSP, _Bytes(record)), {}),
        ((SSP, memoryview(record)), {}),
        ((SSP, with_event_time(record, -1)), {}),
        ((SSP, frame_with_origin(PREFIX, 10, 0, b"v")), {}),  # the one applied: a copy
        ((("kafka", "in", 3), record), {}),  # a plain tuple equal to SSP
        (({}, record), {}),  # unhashable
        ((SSP, "text"), {}),
        # Type 5: the same position as the one applied (a copy), then above it, as the C path
        # takes it and in the forms it hands on.
        ((SSP, frame_with_compact_origin(PREFIX, 10, 0, b"v")), {}),
        ((SSP, compact), {}),
        ((SSP, with_event_time(compact, -1)), {}),
        ((SSP, with_event_time(compact, -1)[:-2]), {}),  # its event time cut short
        ((SSP, _Bytes(compact)), {}),
        ((SSP, memoryview(compact)), {}),
        ((SSP, compact[:9]), {}),
        ((SSP, compact[:9] + b"\xff" + bytes(20)), {}),  # a 15-byte offset
        ((SSP, compact[:9] + b"\x8f" + b"\xff" * 14), {}),  # the longest numbers
    ]


@pytest.mark.parametrize(("args", "kwargs"), admit_calls(), ids=repr)
def test_admitter_called_otherwise_does_as_admit(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    fast, python = ReaderOrigins([SSP]), ReaderOrigins([SSP])
    for reader in (fast, python):
        reader.admit(SSP, frame_with_origin(PREFIX, 10, 0, b"v"))  # a last position: C's case
    for _ in range(2):
        assert outcome(lambda: fast.admitter(*args, **kwargs)) == outcome(
            lambda: python.admit(*args, **kwargs)
        )
        assert (fast.applied, fast.dropped) == (python.applied, python.dropped)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((), {"record": frame(b"x")}),
        ((), {}),
        ((frame(b"x"), None), {}),
        ((_Bytes(frame(b"x")),), {}),
        ((_Bytes(with_event_time(frame(b"x"), 5)),), {}),
    ],
    ids=repr,
)
def test_decode_timed_fast_called_otherwise_does_as_decode_timed(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert outcome(lambda: decode_timed_fast(*args, **kwargs)) == outcome(
        lambda: decode_timed(*args, **kwargs)
    )


def test_a_fast_path_is_made_of_a_plain_dict_only() -> None:
    # A dict subclass's own __getitem__ or __missing__ would be skipped by the C look-ups.
    speedups = pytest.importorskip("samzapy._speedups")
    with pytest.raises(TypeError, match="a dict \\(not a subclass\\) and a callable"):
        speedups.origin_tagger(collections.OrderedDict(), print)
    with pytest.raises(TypeError, match="a dict \\(not a subclass\\) and a callable"):
        speedups.origin_admitter({}, None)
