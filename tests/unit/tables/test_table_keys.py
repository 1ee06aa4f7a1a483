"""Key identity in caches, remote tables and send_to: 1, True and 1.0 are different keys
where a local store says so, list and dict keys work where a local table takes them, and a
key with no identity is refused naming the table."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from table_fakes import FakeClock

from samzapy import (
    KV,
    CachingTableDescriptor,
    KafkaSystemDescriptor,
    KeyedValues,
    KVSerde,
    RemoteTableDescriptor,
    StreamApplication,
)
from samzapy.api.errors import TableError
from samzapy.api.system import TaskName
from samzapy.api.tables import InMemoryTableDescriptor
from samzapy.storage.inmemory import InMemoryStorageEngine
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import DoubleSerde, JsonSerde
from samzapy.tables import CachingTable, LocalTable, RemoteTable
from samzapy.testing import TestRunner

LIST_KEY = ["x", 1]
DICT_KEY = {"member": "ann", "day": 3}


def local_table(key_serde: Any = None) -> LocalTable:
    engine = InMemoryStorageEngine("t", TaskName.for_partition(0))
    store = SerializedKeyValueStore(engine, key_serde or JsonSerde(), JsonSerde())
    return LocalTable("t", store)


def cached(table: Any) -> CachingTable:
    inner = InMemoryTableDescriptor("t", KVSerde("json", "json"))
    descriptor = CachingTableDescriptor("cached", inner)
    cache = CachingTable(descriptor, table, clock=FakeClock(), owns_table=False)
    table.caches.append(cache)
    return cache


class JsonService:
    """A remote key-value service that keys its data by the key's JSON text (so 1, True and
    1.0 are three keys, and list and dict keys are keys); ``bulk`` adds get_all_async (it
    answers with (key, value) pairs: a list key cannot be a dict key) and put_all_async."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.calls: list[tuple[str, Any]] = []

    async def get_async(self, key: Any) -> Any:
        self.calls.append(("get", key))
        return self.data.get(json.dumps(key))

    async def put_async(self, key: Any, value: Any) -> None:
        self.calls.append(("put", (key, value)))
        self.data[json.dumps(key)] = value

    async def delete_async(self, key: Any) -> None:
        self.calls.append(("delete", key))
        self.data.pop(json.dumps(key), None)


class BulkJsonService(JsonService):
    async def get_all_async(self, keys: list[Any]) -> list[tuple[Any, Any]]:
        self.calls.append(("get_all", list(keys)))
        return [(key, self.data.get(json.dumps(key))) for key in keys]

    async def put_all_async(self, entries: list[tuple[Any, Any]]) -> None:
        self.calls.append(("put_all", list(entries)))
        for key, value in entries:
            self.data[json.dumps(key)] = value


def remote_table(service: Any, *, batch: int | None = None) -> RemoteTable:
    descriptor = (
        RemoteTableDescriptor("service").with_read_function(service).with_write_function(service)
    )
    if batch is not None:
        descriptor.with_write_batch(batch, timedelta(milliseconds=1))
    return RemoteTable(descriptor, service, service)


# -- 1, True and 1.0 -----------------------------------------------------------------------------


def test_a_cache_over_a_local_json_table_keeps_1_true_and_1_0_apart() -> None:
    local = local_table()
    cache = cached(local)
    cache.put(1, "one")
    cache.put(True, "true")
    cache.put(1.0, "float")
    assert (local.get(1), local.get(True), local.get(1.0)) == ("one", "true", "float")
    assert (cache.get(1), cache.get(True), cache.get(1.0)) == ("one", "true", "float")
    assert cache.metrics.cache_hits == 3
    found = cache.get_all([1, True, 1.0])
    assert [found[1], found[True], found[1.0]] == ["one", "true", "float"]
    assert list(found) == [1, True, 1.0]  # the keys as asked for


def test_a_write_made_to_the_local_table_directly_drops_only_its_own_key() -> None:
    local = local_table()
    cache = cached(local)
    cache.put(1, "one")
    cache.put(True, "true")
    local.put(True, "TRUE")  # as a send_to(local) would
    assert cache.get(1) == "one"
    assert cache.get(True) == "TRUE"


async def test_a_cache_over_a_remote_table_keeps_1_true_and_1_0_apart() -> None:
    service = JsonService()
    remote = remote_table(service)
    cache = CachingTable(CachingTableDescriptor("cached", remote.descriptor), remote)
    await cache.put_async(1, "one")
    await cache.put_async(True, "true")
    await cache.put_async(1.0, "float")
    got = [await cache.get_async(key) for key in (1, True, 1.0)]
    assert got == ["one", "true", "float"]
    assert cache.metrics.cache_hits == 3
    cache.cache.clear()
    found = await cache.get_all_async([1, True, 1.0])
    assert [found[1], found[True], found[1.0]] == ["one", "true", "float"]


async def test_remote_get_all_reads_1_and_true_once_each() -> None:
    service = JsonService()
    service.data = {"1": "one", "true": "true"}
    found = await remote_table(service).get_all_async([1, True, 1])
    assert [call for call in service.calls] == [("get", 1), ("get", True)]
    assert (found[1], found[True], len(found)) == ("one", "true", 2)


def test_a_cache_over_a_local_table_agrees_with_its_serde_on_what_is_one_key() -> None:
    doubles = local_table(DoubleSerde())
    cache = cached(doubles)
    cache.put(1.0, "a")
    cache.put(1, "b")  # the double serde writes 1 as 1.0: the same key
    assert (cache.get(1.0), doubles.get(1.0)) == ("b", "b")
    jsons = cached(local_table())
    jsons.put(("x", 1), "tuple")
    jsons.put(["x", 1], "list")  # json writes both as ["x",1]
    assert jsons.get(("x", 1)) == "list"


# -- list and dict keys --------------------------------------------------------------------------


def test_list_and_dict_keys_go_through_a_cache_over_a_local_table() -> None:
    local = local_table()
    cache = cached(local)
    cache.put(LIST_KEY, "list")
    cache.put(DICT_KEY, "dict")
    assert (cache.get(["x", 1]), cache.get(dict(DICT_KEY))) == ("list", "dict")
    assert cache.metrics.cache_hits == 2
    cache.cache.clear()
    found = cache.get_all([LIST_KEY, DICT_KEY, ["y"]])
    assert not isinstance(found, dict)  # a dict cannot have a list key
    assert (found[LIST_KEY], found[DICT_KEY], len(found)) == ("list", "dict", 2)
    assert list(found) == [LIST_KEY, DICT_KEY]
    assert cache.get_all([LIST_KEY]) == KeyedValues(cache.key_identity, [(["x", 1], "list")])
    cache.delete(LIST_KEY)
    assert (cache.get(LIST_KEY), local.get(LIST_KEY)) == (None, None)


def test_the_mapping_get_all_returns_for_list_keys_is_public() -> None:
    import samzapy

    local = local_table()
    local.put(LIST_KEY, "list")
    found = local.get_all([LIST_KEY])
    assert isinstance(found, samzapy.KeyedValues)
    assert "KeyedValues" in samzapy.__all__
    assert found == KeyedValues(local.key_identity, [(LIST_KEY, "list")])


@pytest.mark.parametrize("service_kind", [JsonService, BulkJsonService])
async def test_list_and_dict_keys_go_through_a_cache_over_a_remote_table(service_kind: Any) -> None:
    service = service_kind()
    remote = remote_table(service)
    cache = CachingTable(CachingTableDescriptor("cached", remote.descriptor), remote)
    await cache.put_async(LIST_KEY, "list")
    await cache.put_all_async([(DICT_KEY, "dict")])
    assert await cache.get_async(["x", 1]) == "list"
    cache.cache.clear()
    reads = await asyncio.gather(cache.get_async(LIST_KEY), cache.get_async(LIST_KEY))
    assert reads == ["list", "list"]
    assert [c for c in service.calls if c[0] == "get"] == [("get", LIST_KEY)]  # one read
    found = await cache.get_all_async([DICT_KEY, LIST_KEY, ["nobody"]])
    assert (found[DICT_KEY], found[LIST_KEY], len(found)) == ("dict", "list", 2)


@pytest.mark.parametrize("service_kind", [JsonService, BulkJsonService])
async def test_remote_get_all_takes_list_and_dict_keys(service_kind: Any) -> None:
    service = service_kind()
    service.data = {json.dumps(LIST_KEY): "list", json.dumps(DICT_KEY): "dict"}
    found = await remote_table(service).get_all_async([LIST_KEY, DICT_KEY, ["x", 1], ["no"]])
    assert (found[LIST_KEY], found[DICT_KEY], len(found)) == ("list", "dict", 2)
    assert list(found) == [LIST_KEY, DICT_KEY]


@pytest.mark.parametrize("service_kind", [JsonService, BulkJsonService])
async def test_batched_writes_take_list_and_dict_keys(service_kind: Any) -> None:
    service = service_kind()
    table = remote_table(service, batch=4)
    await asyncio.gather(
        table.put_async(LIST_KEY, 1),
        table.put_async(DICT_KEY, 2),
        table.put_async(["x", 1], 3),
        table.put_async(True, 4),
    )
    await asyncio.gather(table.delete_async(DICT_KEY), table.delete_async(dict(DICT_KEY)))
    assert service.data == {json.dumps(LIST_KEY): 3, "true": 4}
    if service_kind is JsonService:  # one call per key: the last value of each, once
        puts = [c for c in service.calls if c[0] == "put"]
        assert sorted(puts, key=repr) == sorted(
            [("put", (LIST_KEY, 3)), ("put", (DICT_KEY, 2)), ("put", (True, 4))], key=repr
        )
        assert [c for c in service.calls if c[0] == "delete"] == [("delete", DICT_KEY)]


async def test_a_key_with_no_identity_is_refused_naming_the_table_and_its_type() -> None:
    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

    with pytest.raises(TableError, match=r"table 'service': a key of type Unhashable") as caught:
        await remote_table(JsonService()).get_all_async([Unhashable()])
    assert caught.value.table_id == "service"


@pytest.mark.parametrize("kind", ["local", "cache over local", "remote", "cache over remote"])
async def test_get_all_and_delete_all_refuse_a_string_for_keys(kind: str) -> None:
    # A str is iterable: delete_all("ab") would delete the keys "a" and "b".
    table: Any = local_table() if kind.endswith("local") else remote_table(JsonService())
    if kind == "cache over local":
        table = cached(table)
    elif kind == "cache over remote":
        table = CachingTable(CachingTableDescriptor("cached", table.descriptor), table)
    await table.put_all_async([("a", 1), ("b", 2), ("ab", 3)])
    for keys in ("ab", b"ab", 5):
        with pytest.raises(TableError, match=r"table '\w+': get_all takes keys"):
            await table.get_all_async(keys)
        with pytest.raises(TableError, match=r"table '\w+': delete_all takes keys"):
            await table.delete_all_async(keys)
    found = await table.get_all_async(["a", "b", "ab"])
    assert dict(found) == {"a": 1, "b": 2, "ab": 3}


# -- send_to a remote table ----------------------------------------------------------------------

KAFKA = KafkaSystemDescriptor("kafka")
UPDATES = KAFKA.get_input_descriptor("updates", KVSerde("json", "json"))
LANDED: list[tuple[Any, Any]] = []


class Landing:
    async def get_async(self, key: Any) -> Any:
        return None

    async def put_async(self, key: Any, value: Any) -> None:
        await asyncio.sleep(0.001 * (5 - value))  # earlier writes take longer
        LANDED.append((key, value))

    async def delete_async(self, key: Any) -> None:
        LANDED.append((key, None))


class SendToRemote(StreamApplication):
    def describe(self, app_desc: Any) -> None:
        fn = Landing()
        remote = RemoteTableDescriptor("remote").with_read_function(fn).with_write_function(fn)
        app_desc.get_input_stream(UPDATES).send_to(app_desc.get_table(remote))


def test_send_to_a_remote_table_takes_list_keys_and_keeps_1_and_true_apart() -> None:
    LANDED.clear()
    updates = [KV(["x", 1], 0), KV(1, 1), KV(True, 2), KV(["x", 1], 3), KV({"k": 1}, 4)]
    (
        TestRunner.of(SendToRemote)
        .add_input_stream(UPDATES, updates)
        .add_config("task.max.concurrency", 8)
        .run(timeout=10)
    )
    assert [v for k, v in LANDED if k == ["x", 1]] == [0, 3]  # one key's writes in order
    assert sorted(LANDED, key=lambda kv: kv[1]) == [(kv.key, kv.value) for kv in updates]


def test_a_serde_identity_is_what_the_serde_writes_and_a_structural_one_type_and_value() -> None:
    from enum import StrEnum

    from samzapy.api.keys import KeyIdentity
    from samzapy.system.serde import IntegerSerde

    class Color(StrEnum):
        RED = "red"

    by_json = KeyIdentity.for_serde("t", JsonSerde())
    assert by_json(Color.RED) == by_json("red") == "red"
    assert len({by_json(k) for k in (1, True, 1.0)}) == 3
    assert by_json({"a": 1, "b": 2}) != by_json({"b": 2, "a": 1})  # as json writes them
    assert KeyIdentity.for_serde("t", IntegerSerde())(True) == 1
    structural = KeyIdentity.structural("t")
    assert len({structural(k) for k in (1, True, 1.0, (1,), [1], [True])}) == 6
    assert structural({"k": [1, 2]}) == structural({"k": [1, 2]})
