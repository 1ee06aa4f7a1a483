"""A remote table's write batches: when they go, what each writer waits for, failures,
ordering of puts and deletes, the fallback to one call per key, and flush."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from table_fakes import BulkService, Service

from samzapy.api.errors import TableError
from samzapy.api.tables import RemoteTableDescriptor
from samzapy.tables import RemoteTable


def batched(service: Any, size: int, delay_ms: float = 1000) -> RemoteTable:
    descriptor = (
        RemoteTableDescriptor("profiles")
        .with_read_function(service)
        .with_write_function(service)
        .with_write_batch(size, timedelta(milliseconds=delay_ms))
    )
    return RemoteTable(descriptor, service, service)


async def test_a_full_batch_goes_out_in_one_call_and_completes_each_writer() -> None:
    service = BulkService()
    table = batched(service, 3)
    first = [asyncio.ensure_future(table.put_async(k, v)) for k, v in [("a", 1), ("b", 2)]]
    await asyncio.sleep(0.01)
    assert service.calls == []  # two of three: still waiting
    assert not any(w.done() for w in first)
    third = asyncio.ensure_future(table.put_async("c", 3))
    await asyncio.gather(*first, third)
    assert service.calls == [("put_all", [("a", 1), ("b", 2), ("c", 3)])]
    assert service.data == {"a": 1, "b": 2, "c": 3}


async def test_a_batch_goes_out_once_its_oldest_write_waited_the_delay() -> None:
    service = BulkService()
    table = batched(service, 100, delay_ms=30)
    start = time.monotonic()
    await asyncio.gather(table.put_async("a", 1), table.delete_async("z"), table.put_async("b", 2))
    elapsed = time.monotonic() - start
    assert elapsed >= 0.025
    assert elapsed < 0.5
    # a delete between two puts closes the batch of the first (the second batch waits anew)
    assert [name for name, _ in service.calls] == ["put_all", "delete_all", "put_all"]


async def test_every_writer_of_a_failed_batch_gets_the_failure() -> None:
    service = BulkService(failures=1)
    table = batched(service, 2)
    results = await asyncio.gather(
        table.put_async("a", 1), table.put_async("b", 2), return_exceptions=True
    )
    assert all(isinstance(r, TableError) for r in results), results
    assert "put_all of keys ['a', 'b'] failed" in str(results[0])
    assert results[0] is results[1]
    assert service.data == {}


async def test_a_delete_after_a_put_of_the_same_key_is_not_reordered() -> None:
    service = BulkService(delay=0.02)
    table = batched(service, 10, delay_ms=1)
    await asyncio.gather(table.put_async("k", 1), table.delete_async("k"))
    assert service.events == [
        ("start", "put_all"),
        ("end", "put_all"),
        ("start", "delete_all"),
        ("end", "delete_all"),
    ]
    assert service.data == {}


async def test_batches_go_out_one_at_a_time_in_order() -> None:
    service = BulkService(delay=0.01)
    table = batched(service, 2)
    await asyncio.gather(*(table.put_async(f"k{i}", i) for i in range(6)))
    assert service.count("put_all") == 3
    assert service.in_flight_max == 1
    assert [entries[0][0] for _, entries in service.calls] == ["k0", "k2", "k4"]


async def test_without_bulk_methods_a_batch_is_one_call_per_key() -> None:
    service = Service(delay=0.01)
    table = batched(service, 4)
    await asyncio.gather(
        table.put_async("a", 1),
        table.put_async("b", 2),
        table.put_async("a", 3),
        table.put_async("c", 4),
    )
    assert sorted(service.calls) == [("put", ("a", 3)), ("put", ("b", 2)), ("put", ("c", 4))]
    assert service.in_flight_max == 3  # concurrently
    assert service.data == {"a": 3, "b": 2, "c": 4}


async def test_put_all_with_deletions_splits_into_ordered_batches() -> None:
    service = BulkService({"x": 0})
    table = batched(service, 10, delay_ms=1)
    await table.put_all_async([("a", 1), ("x", None), ("b", 2)])
    assert service.calls == [
        ("put_all", [("a", 1)]),
        ("delete_all", ["x"]),
        ("put_all", [("b", 2)]),
    ]
    await table.delete_all_async(["a", "b"])
    assert service.data == {}


async def test_flush_sends_what_waits_at_once_and_does_not_raise_a_batch_failure() -> None:
    service = BulkService()
    table = batched(service, 100, delay_ms=10_000)
    writer = asyncio.ensure_future(table.put_async("a", 1))
    await asyncio.sleep(0.01)
    assert service.calls == []
    await asyncio.wait_for(table.flush_async(), 1)
    assert service.data == {"a": 1}
    await writer

    service.failures = 1
    writer = asyncio.ensure_future(table.put_async("b", 2))
    await asyncio.sleep(0)
    await table.flush_async()  # the failure is the writer's
    with pytest.raises(TableError, match="put_all of keys \\['b'\\] failed"):
        await writer


async def test_close_flushes_the_waiting_batch() -> None:
    service = BulkService()
    table = batched(service, 100, delay_ms=10_000)
    await table.open(None)
    writer = asyncio.ensure_future(table.put_async("a", 1))
    await asyncio.sleep(0)
    await asyncio.wait_for(table.close(), 1)
    assert writer.done() and service.data == {"a": 1}
    assert service.closes == 1


async def test_a_cancelled_writer_leaves_the_others_waiting_for_their_batch() -> None:
    service = BulkService(delay=0.02)
    table = batched(service, 2)
    cancelled = asyncio.ensure_future(table.put_async("a", 1))
    kept = asyncio.ensure_future(table.put_async("b", 2))
    await asyncio.sleep(0.005)  # the batch is under way
    cancelled.cancel()
    await kept
    assert service.data == {"a": 1, "b": 2}
    assert cancelled.cancelled()
