"""A cache in front of a table the task has of its own (``CachingTableDescriptor`` over the
descriptor of a table the application also gets): writes made to that table directly, by
``send_to`` it, by a function through ``context.get_table``, or through the table's store
(``context.get_store``), are seen through the cache."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_apps import flat, run

from samzapy import (
    KV,
    CachingTableDescriptor,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    StreamApplicationDescriptor,
)
from samzapy.tables import build_table

KAFKA = KafkaSystemDescriptor("kafka")
EVENTS = KAFKA.get_input_descriptor("events", KVSerde("string", "json"))
OUT = KAFKA.get_output_descriptor("out", KVSerde("string", "json"))


class Lookup:
    def get_message_key(self, message: KV) -> Any:
        return message.key

    def get_record_key(self, record: KV) -> Any:
        return record.key

    def apply(self, message: KV, record: KV | None) -> KV:
        return KV(message.key, None if record is None else record.value)


class PutOnInit:
    """A map that writes to the inner table through its context, on messages of kind "w"."""

    def init(self, context: Any) -> None:
        self.table = context.get_table("profiles")

    def __call__(self, message: KV) -> KV:
        self.table.put(message.key, message.value["v"])
        return message


class PutToStore:
    """A map that writes to the inner table's store (``context.get_store``), one key at a
    time (``put``, ``delete``) or in batches (``put_all``, ``delete_all``)."""

    def __init__(self, batches: bool) -> None:
        self.batches = batches

    def init(self, context: Any) -> None:
        self.store = context.get_store("profiles")

    def __call__(self, message: KV) -> KV:
        key, value = message.key, message.value["v"]
        if self.batches and value is None:
            self.store.delete_all([key])
        elif self.batches:
            self.store.put_all(iter([KV(key, value)]))  # entries read once: a generator
        elif value is None:
            self.store.delete(key)
        else:
            self.store.put(key, value)
        return message


@pytest.mark.parametrize("kind", [InMemoryTableDescriptor, RocksDbTableDescriptor])
@pytest.mark.parametrize("how", ["send_to", "context", "store", "store batches"])
def test_a_cache_in_front_of_a_local_table_sees_the_writes_made_to_that_table(
    kind: type[Any], how: str
) -> None:
    """Each look-up through the cache after a write (a put, another put, a delete) of the
    key straight to the local table finds what the write left, not the entry cached before."""

    def app(d: StreamApplicationDescriptor) -> None:
        local = d.get_table(kind("profiles", KVSerde("string", "json")))
        cached = d.get_table(CachingTableDescriptor("cached", local.descriptor))
        events = d.get_input_stream(EVENTS)
        writes = events.filter(lambda m: m.value["kind"] == "w")
        if how == "send_to":
            writes.map(lambda m: KV(m.key, m.value["v"])).send_to(local)
        elif how == "context":
            writes.map(PutOnInit()).sink(lambda m, c, k: None)
        else:
            writes.map(PutToStore(how == "store batches")).sink(lambda m, c, k: None)
        events.filter(lambda m: m.value["kind"] == "r").join(cached, Lookup()).send_to(
            d.get_output_stream(OUT)
        )

    messages = [
        KV("ann", {"kind": "w", "v": 1}),
        KV("ann", {"kind": "r"}),
        KV("ann", {"kind": "w", "v": 2}),
        KV("ann", {"kind": "r"}),
        KV("ann", {"kind": "w", "v": None}),
        KV("ann", {"kind": "r"}),
    ]
    result = run(app, [(EVENTS, messages)], {OUT: 1})
    assert [kv.value for kv in flat(result.keyed_outputs(OUT))] == [1, 2, None]


class Service:
    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}

    async def get_async(self, key: Any) -> Any:
        return self.data.get(key)

    async def put_async(self, key: Any, value: Any) -> None:
        self.data[key] = value

    async def delete_async(self, key: Any) -> None:
        self.data.pop(key, None)


async def test_a_cache_in_front_of_a_remote_table_sees_the_writes_made_to_that_table() -> None:
    service = Service()
    remote = RemoteTableDescriptor("profiles").with_read_function(service)
    remote.with_write_function(service)
    inner = build_table(remote, get_store=lambda name: None, copy_fn=lambda fn: fn)
    cached = build_table(
        CachingTableDescriptor("cached", remote),
        get_store=lambda name: None,
        copy_fn=copy.deepcopy,
        inner=inner,
    )
    await inner.open("context")
    await cached.open("context")
    await inner.put_async("ann", 1)
    assert await cached.get_async("ann") == 1
    await inner.put_async("ann", 2)
    assert await cached.get_async("ann") == 2
    await inner.put_all_async([("ann", 3), ("bob", 4)])
    assert await cached.get_all_async(["ann", "bob"]) == {"ann": 3, "bob": 4}
    await inner.delete_async("ann")
    await inner.delete_all_async(["bob"])
    assert await cached.get_all_async(["ann", "bob"]) == {}


class Recorder:
    """A remote table's read function that writes what it reads into the local table
    "profiles" (a mirror), through the table or the store ``init(context)`` gave it."""

    def __init__(self, how: str) -> None:
        self.how = how

    def init(self, context: Any) -> None:
        if self.how == "table":
            self.mirror = context.get_table("profiles")
        else:
            self.mirror = context.get_store("profiles")

    async def get_async(self, key: Any) -> Any:
        self.mirror.put(key, 2)
        return 2


@pytest.mark.parametrize("how", ["table", "store"])
@pytest.mark.parametrize("remote_first", [True, False])
def test_a_remote_table_s_function_writing_a_cached_local_table_is_seen_through_the_cache(
    how: str, remote_first: bool
) -> None:
    """A remote table's functions get the tables the application's functions get: the
    writes they make to a local table drop the entries of a cache in front of it, whichever
    table the application described first."""

    def app(d: StreamApplicationDescriptor) -> None:
        service = RemoteTableDescriptor("service").with_read_function(Recorder(how))
        if remote_first:
            remote = d.get_table(service)
        local = d.get_table(InMemoryTableDescriptor("profiles", KVSerde("string", "json")))
        cached = d.get_table(CachingTableDescriptor("cached", local.descriptor))
        if not remote_first:
            remote = d.get_table(service)
        events = d.get_input_stream(EVENTS)
        events.filter(lambda m: m.value["kind"] == "w").map(
            lambda m: KV(m.key, m.value["v"])
        ).send_to(local)
        events.filter(lambda m: m.value["kind"] == "s").join(remote, Lookup()).sink(
            lambda m, c, k: None
        )
        events.filter(lambda m: m.value["kind"] == "r").join(cached, Lookup()).send_to(
            d.get_output_stream(OUT)
        )

    messages = [
        KV("ann", {"kind": "w", "v": 1}),
        KV("ann", {"kind": "r"}),
        KV("ann", {"kind": "s"}),  # the read function writes 2 to "profiles"
        KV("ann", {"kind": "r"}),
    ]
    result = run(app, [(EVENTS, messages)], {OUT: 1})
    assert [kv.value for kv in flat(result.keyed_outputs(OUT))] == [1, 2]
