"""CachingTable over a remote and a local table: hits and misses, ttls on a clock moved by
hand, LRU eviction, write-through and write-around, single flight, stale reads."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from table_fakes import BulkService, FakeClock, Service, memory_store

from samzapy.api.errors import TableError
from samzapy.api.tables import CachingTableDescriptor, RemoteTableDescriptor
from samzapy.tables import CachingTable, LocalTable, RemoteTable


def caching(
    service: Any,
    clock: FakeClock | None = None,
    *,
    size: int = 100,
    read_ttl_s: float | None = None,
    write_ttl_s: float | None = None,
    write_around: bool = False,
) -> CachingTable:
    remote_descriptor = (
        RemoteTableDescriptor("profiles").with_read_function(service).with_write_function(service)
    )
    descriptor = CachingTableDescriptor("cached-profiles", remote_descriptor)
    descriptor.with_cache_size(size)
    if read_ttl_s is not None:
        descriptor.with_read_ttl(timedelta(seconds=read_ttl_s))
    if write_ttl_s is not None:
        descriptor.with_write_ttl(timedelta(seconds=write_ttl_s))
    if write_around:
        descriptor.with_write_around()
    inner = RemoteTable(remote_descriptor, service, service)
    return CachingTable(descriptor, inner, clock=clock or FakeClock())


async def test_a_hit_is_served_from_the_cache() -> None:
    service = Service({"ada": 36})
    table = caching(service)
    assert await table.get_async("ada") == 36
    assert await table.get_async("ada") == 36
    assert service.count("get") == 1
    assert (table.metrics.cache_hits, table.metrics.cache_misses, table.metrics.gets) == (1, 1, 2)


async def test_an_absent_key_is_not_cached() -> None:
    service = Service()
    table = caching(service)
    assert await table.get_async("nobody") is None
    assert await table.get_async("nobody") is None
    assert service.count("get") == 2
    assert table.metrics.cache_misses == 2


async def test_an_entry_expires_its_read_ttl_after_it_was_read() -> None:
    clock = FakeClock()
    service = Service({"ada": 36})
    table = caching(service, clock, read_ttl_s=10)
    await table.get_async("ada")
    clock.advance(9.9)
    await table.get_async("ada")
    assert service.count("get") == 1  # still fresh; a hit does not extend it
    clock.advance(0.1)
    await table.get_async("ada")
    assert service.count("get") == 2


async def test_a_written_entry_lives_the_write_ttl_and_none_is_forever() -> None:
    clock = FakeClock()
    service = Service()
    table = caching(service, clock, read_ttl_s=100, write_ttl_s=1)
    await table.put_async("ada", 36)
    clock.advance(0.5)
    assert await table.get_async("ada") == 36
    assert service.count("get") == 0
    clock.advance(1)
    assert await table.get_async("ada") == 36
    assert service.count("get") == 1  # the write ttl ran out; the read fills for 100 s

    forever = caching(Service({"k": 1}), clock)
    await forever.get_async("k")
    clock.advance(1e9)
    await forever.get_async("k")
    assert forever.metrics.cache_hits == 1


async def test_the_write_ttl_defaults_to_the_read_ttl() -> None:
    clock = FakeClock()
    table = caching(Service(), clock, read_ttl_s=5)
    await table.put_async("ada", 36)
    clock.advance(4)
    await table.get_async("ada")
    clock.advance(1)
    await table.get_async("ada")
    assert (table.metrics.cache_hits, table.metrics.cache_misses) == (1, 1)


async def test_an_entry_is_fresh_until_its_ttl_and_stale_at_exactly_its_ttl() -> None:
    """docs/tables.md: "with_read_ttl(duration) (how long a value read stays fresh; default:
    until evicted), with_write_ttl(duration)". An entry read (ttl 8 s) and one written
    through (ttl 4 s) at 100 s: each is a hit a hair before its ttl ran out and a miss (the
    table read again) at exactly its ttl, as Guava's expireAfterWrite under Samza's cache."""
    clock = FakeClock(100.0)
    service = Service({"ada": 36})
    table = caching(service, clock, read_ttl_s=8, write_ttl_s=4)
    await table.get_async("ada")
    await table.put_async("bob", 2)
    hair = 2.0**-20  # exact in binary: 104 - hair and 104 are both exact
    clock.now = 104.0 - hair
    assert await table.get_async("bob") == 2
    clock.now = 104.0
    assert await table.get_async("bob") == 2
    assert service.calls[-1] == ("get", "bob")  # stale at 4 s: read from the table
    clock.now = 108.0 - hair
    assert await table.get_async("ada") == 36
    assert service.count("get") == 2  # ada's first read and bob's at 104 s
    clock.now = 108.0
    assert await table.get_async("ada") == 36
    assert service.calls[-1] == ("get", "ada")
    assert service.count("get") == 3


async def test_the_cache_holds_a_thousand_entries_by_default() -> None:
    """docs/tables.md: "with_cache_size(entries) (default 1,000)"."""
    service = Service({f"k{i}": i for i in range(1001)})
    remote_descriptor = RemoteTableDescriptor("profiles").with_read_function(service)
    table = CachingTable(
        CachingTableDescriptor("cached-profiles", remote_descriptor),
        RemoteTable(remote_descriptor, service),
    )
    for i in range(1000):
        await table.get_async(f"k{i}")
    assert len(table.cache) == 1000 and "k0" in table.cache
    await table.get_async("k1000")  # one more: the least recently used goes
    assert len(table.cache) == 1000 and "k0" not in table.cache and "k1" in table.cache


async def test_the_least_recently_used_entry_goes_first() -> None:
    service = Service({"a": 1, "b": 2, "c": 3})
    table = caching(service, size=2)
    await table.get_async("a")
    await table.get_async("b")
    await table.get_async("a")  # a is now the most recently used
    await table.get_async("c")  # evicts b
    assert "b" not in table.cache and "a" in table.cache
    await table.get_async("a")
    await table.get_async("b")
    assert [key for name, key in service.calls] == ["a", "b", "c", "b"]


async def test_write_through_updates_the_cache_and_the_table() -> None:
    service = Service({"ada": 36})
    table = caching(service)
    await table.get_async("ada")
    await table.put_async("ada", 37)
    assert service.data["ada"] == 37
    assert await table.get_async("ada") == 37
    assert service.count("get") == 1


async def test_write_around_drops_the_entry_and_reads_the_table_next() -> None:
    service = Service({"ada": 36})
    table = caching(service, write_around=True)
    await table.get_async("ada")
    await table.put_all_async([("ada", 37)])
    assert "ada" not in table.cache
    assert await table.get_async("ada") == 37
    assert service.count("get") == 2


async def test_deletes_drop_the_entry() -> None:
    service = Service({"a": 1, "b": 2, "c": 3})
    table = caching(service)
    await table.get_all_async(["a", "b", "c"])
    await table.delete_async("a")
    await table.put_async("b", None)
    await table.delete_all_async(["c"])
    assert len(table.cache) == 0
    assert service.data == {}
    assert await table.get_async("a") is None


async def test_a_failed_write_drops_the_entry() -> None:
    service = Service({"ada": 36})
    table = caching(service)
    await table.get_async("ada")
    service.failures = 1
    with pytest.raises(TableError):
        await table.put_async("ada", 37)
    assert "ada" not in table.cache


async def test_get_all_serves_hits_and_reads_the_misses_in_one_call() -> None:
    service = BulkService({"a": 1, "b": 2, "c": 3})
    table = caching(service)
    await table.get_async("a")
    assert await table.get_all_async(["a", "b", "c", "d"]) == {"a": 1, "b": 2, "c": 3}
    assert service.calls == [("get", "a"), ("get_all", ["b", "c", "d"])]
    assert (table.metrics.cache_hits, table.metrics.cache_misses) == (1, 4)
    assert await table.get_all_async(["b", "c"]) == {"b": 2, "c": 3}
    assert len(service.calls) == 2


async def test_concurrent_misses_of_a_key_share_one_read() -> None:
    service = BulkService({"ada": 36}, delay=0.01)
    table = caching(service)
    results = await asyncio.gather(
        *(table.get_async("ada") for _ in range(10)), table.get_all_async(["ada"])
    )
    assert results == [36] * 10 + [{"ada": 36}]
    assert service.calls == [("get", "ada")]
    # one read of the table (a miss); the ten that shared it cost no call (hits)
    assert (table.metrics.cache_misses, table.metrics.cache_hits) == (1, 10)
    assert await table.get_async("ada") == 36
    assert table.metrics.cache_hits == 11


async def test_a_cancelled_reader_does_not_cancel_the_shared_read() -> None:
    service = Service({"ada": 36}, delay=0.01)
    table = caching(service)
    first = asyncio.ensure_future(table.get_async("ada"))
    second = asyncio.ensure_future(table.get_async("ada"))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == 36
    assert first.cancelled()
    assert service.count("get") == 1


async def test_a_shared_read_that_fails_fails_every_reader_and_is_not_cached() -> None:
    service = Service({"ada": 36}, delay=0.01, failures=1)
    table = caching(service)
    results = await asyncio.gather(
        table.get_async("ada"), table.get_async("ada"), return_exceptions=True
    )
    assert all(isinstance(r, TableError) for r in results)
    assert await table.get_async("ada") == 36
    assert service.count("get") == 2


@pytest.mark.parametrize("write_around", [False, True])
async def test_a_read_overtaken_by_a_write_does_not_cache_the_old_value(
    write_around: bool,
) -> None:
    service = Service({"ada": 36})
    table = caching(service, write_around=write_around)
    service.delay = 0.02
    read = asyncio.ensure_future(table.get_async("ada"))  # reads 36, returns in 20 ms
    await asyncio.sleep(0.005)
    service.delay = 0
    await table.put_async("ada", 37)
    assert await read == 36  # it started before the write
    assert await table.get_async("ada") == 37
    # and a read after the write did not join the old one
    assert service.count("get") == (2 if write_around else 1)


# -- over a local table ----------------------------------------------------------------------------


def local_caching(clock: FakeClock, **ttl: float) -> tuple[CachingTable, Any]:
    store = memory_store("profiles")
    descriptor = CachingTableDescriptor(
        "cached-profiles", RemoteTableDescriptor("profiles")
    ).with_cache_size(2)
    if "read_ttl_s" in ttl:
        descriptor.with_read_ttl(timedelta(seconds=ttl["read_ttl_s"]))
    return CachingTable(descriptor, LocalTable("profiles", store), clock=clock), store


async def test_over_a_local_table_every_method_runs_at_once_on_the_loop() -> None:
    clock = FakeClock()
    table, store = local_caching(clock, read_ttl_s=10)
    assert table.sync_anywhere
    store.put("ada", 36)
    assert table.get("ada") == 36  # a plain method on the loop's thread
    store.put("ada", 99)  # behind the cache's back
    assert await table.get_async("ada") == 36  # a hit
    clock.advance(10)
    assert table.get_all(["ada", "bob"]) == {"ada": 99}
    table.put_all([("bob", 40), ("ada", None)])
    assert store.get("ada") is None and store.get("bob") == 40
    assert table.get("bob") == 40
    assert (table.metrics.cache_hits, table.metrics.cache_misses) == (2, 3)


# -- plain methods over a remote table -------------------------------------------------------------


async def test_over_a_remote_table_plain_methods_refuse_on_the_loop_and_work_off_it() -> None:
    service = Service({"ada": 36})
    table = caching(service)
    await table.open(None)
    with pytest.raises(TableError, match=r"table 'cached-profiles': get\(\) would block"):
        table.get("ada")
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, table.get, "ada") == 36
    assert await loop.run_in_executor(None, table.get, "ada") == 36
    await loop.run_in_executor(None, table.put, "bob", 40)
    assert service.data["bob"] == 40
    assert service.count("get") == 1
    await table.close()
    assert service.closes == 1


async def test_put_all_of_a_mapping_writes_its_items_through_the_cache() -> None:
    service = BulkService()
    table = caching(service)
    await table.put_all_async({"ab": 1, "cd": 2})
    assert service.data == {"ab": 1, "cd": 2}
    assert await table.get_async("ab") == 1 and service.count("get") == 0


def test_put_all_of_a_mapping_on_a_cached_local_table() -> None:
    local = LocalTable("profiles", memory_store())
    descriptor = CachingTableDescriptor("cached", RemoteTableDescriptor("unused"))
    table = CachingTable(descriptor.with_cache_size(10), local, clock=FakeClock())
    table.put_all({"ab": 1, "cd": 2})
    assert local.get_all(["ab", "cd", "a", "c"]) == {"ab": 1, "cd": 2}
