"""The framed record format of intermediate streams: encode, decode and their errors."""

from __future__ import annotations

import json

import pytest

from samzapy.control.wire import (
    END_OF_STREAM,
    USER_MESSAGE,
    VERSION,
    WATERMARK,
    EndOfStreamMessage,
    FrameError,
    WatermarkMessage,
    decode,
    decode_origin,
    decode_timed,
    encode_control,
    frame,
    frame_with_floor,
    frame_with_origin,
    origin_prefix,
    with_event_time,
)


def control_record(kind: int, body: object) -> bytes:
    """A control record with an arbitrary JSON body, as a foreign or broken writer could send."""
    return bytes([kind]) + json.dumps(body).encode()


# -- the format itself ---------------------------------------------------------------------------


def test_type_bytes_and_version_are_the_seed_values() -> None:
    assert (USER_MESSAGE, WATERMARK, END_OF_STREAM, VERSION) == (0, 1, 2, 1)


def test_encoded_end_of_stream_has_exact_bytes() -> None:
    record = encode_control(EndOfStreamMessage("Partition 3", 4))

    assert record == b'\x02{"version":1,"taskName":"Partition 3","taskCount":4}'


def test_encoded_watermark_has_exact_bytes() -> None:
    record = encode_control(WatermarkMessage("Partition 0", 2, 1_700_000_000_123))

    assert record == (
        b'\x01{"version":1,"taskName":"Partition 0","taskCount":2,"timestamp":1700000000123}'
    )


def test_framed_user_message_is_type_byte_zero_then_payload() -> None:
    assert frame(b"hello") == b"\x00hello"


# -- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [b"hello", b"", b"\x00\x01\x02\xff", b"{not json"])
def test_user_message_round_trips(payload: bytes) -> None:
    kind, body = decode(frame(payload))

    assert kind == USER_MESSAGE
    assert body == payload
    assert type(body) is bytes


def test_end_of_stream_round_trips() -> None:
    message = EndOfStreamMessage("Partition 7", 12)

    assert decode(encode_control(message)) == (END_OF_STREAM, message)


@pytest.mark.parametrize("timestamp", [0, 1, 1_700_000_000_123, -5, 2**63 - 1])
def test_watermark_round_trips(timestamp: int) -> None:
    message = WatermarkMessage("Partition 1", 3, timestamp)

    assert decode(encode_control(message)) == (WATERMARK, message)


def test_an_idle_watermark_round_trips_with_its_flag_and_a_plain_one_has_none() -> None:
    message = WatermarkMessage("Partition 1", 3, 42, idle=True)

    assert encode_control(message).endswith(b',"timestamp":42,"idle":true}')
    assert decode(encode_control(message)) == (WATERMARK, message)
    assert b"idle" not in encode_control(WatermarkMessage("Partition 1", 3, 42))


def test_an_idle_flag_that_is_not_a_boolean_is_rejected() -> None:
    body = {"version": 1, "taskName": "t", "taskCount": 1, "timestamp": 5, "idle": 1}
    with pytest.raises(FrameError, match=r"^the watermark message's idle must be true or false"):
        decode(control_record(WATERMARK, body))


def test_task_name_with_non_ascii_characters_round_trips() -> None:
    message = EndOfStreamMessage('tâche "ü" 1', 1)

    assert decode(encode_control(message)) == (END_OF_STREAM, message)


@pytest.mark.parametrize("wrap", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_bytearray_and_memoryview_are_accepted(wrap: type) -> None:
    kind, body = decode(wrap(frame(b"abc")))
    assert (kind, body) == (USER_MESSAGE, b"abc")
    assert type(body) is bytes

    eos = EndOfStreamMessage("Partition 0", 2)
    assert decode(wrap(encode_control(eos))) == (END_OF_STREAM, eos)

    wm = WatermarkMessage("Partition 0", 2, 42)
    assert decode(wrap(encode_control(wm))) == (WATERMARK, wm)


def test_memoryview_slice_decodes_only_its_bytes() -> None:
    buffer = b"junk" + frame(b"abc") + b"more"

    assert decode(memoryview(buffer)[4:8]) == (USER_MESSAGE, b"abc")


def test_end_of_stream_ignores_extra_fields() -> None:
    record = control_record(
        END_OF_STREAM, {"version": 1, "taskName": "t", "taskCount": 1, "timestamp": 5, "x": 1}
    )

    assert decode(record) == (END_OF_STREAM, EndOfStreamMessage("t", 1))


# -- decode errors -------------------------------------------------------------------------------


def test_empty_record_is_rejected() -> None:
    with pytest.raises(FrameError, match=r"^an empty record has no type byte$"):
        decode(b"")


@pytest.mark.parametrize("wrap", [bytearray, memoryview], ids=["bytearray", "memoryview"])
def test_empty_buffer_is_rejected(wrap: type) -> None:
    with pytest.raises(FrameError, match=r"^an empty record has no type byte$"):
        decode(wrap(b""))


@pytest.mark.parametrize(
    ("record", "type_name"), [("\x00abc", "str"), (None, "NoneType"), ([0, 1], "list")]
)
def test_non_bytes_record_is_rejected(record: object, type_name: str) -> None:
    with pytest.raises(FrameError, match=f"^a framed record must be bytes, got {type_name}$"):
        decode(record)  # type: ignore[arg-type]


def test_frame_error_is_a_value_error() -> None:
    assert issubclass(FrameError, ValueError)


@pytest.mark.parametrize("kind", [6, 127, 255])
def test_unknown_type_byte_is_rejected(kind: int) -> None:
    expected = (
        rf"^unknown type byte {kind} \(expected 0 user message, 1 watermark, "
        r"2 end-of-stream, 3 user message with its origin, 4 with its origin and floor or 5 "
        r"with its origin in compact form, each with the flag 128 when an event time "
        r"follows\)$"
    )
    with pytest.raises(FrameError, match=expected):
        decode(bytes([kind]) + b'{"version":1,"taskName":"t","taskCount":1}')


@pytest.mark.parametrize(
    ("kind", "what"), [(END_OF_STREAM, "end-of-stream"), (WATERMARK, "watermark")]
)
@pytest.mark.parametrize("body", [b"", b"{not json", b'{"version":1', b"\x80\x81\x82"])
def test_broken_json_is_rejected(kind: int, what: str, body: bytes) -> None:
    with pytest.raises(FrameError, match=f"^the {what} message is not valid JSON: ") as info:
        decode(bytes([kind]) + body)
    assert isinstance(info.value.__cause__, (json.JSONDecodeError, UnicodeDecodeError))


@pytest.mark.parametrize(
    ("body", "shown"),
    [([1, 2], r"\[1, 2\]"), ("eos", "'eos'"), (7, "7"), (None, "None")],
)
def test_json_that_is_not_an_object_is_rejected(body: object, shown: str) -> None:
    with pytest.raises(
        FrameError, match=f"^the end-of-stream message must be a JSON object, got {shown}$"
    ):
        decode(control_record(END_OF_STREAM, body))


@pytest.mark.parametrize(("version", "shown"), [(2, "2"), (0, "0"), ("1", "'1'"), (None, "None")])
def test_wrong_version_is_rejected(version: object, shown: str) -> None:
    record = control_record(
        WATERMARK, {"version": version, "taskName": "t", "taskCount": 1, "timestamp": 1}
    )
    with pytest.raises(
        FrameError,
        match=f"^the watermark message has version {shown}; this samzapy reads version 1$",
    ):
        decode(record)


def test_missing_version_is_rejected() -> None:
    record = control_record(END_OF_STREAM, {"taskName": "t", "taskCount": 1})
    with pytest.raises(
        FrameError,
        match=r"^the end-of-stream message has version None; this samzapy reads version 1$",
    ):
        decode(record)


def test_boolean_version_is_rejected() -> None:
    record = control_record(END_OF_STREAM, {"version": True, "taskName": "t", "taskCount": 1})
    with pytest.raises(FrameError, match="has version True"):
        decode(record)


@pytest.mark.parametrize(
    "fields",
    [{}, {"taskName": ""}, {"taskName": None}, {"taskName": 3}, {"taskName": ["t"]}],
    ids=["missing", "empty", "null", "int", "list"],
)
def test_missing_or_empty_task_name_is_rejected(fields: dict[str, object]) -> None:
    record = control_record(END_OF_STREAM, {"version": 1, "taskCount": 1, **fields})
    with pytest.raises(
        FrameError, match=r"^the end-of-stream message needs a non-empty string taskName, got "
    ):
        decode(record)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"taskCount": 0},
        {"taskCount": -1},
        {"taskCount": True},
        {"taskCount": "2"},
        {"taskCount": 2.0},
        {"taskCount": None},
    ],
    ids=["missing", "zero", "negative", "bool", "str", "float", "null"],
)
@pytest.mark.parametrize(
    ("kind", "what"), [(END_OF_STREAM, "end-of-stream"), (WATERMARK, "watermark")]
)
def test_bad_task_count_is_rejected(fields: dict[str, object], kind: int, what: str) -> None:
    body = {"version": 1, "taskName": "t", "timestamp": 1, **fields}
    with pytest.raises(
        FrameError, match=f"^the {what} message needs an integer taskCount >= 1, got \\{{"
    ):
        decode(control_record(kind, body))


def test_task_count_error_shows_the_body() -> None:
    record = control_record(END_OF_STREAM, {"version": 1, "taskName": "t", "taskCount": True})
    with pytest.raises(
        FrameError, match=r"got \{'version': 1, 'taskName': 't', 'taskCount': True\}$"
    ):
        decode(record)


@pytest.mark.parametrize(
    "fields",
    [{}, {"timestamp": None}, {"timestamp": "5"}, {"timestamp": 5.0}, {"timestamp": True}],
    ids=["missing", "null", "str", "float", "bool"],
)
def test_watermark_without_integer_timestamp_is_rejected(fields: dict[str, object]) -> None:
    record = control_record(WATERMARK, {"version": 1, "taskName": "t", "taskCount": 1, **fields})
    with pytest.raises(
        FrameError, match=r"^the watermark message needs an integer timestamp, got "
    ):
        decode(record)


def test_deeply_nested_json_is_a_frame_error() -> None:
    with pytest.raises(FrameError, match=r"^the end-of-stream message"):
        decode(bytes([END_OF_STREAM]) + b"[" * 100_000)


# -- event time in the frame ---------------------------------------------------------------------


@pytest.mark.parametrize("event_time", [0, 1_700_000_000_123, -5, 2**63 - 1])
def test_each_user_message_type_carries_its_event_time_after_its_header(event_time: int) -> None:
    prefix = origin_prefix(b"\x01" * 8, 3)
    for record, kind in (
        (frame(b"body"), USER_MESSAGE),
        (frame_with_origin(prefix, 17, 2, b"body"), 3),
        (frame_with_floor(prefix, 17, 2, 9, b"body"), 4),
    ):
        timed = with_event_time(record, event_time)
        assert timed[0] == kind | 0x80
        assert len(timed) == len(record) + 8
        assert decode_timed(timed) == (kind, b"body", event_time)
        assert decode(timed) == (kind, b"body")
        assert decode_timed(record) == (kind, b"body", None)
        if kind != USER_MESSAGE:  # the origin reads the same with the event time in between
            assert decode_origin(timed) == decode_origin(record)


def test_a_timed_header_cut_short_is_a_frame_error() -> None:
    timed = with_event_time(frame(b""), 42)
    expected = "event time of a user message is cut short: 5 bytes, expected at least 9"
    with pytest.raises(FrameError, match=expected):
        decode(timed[:5])


def test_a_type_3_header_is_its_prefix_offset_and_ordinal_and_a_prefix_of_another_size_fails() -> (
    None
):
    prefix = origin_prefix(b"\x01" * 8, 3)
    record = frame_with_origin(prefix, 2**40 + 17, 5, b"body")
    assert record == prefix + (2**40 + 17).to_bytes(8, "big") + (5).to_bytes(4, "big") + b"body"
    origin = decode_origin(record)
    assert (origin.epoch, origin.offset, origin.ordinal) == (3, 2**40 + 17, 5)
    for wrong in (prefix[:-1], prefix + b"\x00"):
        with pytest.raises(ValueError, match="an origin prefix has 13 bytes"):
            frame_with_origin(wrong, 1, 0, b"body")
