"""RemoteTable: retries and their failures, reads and writes, read-only tables, the plain
methods off the loop, the functions' life cycle, and the metrics it publishes."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from table_fakes import BulkService, FakeClock, Service

from samzapy.api.errors import ConfigError, TableError
from samzapy.api.retry import TableRetryPolicy
from samzapy.api.tables import RemoteTableDescriptor
from samzapy.metrics import MetricsRegistry
from samzapy.tables import RemoteTable
from samzapy.tables.remote import retry_delay

MS = timedelta(milliseconds=1)


def policy(attempts: int = 3) -> TableRetryPolicy:
    return TableRetryPolicy().with_fixed_backoff(MS).with_stop_after_attempts(attempts)


def remote(
    service: Any,
    *,
    read_retry: TableRetryPolicy | None = None,
    write_retry: TableRetryPolicy | None = None,
    read_only: bool = False,
    clock: Any = None,
) -> RemoteTable:
    descriptor = RemoteTableDescriptor("profiles").with_read_function(service)
    if read_retry is not None:
        descriptor.with_read_retry_policy(read_retry)
    if write_retry is not None:
        descriptor.with_write_retry_policy(write_retry)
    write_fn = None if read_only else service
    if clock is None:
        return RemoteTable(descriptor, service, write_fn)
    return RemoteTable(descriptor, service, write_fn, clock=clock)


# -- retries ---------------------------------------------------------------------------------------


async def test_a_failed_call_is_retried_until_it_succeeds() -> None:
    service = Service({"ada": 36}, failures=2)
    table = remote(service, read_retry=policy(3))
    assert await table.get_async("ada") == 36
    assert service.count("get") == 3
    assert (table.metrics.retries, table.metrics.failures) == (2, 0)


async def test_retries_run_out_in_a_table_error_naming_table_operation_and_key() -> None:
    service = Service(failures=10)
    table = remote(service, read_retry=policy(3))
    with pytest.raises(
        TableError,
        match=r"^table 'profiles': get of key 'ada' failed after 3 attempts: "
        r"ConnectionError\('service down'\)$",
    ) as caught:
        await table.get_async("ada")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert (caught.value.table_id, caught.value.key) == ("profiles", "ada")
    assert service.count("get") == 3
    assert (table.metrics.retries, table.metrics.failures) == (2, 1)
    assert table.metrics.call_latency.count == 3


async def test_the_predicate_stops_retries_of_other_errors() -> None:
    service = Service(failures=10, error=lambda: ValueError("bad key"))
    only_timeouts = policy(5).with_retry_predicate(lambda exc: isinstance(exc, TimeoutError))
    table = remote(service, write_retry=only_timeouts)
    with pytest.raises(
        TableError,
        match=r"put of key 'ada' failed \(not retried: the retry predicate declines ValueError\)",
    ):
        await table.put_async("ada", 1)
    assert service.count("put") == 1
    assert table.metrics.retries == 0


async def test_without_a_policy_nothing_is_retried() -> None:
    service = Service(failures=1)
    table = remote(service)
    with pytest.raises(TableError, match=r"delete of key 'ada' failed \(no retry policy\)"):
        await table.delete_async("ada")
    assert service.count("delete") == 1


async def test_reads_use_the_read_policy_and_writes_the_write_policy() -> None:
    service = Service({"k": 1}, failures=1)
    table = remote(service, read_retry=policy(2))
    assert await table.get_async("k") == 1  # retried
    service.failures = 1
    with pytest.raises(TableError, match="no retry policy"):
        await table.put_async("k", 2)  # no write policy


async def test_retries_stop_once_the_policy_delay_is_spent() -> None:
    clock = FakeClock()

    class SlowFailing(Service):
        async def get_async(self, key: Any) -> Any:
            clock.advance(0.020)  # each call takes 20 ms of the table's clock
            return await super().get_async(key)

    service = SlowFailing(failures=10)
    by_delay = (
        TableRetryPolicy()
        .with_fixed_backoff(timedelta(0))
        .with_stop_after_delay(timedelta(milliseconds=50))
    )
    table = remote(service, read_retry=by_delay, clock=clock)
    with pytest.raises(
        TableError, match=r"after 3 attempts \(the retry policy stops after 50 ms\)"
    ):
        await table.get_async("k")
    assert service.count("get") == 3  # started at 0, 20 and 40 ms; the next would be at 60


async def test_the_default_policy_makes_three_attempts_100_ms_apart() -> None:
    """docs/tables.md: "with_stop_after_attempts (default 3)"; TableRetryPolicy: "Defaults:
    100 ms between attempts, stop after 3 attempts, retry every Exception"."""
    service = Service(failures=10, error=lambda: KeyError("any exception"))
    table = remote(service, write_retry=TableRetryPolicy())
    start = time.monotonic()
    with pytest.raises(TableError, match=r"put of key 'ada' failed after 3 attempts: KeyError"):
        await table.put_async("ada", 1)
    elapsed = time.monotonic() - start
    assert service.count("put") == 3
    assert (table.metrics.retries, table.metrics.failures) == (2, 1)
    assert 0.19 <= elapsed < 1.0  # two sleeps of 100 ms


def test_retry_delay_follows_the_policy_back_off() -> None:
    exponential = (
        TableRetryPolicy()
        .with_exponential_backoff(timedelta(milliseconds=10), timedelta(milliseconds=35), 2)
        .with_stop_after_attempts(5)
    )
    error = ConnectionError()
    delays = [retry_delay(exponential, attempt, 0.0, error)[0] for attempt in range(1, 6)]
    assert delays == [0.010, 0.020, 0.035, 0.035, None]


async def test_cancellation_is_neither_retried_nor_wrapped() -> None:
    service = Service(failures=10, error=asyncio.CancelledError)
    table = remote(service, read_retry=policy(5))
    with pytest.raises(asyncio.CancelledError):
        await table.get_async("k")
    assert service.count("get") == 1

    service = Service({"k": 1}, delay=10)
    table = remote(service, read_retry=policy(5))
    call = asyncio.ensure_future(table.get_async("k"))
    await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert service.count("get") == 1
    assert (table.metrics.retries, table.metrics.failures) == (0, 0)


# -- reads and writes ------------------------------------------------------------------------------


async def test_get_all_uses_the_read_function_get_all_when_it_has_one() -> None:
    service = BulkService({"a": 1, "b": 2})
    table = remote(service)
    assert await table.get_all_async(["a", "b", "c", "a"]) == {"a": 1, "b": 2}
    assert service.calls == [("get_all", ["a", "b", "c"])]
    assert table.metrics.gets == 3


async def test_get_all_otherwise_reads_each_key_concurrently() -> None:
    service = Service({"a": 1, "b": 2}, delay=0.01)
    table = remote(service)
    assert await table.get_all_async(["a", "b", "c"]) == {"a": 1, "b": 2}
    assert service.count("get") == 3
    assert service.in_flight_max == 3


async def test_get_all_fails_naming_the_failed_key() -> None:
    service = BulkService(failures=1)
    table = remote(service)
    with pytest.raises(TableError, match=r"get_all of keys \['a', 'b'\] failed"):
        await table.get_all_async(["a", "b"])


async def test_writes_reach_the_service_and_put_of_none_deletes() -> None:
    service = Service()
    table = remote(service)
    await table.put_async("a", 1)
    await table.put_all_async([("b", 2), ("c", 3), ("b", None)])
    await table.put_async("c", None)
    assert service.data == {"a": 1}
    assert ("delete", "c") in service.calls and ("delete", "b") in service.calls
    assert (table.metrics.puts, table.metrics.deletes) == (3, 2)


async def test_put_all_and_delete_all_use_the_bulk_methods() -> None:
    service = BulkService({"z": 0})
    table = remote(service)
    await table.put_all_async([("a", 1), ("b", 2), ("a", None)])
    await table.delete_all_async(["z"])
    assert service.calls == [
        ("put_all", [("a", 1), ("b", 2)]),
        ("delete_all", ["a"]),
        ("delete_all", ["z"]),
    ]
    assert service.data == {"b": 2}


@pytest.mark.parametrize(
    ("write", "args"),
    [
        ("put_async", ("ada", 1)),
        ("delete_async", ("ada",)),
        ("put_all_async", ([("ada", 1)],)),
        ("delete_all_async", (["ada"],)),
    ],
)
async def test_a_read_only_table_refuses_writes_naming_itself(write: str, args: Any) -> None:
    service = Service()
    table = remote(service, read_only=True)
    with pytest.raises(TableError, match=r"^table 'profiles' is read-only .*'ada'") as caught:
        await getattr(table, write)(*args)
    assert caught.value.table_id == "profiles"
    assert service.calls == []


def test_a_remote_table_needs_a_read_function() -> None:
    with pytest.raises(ConfigError, match="table 'profiles': a remote table needs a read"):
        RemoteTable(RemoteTableDescriptor("profiles"), None)


# -- plain methods ---------------------------------------------------------------------------------


async def test_plain_methods_refuse_on_the_loop_and_work_from_a_thread() -> None:
    service = Service({"ada": 36})
    table = remote(service)
    await table.open(None)
    with pytest.raises(
        TableError, match=r"^table 'profiles': get\(\) would block the event loop: use get_async"
    ):
        table.get("ada")
    with pytest.raises(TableError, match=r"put\(\) would block the event loop: use put_async"):
        table.put("ada", 37)
    assert service.calls == []
    loop = asyncio.get_running_loop()
    assert await loop.run_in_executor(None, table.get, "ada") == 36
    await loop.run_in_executor(None, table.put_all, [("bob", 40)])
    await loop.run_in_executor(None, table.delete, "ada")
    assert await loop.run_in_executor(None, table.get_all, ["ada", "bob"]) == {"bob": 40}


async def test_a_failure_reaches_the_thread_as_the_table_error() -> None:
    table = remote(Service(failures=1))
    await table.open(None)
    with pytest.raises(TableError, match="get of key 'k' failed"):
        await asyncio.get_running_loop().run_in_executor(None, table.get, "k")


def test_plain_methods_before_open_say_so() -> None:
    table = remote(Service())
    with pytest.raises(TableError, match=r"get\(\) needs the table open"):
        table.get("k")


# -- life cycle and metrics ------------------------------------------------------------------------


async def test_open_inits_and_close_closes_each_function_once() -> None:
    service = Service()
    table = remote(service)  # one object as read and write function
    await table.open("context")
    await table.close()
    assert (service.inits, service.closes) == (["context"], 1)

    reader, writer = Service(), Service()
    descriptor = RemoteTableDescriptor("profiles").with_read_function(reader)
    table = RemoteTable(descriptor.with_write_function(writer), reader, writer)
    await table.open("context")
    await table.close()
    assert (reader.inits, reader.closes, writer.inits, writer.closes) == (
        ["context"],
        1,
        ["context"],
        1,
    )


async def test_a_failing_init_names_the_table_and_function() -> None:
    class Broken(Service):
        async def init(self, context: Any) -> None:  # type: ignore[override]
            raise RuntimeError("no credentials")

    table = remote(Broken())
    with pytest.raises(
        TableError, match=r"table 'profiles': init of its read/write function failed"
    ) as caught:
        await table.open(None)
    assert isinstance(caught.value.__cause__, RuntimeError)


async def test_metrics_are_published_under_the_table_id() -> None:
    service = Service({"a": 1}, failures=1)
    table = remote(service, read_retry=policy(2))
    registry = MetricsRegistry()
    table.metrics.register(registry, "task.Partition 0")
    await table.get_async("a")
    await table.put_async("b", 2)
    values = registry.snapshot()["task.Partition 0"]
    assert values["profiles-gets"] == 1
    assert values["profiles-puts"] == 1
    assert values["profiles-retries"] == 1
    assert values["profiles-failures"] == 0
    assert values["profiles-call-latency"]["count"] == 3  # two attempts and a put
    assert {
        "profiles-deletes",
        "profiles-cache-hits",
        "profiles-cache-misses",
        "profiles-rate-limit-waits",
        "profiles-rate-limit-wait-seconds",
    } <= set(values)


async def test_put_all_of_a_mapping_writes_its_items_sync_and_async() -> None:
    service = BulkService()
    table = remote(service)
    await table.open(None)
    await table.put_all_async({"ab": 1, "cd": 2})
    await asyncio.to_thread(table.put_all, {"ef": 3})
    assert service.data == {"ab": 1, "cd": 2, "ef": 3}
