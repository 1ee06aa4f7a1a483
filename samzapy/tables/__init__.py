"""The tables of a task at run time (Samza's Table API): built from the application's
descriptors (``samzapy.api.tables``), one instance per task.

``build_table`` turns a descriptor into the task's instance:

1. ``InMemoryTableDescriptor``/``RocksDbTableDescriptor``: a LocalTable over the task's store
   ``<table_id>`` (``get_store(table_id)``; the container declared the store from the
   descriptor).
2. ``RemoteTableDescriptor``: a RemoteTable over the task's own copies of the read and write
   functions (``copy_fn(fn)``, a deep copy say, so that no state is shared between tasks; one
   object given as both is copied once and stays one object).
3. ``CachingTableDescriptor``: a CachingTable in front of the table its descriptor names:
   ``inner``, the task's instance of that table when the task has it already (the cache then
   leaves opening and closing it to the task, and that table drops the cache's entries of
   the keys written to it directly, or to its store as ``LocalTable.store_for_task`` gives
   it), else one built as above for the cache alone.

The container then attaches every table at task init (``table.attach(context)``, where it
has one: a first call opens such a table, ``samzapy.tables.functions``), opens each
(``await table.open(context)``, on the event loop), registers its metrics
(``table_metrics(table)``, each ``register(registry, group)``), and closes it when the task
stops (``await table.close()``), after a last ``flush_async()`` at the final commit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.store import KeyValueStore
from samzapy.api.tables import (
    CachingTableDescriptor,
    LocalTableDescriptor,
    RemoteTableDescriptor,
    TableDescriptor,
)
from samzapy.tables.caching import CachingTable
from samzapy.tables.local import LocalTable
from samzapy.tables.metrics import TableMetrics
from samzapy.tables.rate_limit import TokenBucket
from samzapy.tables.remote import RemoteTable

TaskTable = LocalTable | RemoteTable | CachingTable


def build_table(
    descriptor: TableDescriptor,
    *,
    get_store: Callable[[str], KeyValueStore[Any, Any]],
    copy_fn: Callable[[Any], Any],
    clock: Callable[[], float] = time.monotonic,
    inner: TaskTable | None = None,
) -> TaskTable:
    """The task's instance of the table ``descriptor`` describes (see the module docstring);
    ``clock`` (seconds) drives rate limiters, retry delays and cache ttls; ``inner`` is for a
    caching descriptor only (step 3)."""
    if inner is not None and not isinstance(descriptor, CachingTableDescriptor):
        raise ValueError(f"build_table: inner is for a caching table, not {descriptor!r}")
    if isinstance(descriptor, LocalTableDescriptor):
        return LocalTable(descriptor.table_id, get_store(descriptor.table_id))
    if isinstance(descriptor, RemoteTableDescriptor):
        read_fn = None if descriptor.read_fn is None else copy_fn(descriptor.read_fn)
        if descriptor.write_fn is None:
            write_fn = None
        elif descriptor.write_fn is descriptor.read_fn:
            write_fn = read_fn
        else:
            write_fn = copy_fn(descriptor.write_fn)
        return RemoteTable(descriptor, read_fn, write_fn, clock=clock)
    if isinstance(descriptor, CachingTableDescriptor):
        if inner is not None:
            if inner.table_id != descriptor.table.table_id:
                raise ValueError(
                    f"build_table: table {descriptor.table_id!r} caches table "
                    f"{descriptor.table.table_id!r}, not {inner.table_id!r}"
                )
            cache = CachingTable(descriptor, inner, clock=clock, owns_table=False)
            if not isinstance(inner, CachingTable):  # (a cache is never put in front of one)
                inner.caches.append(cache)  # writes made to ``inner`` directly drop its entries
            return cache
        own = build_table(descriptor.table, get_store=get_store, copy_fn=copy_fn, clock=clock)
        return CachingTable(descriptor, own, clock=clock)
    raise ConfigError(
        f"table {descriptor.table_id!r}: no table is built from a {type(descriptor).__name__}; "
        f"use an InMemory, RocksDb, Remote or Caching table descriptor"
    )


def table_metrics(table: TaskTable) -> list[TableMetrics]:
    """The metrics of ``table`` and of the table behind it, for a caching one that owns it
    (a table the task has of its own registers its metrics as such)."""
    found = [table.metrics]
    if isinstance(table, CachingTable) and table.owns_table:
        found += table_metrics(table.table)
    return found


__all__ = [
    "CachingTable",
    "LocalTable",
    "RemoteTable",
    "TableMetrics",
    "TaskTable",
    "TokenBucket",
    "build_table",
    "table_metrics",
]
