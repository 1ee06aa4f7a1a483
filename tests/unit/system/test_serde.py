"""Built-in serdes and the serde registry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samzapy.api.errors import ConfigError, SerdeError
from samzapy.system.serde import (
    BytesSerde,
    DoubleSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    NoneSerde,
    Serde,
    SerdeRegistry,
    StringSerde,
)


class UpperSerde:
    """A job-defined serde."""

    def to_bytes(self, obj: Any) -> bytes:
        return str(obj).upper().encode()

    def from_bytes(self, data: bytes) -> Any:
        return data.decode().lower()


class NeedsArguments:
    def __init__(self, required: int) -> None:
        self.required = required


class NotASerde:
    pass


@pytest.mark.parametrize(
    ("serde", "value", "data"),
    [
        (StringSerde(), "héllo", "héllo".encode()),
        (StringSerde(), "", b""),
        (
            JsonSerde(),
            {"a": [1, 2.5, None, True], "é": "x"},
            '{"a":[1,2.5,null,true],"é":"x"}'.encode(),
        ),
        (JsonSerde(), "text", b'"text"'),
        (BytesSerde(), b"\x00\xff", b"\x00\xff"),
        (IntegerSerde(), 1, b"\x00\x00\x00\x01"),
        (IntegerSerde(), -1, b"\xff\xff\xff\xff"),
        (IntegerSerde(), 2**31 - 1, b"\x7f\xff\xff\xff"),
        (IntegerSerde(), -(2**31), b"\x80\x00\x00\x00"),
        (LongSerde(), 258, b"\x00\x00\x00\x00\x00\x00\x01\x02"),
        (LongSerde(), -(2**63), b"\x80" + b"\x00" * 7),
        # Samza's DoubleSerde and Kafka's DoubleSerializer: Java's ByteBuffer.putDouble.
        (DoubleSerde(), 1.5, bytes.fromhex("3ff8000000000000")),
        (DoubleSerde(), -0.0, bytes.fromhex("8000000000000000")),
        (DoubleSerde(), float("inf"), bytes.fromhex("7ff0000000000000")),
        (DoubleSerde(), 2.0**-1074, bytes.fromhex("0000000000000001")),
    ],
)
def test_round_trip(serde: Serde, value: Any, data: bytes) -> None:
    assert serde.to_bytes(value) == data
    assert serde.from_bytes(data) == value


def test_none_serde_passes_objects_through() -> None:
    obj = {"not": "bytes"}
    assert NoneSerde().to_bytes(obj) is obj
    assert NoneSerde().from_bytes(obj) is obj


def test_json_reads_str_bytearray_and_memoryview() -> None:
    serde = JsonSerde()
    assert serde.from_bytes('{"k":1}') == {"k": 1}
    assert serde.from_bytes(bytearray(b"[1]")) == [1]
    assert serde.from_bytes(memoryview(b"[2]")) == [2]  # type: ignore[arg-type]


def test_bytes_serde_accepts_bytes_like() -> None:
    serde = BytesSerde()
    assert serde.to_bytes(bytearray(b"ab")) == b"ab"
    assert serde.to_bytes(memoryview(b"cd")) == b"cd"
    assert type(serde.to_bytes(bytearray(b"ab"))) is bytes


def test_json_writes_what_json_dumps_writes_compactly() -> None:
    values: list[Any] = [
        {"a": 1, "b": [1, 2.5, None, True, False], "ü": 'é\u2028"\\\n'},
        {1: "int key", None: "none key", 2.5: "float key"},
        [[[]], {}, "", -0.0, 1e300, 2**70],
        "plain",
        None,
    ]
    for value in values:
        compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        assert JsonSerde().to_bytes(value) == compact.encode()
        assert JsonSerde().from_bytes(compact.encode()) == json.loads(compact)


def test_json_writes_the_same_without_its_c_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    serde = JsonSerde()
    assert serde.to_bytes({"k": [1, "é"]}) == '{"k":[1,"é"]}'.encode()
    with pytest.raises(SerdeError, match=r"not JSON compliant"):
        serde.to_bytes(float("nan"))


def _cycle() -> list[Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return cycle


@pytest.mark.parametrize(
    ("serde", "value", "message"),
    [
        (
            IntegerSerde(),
            "abc",
            r"integer serde expects an int in \[-2\*\*31, 2\*\*31\), got 'abc' \(str\)",
        ),
        (IntegerSerde(), 2**31, r"integer serde expects an int .*got 2147483648 \(int\)"),
        (IntegerSerde(), 1.5, r"integer serde expects an int .*\(float\)"),
        (LongSerde(), 2**63, r"long serde expects an int in \[-2\*\*63, 2\*\*63\)"),
        (StringSerde(), 42, r"string serde expects a str, got 42 \(int\)"),
        (StringSerde(), "\ud800", r"string serde cannot encode"),
        (JsonSerde(), {"x": object()}, r"json serde cannot encode .*not JSON serializable"),
        (JsonSerde(), float("nan"), r"json serde cannot encode nan \(float\)"),
        (JsonSerde(), {"x": [float("-inf")]}, r"json serde cannot encode .*not JSON compliant"),
        (JsonSerde(), _cycle(), r"json serde cannot encode .*refers to itself"),
        (BytesSerde(), "text", r"bytes serde expects bytes, bytearray or memoryview, got 'text'"),
        (DoubleSerde(), "1.5", r"double serde expects a float \(or an int\), got '1.5' \(str\)"),
        (DoubleSerde(), 2**1024, r"double serde expects a float \(or an int\), got \d+"),
    ],
)
def test_to_bytes_rejects_wrong_input(serde: Serde, value: Any, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde.to_bytes(value)


@pytest.mark.parametrize(
    ("serde", "data", "message"),
    [
        (IntegerSerde(), b"\x00\x01", r"integer serde expects exactly 4 bytes, got b'\\x00\\x01'"),
        (LongSerde(), b"\x00" * 4, r"long serde expects exactly 8 bytes"),
        (DoubleSerde(), b"\x00" * 4, r"double serde expects exactly 8 bytes"),
        (IntegerSerde(), "abcd", r"integer serde expects exactly 4 bytes, got 'abcd' \(str\)"),
        (StringSerde(), b"\xff", r"string serde expects UTF-8 bytes"),
        (StringSerde(), "already text", r"string serde expects bytes, got 'already text'"),
        (JsonSerde(), b"{nope", r"json serde cannot decode b'\{nope'"),
        (JsonSerde(), 12, r"json serde expects bytes or str, got 12 \(int\)"),
    ],
)
def test_from_bytes_rejects_wrong_input(serde: Serde, data: Any, message: str) -> None:
    with pytest.raises(SerdeError, match=message):
        serde.from_bytes(data)


def test_long_values_are_shortened_in_messages() -> None:
    with pytest.raises(SerdeError, match=r"got 'xxxxx.*\.\.\. \(str\)") as info:
        IntegerSerde().to_bytes("x" * 500)
    assert len(str(info.value)) < 200


class TestSerdeRegistry:
    def test_builtins_by_name_and_none(self) -> None:
        registry = SerdeRegistry({})
        assert isinstance(registry.get("string"), StringSerde)
        assert isinstance(registry.get("json"), JsonSerde)
        assert isinstance(registry.get("bytes"), BytesSerde)
        assert isinstance(registry.get("integer"), IntegerSerde)
        assert isinstance(registry.get("long"), LongSerde)
        assert isinstance(registry.get("none"), NoneSerde)
        assert isinstance(registry.get(None), NoneSerde)

    def test_the_config_checks_know_every_builtin(self) -> None:
        """``samzapy validate`` accepts (and lists) the names the registry builds."""
        from samzapy.config import schema
        from samzapy.system import serde

        assert set(schema.BUILTIN_SERDES) == set(serde.BUILTIN_SERDES)

    def test_samzas_predefined_names(self) -> None:
        """A Samza job's serde names work as they are: Samza predefines ``byte``,
        ``bytebuffer`` (both bytes as they are on the wire) and ``double`` beside ``string``,
        ``json``, ``integer`` and ``long``."""
        registry = SerdeRegistry({})
        assert isinstance(registry.get("byte"), BytesSerde)
        assert isinstance(registry.get("bytebuffer"), BytesSerde)
        assert isinstance(registry.get("double"), DoubleSerde)
        assert (
            registry.get("double").from_bytes(bytes.fromhex("400921fb54442d18"))
            == 3.141592653589793
        )

    def test_nan_goes_through_the_double_serde(self) -> None:
        data = DoubleSerde().to_bytes(float("nan"))
        assert data == bytes.fromhex("7ff8000000000000")  # Java's canonical NaN
        value = DoubleSerde().from_bytes(data)
        assert value != value

    def test_instances_are_cached(self) -> None:
        registry = SerdeRegistry({})
        assert registry.get("json") is registry.get("json")

    @pytest.mark.parametrize("path", [f"{__name__}:UpperSerde", f"{__name__}.UpperSerde"])
    def test_custom_class(self, path: str) -> None:
        serde = SerdeRegistry({"upper": path}).get("upper")
        assert serde.to_bytes("abc") == b"ABC"
        assert serde.from_bytes(b"ABC") == "abc"

    def test_custom_class_replaces_a_builtin(self) -> None:
        registry = SerdeRegistry({"string": f"{__name__}:UpperSerde"})
        assert registry.get("string").to_bytes("a") == b"A"

    @pytest.mark.parametrize(
        ("custom", "name", "message"),
        [
            ({}, "avro", r"unknown serde 'avro': set serializers\.registry\.avro\.class"),
            (
                {"x": "no_such_module_zz:Serde"},
                "x",
                r"serializers\.registry\.x\.class: cannot import module 'no_such_module_zz",
            ),
            (
                {"x": f"{__name__}:Missing"},
                "x",
                r"serializers\.registry\.x\.class: module '.*' has no attribute 'Missing'",
            ),
            (
                {"x": f"{__name__}:NeedsArguments"},
                "x",
                r"serializers\.registry\.x\.class: creating .* with no arguments failed",
            ),
            (
                {"x": f"{__name__}:NotASerde"},
                "x",
                r"serializers\.registry\.x\.class: .* is not a serde",
            ),
            ({"x": "justaname"}, "x", r"serializers\.registry\.x\.class must be a 'module:Class'"),
        ],
    )
    def test_errors_name_the_key(self, custom: dict[str, str], name: str, message: str) -> None:
        with pytest.raises(ConfigError, match=message) as info:
            SerdeRegistry(custom).get(name)
        assert info.value.key == f"serializers.registry.{name}.class"


@pytest.mark.parametrize(
    "data",
    [
        b'\xef\xbb\xbf{"k":1}',  # UTF-8 with a BOM
        '{"k":1}'.encode("utf-16"),  # UTF-16 with its BOM
        b' {"k":1} ',
        b'{"k":1}\n',
    ],
)
def test_json_reads_what_json_loads_reads_from_bytes(data: bytes) -> None:
    # The UTF-8 fast path falls back to json.loads for anything it cannot read itself.
    assert JsonSerde().from_bytes(data) == json.loads(data) == {"k": 1}


def test_json_refuses_invalid_utf8_and_invalid_json_bytes() -> None:
    for data in (b'{"k":"\xff"}', b'{"k":', b'{"k":1}x', b'{"k":1} {}'):
        with pytest.raises(SerdeError, match=r"json serde cannot decode"):
            JsonSerde().from_bytes(data)


@pytest.mark.parametrize(
    ("java", "serde"),
    [
        ("JsonSerdeFactory", JsonSerde),
        ("StringSerdeFactory", StringSerde),
        ("IntegerSerdeFactory", IntegerSerde),
        ("LongSerdeFactory", LongSerde),
        ("DoubleSerdeFactory", DoubleSerde),
        ("ByteSerdeFactory", BytesSerde),
        ("ByteBufferSerdeFactory", BytesSerde),
    ],
)
def test_samzas_serde_factory_names_register_the_built_in(java: str, serde: type) -> None:
    # A Samza job's serializers.registry.<name>.class lines work unchanged, as its serde
    # names do (they named a module 'org' to import).
    registry = SerdeRegistry({"mine": f"org.apache.samza.serializers.{java}"})
    assert type(registry.get("mine")) is serde


def test_a_samza_serde_without_counterpart_is_named_as_such() -> None:
    registry = SerdeRegistry({"s": "org.apache.samza.serializers.SerializableSerdeFactory"})
    with pytest.raises(ConfigError) as info:
        registry.get("s")
    assert str(info.value) == (
        "serializers.registry.s.class: 'org.apache.samza.serializers.SerializableSerdeFactory' "
        "is a Samza serde samzapy has no counterpart of; samzapy's built-in serdes: "
        "string, json, bytes, integer, long, double, byte, bytebuffer, none; or give a "
        "'module:Class' path of your own"
    )
    assert info.value.key == "serializers.registry.s.class"
