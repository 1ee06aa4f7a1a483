"""SerializedKeyValueStore: serde failures name the store, task and key; serde output checked."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import SerdeError, StoreError
from samzapy.api.system import TaskName
from samzapy.storage.inmemory import InMemoryStorageEngine
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import JsonSerde, LongSerde, NoneSerde, StringSerde

WHO = r"store 'counts' \(task 'Partition 1'\)"
KEY_SERDE = r"the key serde \(stores\.counts\.key\.serde\)"
MSG_SERDE = r"the msg serde \(stores\.counts\.msg\.serde\)"


def make(key_serde: Any = None, msg_serde: Any = None) -> SerializedKeyValueStore[Any, Any]:
    engine = InMemoryStorageEngine("counts", TaskName.for_partition(1))
    return SerializedKeyValueStore(engine, key_serde or StringSerde(), msg_serde or JsonSerde())


class ListSerde:
    """Returns a bytearray, which the store accepts as bytes."""

    def to_bytes(self, obj: Any) -> Any:
        return bytearray(",".join(obj).encode())

    def from_bytes(self, data: bytes) -> Any:
        return data.decode().split(",")


class Broken:
    def to_bytes(self, obj: Any) -> bytes:
        raise ValueError("broken on purpose")

    def from_bytes(self, data: bytes) -> Any:
        raise ValueError("broken on purpose")


@pytest.mark.parametrize("operation", ["get", "put", "delete", "get_all", "delete_all", "range"])
def test_key_serde_failure_names_the_key(operation: str) -> None:
    store = make()
    arguments: dict[str, tuple[Any, ...]] = {
        "get": (5,),
        "put": (5, 1),
        "delete": (5,),
        "get_all": (["a", 5],),
        "delete_all": (["a", 5],),
        "range": ("a", 5),
    }
    with pytest.raises(
        StoreError,
        match=rf"^{WHO}: {KEY_SERDE} cannot serialize key 5: string serde expects a str, "
        r"got 5 \(int\)",
    ) as caught:
        getattr(store, operation)(*arguments[operation])
    assert isinstance(caught.value.__cause__, SerdeError)


def test_value_serde_failure_names_the_key_and_value() -> None:
    store = make()
    with pytest.raises(
        StoreError,
        match=rf"^{WHO}: {MSG_SERDE} cannot serialize the value \{{1\}} of key 'a': json serde",
    ):
        store.put("a", {1})
    assert store.get("a") is None


def test_stored_value_that_does_not_decode_names_the_key() -> None:
    store = make()
    store.engine.put(b"a", b"{not json")
    match = rf"^{WHO}: {MSG_SERDE} cannot deserialize the stored value of key 'a': json serde"
    with pytest.raises(StoreError, match=match):
        store.get("a")
    with pytest.raises(StoreError, match=match):
        store.get_all(["a"])
    with pytest.raises(StoreError, match=match), store.all() as iterator:
        next(iterator)


def test_stored_key_that_does_not_decode_names_its_bytes() -> None:
    store = make(key_serde=LongSerde())
    store.engine.put(b"abc", b"1")
    with (
        pytest.raises(
            StoreError,
            match=rf"^{WHO}: {KEY_SERDE} cannot deserialize the key bytes b'abc': long serde "
            "expects exactly 8 bytes",
        ),
        store.all() as iterator,
    ):
        next(iterator)


def test_foreign_serde_exceptions_are_translated() -> None:
    store = make(key_serde=Broken())
    with pytest.raises(
        StoreError, match=rf"^{WHO}: {KEY_SERDE} cannot serialize key 'k': broken on purpose"
    ) as caught:
        store.put("k", 1)
    assert isinstance(caught.value.__cause__, ValueError)
    values = make(msg_serde=Broken())
    with pytest.raises(
        StoreError,
        match=rf"^{WHO}: {MSG_SERDE} cannot serialize the value 1 of key 'k': broken on purpose",
    ):
        values.put("k", 1)


def test_serde_output_must_be_bytes() -> None:
    store = make(key_serde=NoneSerde(), msg_serde=NoneSerde())
    store.put(b"raw", b"bytes pass through")
    assert store.get(b"raw") == b"bytes pass through"
    with pytest.raises(
        StoreError,
        match=rf"^{WHO}: {KEY_SERDE} cannot serialize key 'text': NoneSerde.to_bytes returned "
        "a str, expected bytes",
    ):
        store.put("text", b"v")
    with pytest.raises(StoreError, match=r"NoneSerde.to_bytes returned a int, expected bytes"):
        store.put(b"k", 5)


def test_bytes_like_serde_output_is_accepted() -> None:
    store = make(key_serde=ListSerde(), msg_serde=ListSerde())
    store.put(["a", "b"], ["c"])
    assert store.get(["a", "b"]) == ["c"]
    assert store.engine.get(b"a,b") == b"c"


def test_long_repr_of_a_key_is_cut() -> None:
    store = make()
    with pytest.raises(StoreError, match=r"cannot serialize key \[0, 0, .*\.\.\.: string serde"):
        store.put([0] * 100, 1)
