"""LocalTable: Samza's table semantics over a task's real in-memory store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from table_fakes import memory_store

from samzapy.api.envelope import KV
from samzapy.api.errors import StoreError, TableError
from samzapy.api.tables import CachingTableDescriptor, InMemoryTableDescriptor, KVSerde
from samzapy.tables import LocalTable, build_table


def make() -> tuple[LocalTable, Any]:
    store = memory_store()
    return LocalTable("profiles", store), store


def test_reads_and_writes_go_to_the_store() -> None:
    table, store = make()
    table.put("ada", {"age": 36})
    assert store.get("ada") == {"age": 36}
    store.put("bob", {"age": 40})
    assert table.get("bob") == {"age": 40}
    assert table.get("nobody") is None


def test_put_of_none_deletes_the_key() -> None:
    table, store = make()
    table.put("ada", 1)
    table.put("ada", None)
    assert store.get("ada") is None
    assert table.metrics.deletes == 1 and table.metrics.puts == 1


def test_get_all_leaves_absent_keys_out() -> None:
    table, _ = make()
    table.put_all([("a", 1), KV("b", 2)])
    assert table.get_all(["a", "b", "c"]) == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ([("k", 1), ("k", None)], None),  # put then delete: absent
        ([("k", None), ("k", 1)], 1),  # delete then put: present
        ([("k", 1), ("j", None), ("k", 2)], 2),  # the last value wins across runs
    ],
)
def test_put_all_applies_values_and_deletions_in_order(entries: list[Any], expected: Any) -> None:
    table, store = make()
    store.put("k", 0)
    store.put("j", 0)
    table.put_all(entries)
    assert store.get("k") == expected
    if ("j", None) in entries:
        assert store.get("j") is None


def test_put_all_of_a_malformed_entry_names_the_table() -> None:
    table, _ = make()
    with pytest.raises(TableError, match=r"^table 'profiles': put_all expects \(key, value\)"):
        table.put_all([("a", 1), "oops"])


def test_delete_and_delete_all() -> None:
    table, _ = make()
    table.put_all([("a", 1), ("b", 2), ("c", 3)])
    table.delete("a")
    table.delete_all(["b", "missing"])
    assert table.get_all(["a", "b", "c"]) == {"c": 3}


def test_store_errors_pass_through_naming_the_store() -> None:
    table, _ = make()
    with pytest.raises(StoreError, match="store 'profiles'"):
        table.put(5, 1)  # the string key serde refuses an int


async def test_async_methods_are_the_plain_ones_on_the_loop() -> None:
    table, store = make()
    await table.put_async("a", 1)
    await table.put_all_async([("b", 2), ("c", None)])
    assert await table.get_async("a") == 1
    assert await table.get_all_async(["a", "b", "c"]) == {"a": 1, "b": 2}
    await table.delete_async("a")
    await table.delete_all_async(["b"])
    await table.flush_async()
    assert store.get_all(["a", "b"]) == {}
    # the plain methods run on the event loop's thread too: a store never blocks for long
    table.put("d", 4)
    assert table.get("d") == 4


async def test_plain_methods_work_off_the_loop() -> None:
    table, _ = make()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, table.put, "a", 1)
    assert await loop.run_in_executor(None, table.get, "a") == 1


def test_metrics_count_per_key() -> None:
    table, _ = make()
    table.put_all([("a", 1), ("b", 2), ("c", None)])
    table.get_all(["a", "b", "x"])
    table.get("a")
    table.delete_all(["a", "b"])
    m = table.metrics
    assert (m.puts, m.gets, m.deletes) == (2, 4, 3)


def test_put_all_of_a_mapping_writes_its_items() -> None:
    """A dict's iteration gives its keys: "ab" would unpack as key "a", value "b"."""
    table, _ = make()
    table.put_all({"ab": 1, "cd": None, "ef": 3})
    assert table.get_all(["ab", "cd", "ef", "a", "c"]) == {"ab": 1, "ef": 3}


@pytest.mark.parametrize("entry", ["ab", b"ab"])
def test_a_string_is_no_entry_even_of_two_characters(entry: Any) -> None:
    table, store = make()
    with pytest.raises(TableError, match="put_all expects"):
        table.put_all([entry])
    assert store.get("a") is None


def test_put_all_writes_nothing_when_an_entry_is_no_pair() -> None:
    # As a remote or caching table's put_all, and a store's: the entries are read first.
    table, store = make()
    store.put("b", 0)
    with pytest.raises(TableError, match="put_all expects"):
        table.put_all([("a", 1), ("b", None), "xy"])
    assert (store.get("a"), store.get("b")) == (None, 0)


def test_the_task_gets_the_store_itself_when_no_cache_is_in_front_of_the_table() -> None:
    """A task's direct writes to a store without a cache in front pay nothing for caches."""
    table, store = make()
    assert table.store_for_task() is store


def test_writes_to_the_store_behind_a_cache_drop_its_entries_done_or_failed() -> None:
    table, _ = make()
    cached = build_table(
        CachingTableDescriptor(
            "cached", InMemoryTableDescriptor("profiles", KVSerde("string", "json"))
        ),
        get_store=lambda name: None,
        copy_fn=lambda fn: fn,
        inner=table,
    )
    store = table.store_for_task()
    assert store.key_serde is table.store.key_serde and store.store_name == "profiles"
    table.put_all([("ann", 1), ("bob", 2), ("cid", 3)])
    assert cached.get_all(["ann", "bob", "cid"]) == {"ann": 1, "bob": 2, "cid": 3}
    store.put_all({"ann": 10})
    store.delete_all(key for key in ["bob"])
    with pytest.raises(StoreError, match="put_all expects"):
        store.put_all([("cid", 30), "x"])  # refused: nothing written, the entry dropped anyway
    with pytest.raises(StoreError, match="give one key as"):
        store.delete_all("cid")
    assert cached.get_all(["ann", "bob", "cid"]) == {"ann": 10, "cid": 3}
    assert cached.metrics.cache_misses == 6  # the three keys, then again
