"""build_table: each descriptor gives the task's instance of its table; the remote
functions are the task's own copies; a cache shares or owns the table behind it; the
metrics follow Prometheus' conventions."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest
from table_fakes import Service, memory_store

from samzapy.api.descriptors import KVSerde
from samzapy.api.errors import ConfigError
from samzapy.api.tables import (
    CachingTableDescriptor,
    InMemoryTableDescriptor,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    TableDescriptor,
)
from samzapy.metrics import MetricsRegistry
from samzapy.metrics.prometheus import RegistryCollector
from samzapy.tables import CachingTable, LocalTable, RemoteTable, build_table, table_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from prometheus_conventions import problems


class Stores:
    def __init__(self) -> None:
        self.stores: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        return self.stores.setdefault(name, memory_store(name))


@pytest.mark.parametrize("kind", [InMemoryTableDescriptor, RocksDbTableDescriptor])
def test_a_local_descriptor_gives_a_table_over_the_task_store(kind: type[Any]) -> None:
    stores = Stores()
    table = build_table(
        kind("profiles", KVSerde("string", "json")), get_store=stores, copy_fn=copy.deepcopy
    )
    assert isinstance(table, LocalTable)
    table.put("ada", 36)
    assert stores.stores["profiles"].get("ada") == 36


def test_each_task_gets_its_own_copy_of_the_functions() -> None:
    reader, writer = Service({"a": 1}), Service()
    descriptor = (
        RemoteTableDescriptor("profiles").with_read_function(reader).with_write_function(writer)
    )
    one = build_table(descriptor, get_store=Stores(), copy_fn=copy.deepcopy)
    two = build_table(descriptor, get_store=Stores(), copy_fn=copy.deepcopy)
    assert isinstance(one, RemoteTable) and isinstance(two, RemoteTable)
    assert one.read_fn is not reader and one.read_fn is not two.read_fn
    assert one.write_fn is not writer and one.write_fn is not two.write_fn
    assert one.read_fn.data == {"a": 1}


def test_one_function_as_reader_and_writer_is_copied_once() -> None:
    service = Service()
    copies: list[Any] = []

    def copy_fn(fn: Any) -> Any:
        copies.append(fn)
        return copy.deepcopy(fn)

    descriptor = (
        RemoteTableDescriptor("profiles").with_read_function(service).with_write_function(service)
    )
    table = build_table(descriptor, get_store=Stores(), copy_fn=copy_fn)
    assert isinstance(table, RemoteTable)
    assert table.read_fn is table.write_fn
    assert copies == [service]


def test_a_remote_descriptor_without_a_read_function_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="table 'profiles': a remote table needs a read"):
        build_table(RemoteTableDescriptor("profiles"), get_store=Stores(), copy_fn=copy.deepcopy)


def test_an_unknown_descriptor_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"table 'odd': no table is built from a TableDescriptor"):
        build_table(TableDescriptor("odd"), get_store=Stores(), copy_fn=copy.deepcopy)


async def test_a_cache_builds_and_owns_its_table_unless_given_the_task_one() -> None:
    service = Service()
    remote = RemoteTableDescriptor("profiles").with_read_function(service)
    cached = CachingTableDescriptor("cached", remote)

    owned = build_table(cached, get_store=Stores(), copy_fn=copy.deepcopy)
    assert isinstance(owned, CachingTable) and isinstance(owned.table, RemoteTable)
    assert [m.table_id for m in table_metrics(owned)] == ["cached", "profiles"]
    await owned.open("context")
    assert owned.table.read_fn.inits == ["context"]

    inner = build_table(remote, get_store=Stores(), copy_fn=copy.deepcopy)
    await inner.open("context")
    shared = build_table(cached, get_store=Stores(), copy_fn=copy.deepcopy, inner=inner)
    assert isinstance(shared, CachingTable) and shared.table is inner
    await shared.open("context")
    await shared.close()
    assert inner.read_fn.inits == ["context"]  # not opened twice
    assert inner.read_fn.closes == 0  # the task closes it, as its own table
    assert [m.table_id for m in table_metrics(shared)] == ["cached"]

    other = build_table(
        RemoteTableDescriptor("other").with_read_function(service),
        get_store=Stores(),
        copy_fn=copy.deepcopy,
    )
    with pytest.raises(ValueError, match="caches table 'profiles', not 'other'"):
        build_table(cached, get_store=Stores(), copy_fn=copy.deepcopy, inner=other)


async def test_table_metrics_follow_the_prometheus_conventions() -> None:
    service = Service({"a": 1})
    descriptor = CachingTableDescriptor(
        "cached", RemoteTableDescriptor("profiles").with_read_function(service)
    )
    table = build_table(descriptor, get_store=Stores(), copy_fn=copy.deepcopy)
    registry = MetricsRegistry()
    for metrics in table_metrics(table):
        metrics.register(registry, "task.Partition 0")
    await table.get_async("a")
    await table.get_async("a")
    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry, structlog.get_logger()))
    text = generate_latest(collectors).decode()
    assert problems(text) == []
    assert "samzapy_task_cached_cache_hits_total" in text
    assert "samzapy_task_profiles_call_latency_seconds_count" in text
    values = registry.snapshot()["task.Partition 0"]
    assert (values["cached-cache-hits"], values["cached-gets"], values["profiles-gets"]) == (
        1,
        2,
        1,
    )
