"""One task's tables: built from the application's table descriptors when the task opens,
given to the operators that use them and to the functions' ``init(context)``.

Tables are built in the order the application asked for them (a caching table's inner table
first, and the cache is put in front of that same instance), all of them before any is
opened; then every table is attached to the task (its event loop, and the context its
functions' ``init`` gets: the context the application's functions get, every table, and a
cached local table's store as a view that keeps the cache right), and only then each is
opened (a remote table's read and write functions get ``init(context)``). A function's
``init`` may so use any table: one not opened yet opens at its first call
(``samzapy.tables.functions``). All are open before any function of the application's
operators gets its ``init``; they are closed after every function's ``close``. Each table's
metrics are in the task's group as ``<table_id>-gets``, ``<table_id>-cache-hits``, ...
(``samzapy.tables``).
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Mapping, Set
from typing import Any

from samzapy.api.errors import TableError
from samzapy.api.graph import ApplicationGraph
from samzapy.api.metrics import MetricsRegistry
from samzapy.api.store import KeyValueStore
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.api.tables import CachingTableDescriptor, ReadWriteTable
from samzapy.tables import LocalTable, build_table


class TaskTables:
    """The tables of one task, by id."""

    def __init__(self, graph: ApplicationGraph, memo: dict[int, Any]) -> None:
        self._descriptors = [table.descriptor for table in graph.tables.values()]
        self._memo = memo
        #: The tables opened, by id.
        self.tables: dict[str, Any] = {}
        self._built: dict[str, Any] = {}
        #: The tables opened, a first call's included, in the order they became ready: the
        #: task closes them in reverse, a table after those whose functions' init used it.
        self._opened: list[Any] = []

    async def open(self, context: Any) -> None:
        group = f"task.{context.task_name}"
        built: dict[str, Any] = {}
        for descriptor in self._descriptors:
            inner = None
            if isinstance(descriptor, CachingTableDescriptor):
                inner = built[descriptor.table.table_id]
            built[descriptor.table_id] = build_table(
                descriptor,
                get_store=context.get_store,
                copy_fn=lambda fn: copy.deepcopy(fn, self._memo),
                inner=inner,
            )
        self._built = built
        tables_context = AppTaskContext(context, built)
        for table in built.values():  # before any function's init can reach one
            attach = getattr(table, "attach", None)
            if attach is not None:
                attach(tables_context)
        for table_id, table in built.items():  # only an opened table is closed
            opened = None
            try:
                await _maybe_await(getattr(table, "open", None), tables_context)
                opened = table
            finally:
                self._note_opened(opened)
            self.tables[table_id] = table
            metrics = getattr(table, "metrics", None)
            if metrics is not None:
                metrics.register(context.metrics, group)

    def _note_opened(self, current: Any | None) -> None:
        """Add the tables opened since the last call to the closing order, as they became
        ready: those a first call opened while ``current`` opened, then ``current`` (None:
        its open failed). A remote table whose open failed after one of its functions'
        ``init`` returned (``begun``) is added too, last: its close releases that one."""
        known = {id(table) for table in self._opened}
        new = [
            table
            for table in self._built.values()
            if id(table) not in known
            and (
                table is current
                or getattr(table, "opened", False)
                or getattr(table, "begun", False)
            )
        ]
        new.sort(key=_when)
        self._opened.extend(new)

    async def close(self) -> None:
        failure: BaseException | None = None
        for table in reversed(self._opened):  # only an opened table is closed
            try:
                await _maybe_await(getattr(table, "close", None))
            except Exception as exc:  # close every table, then report the first failure
                failure = failure or exc
        if failure is not None:
            raise failure


def _when(table: Any) -> float:
    """When ``table`` became ready: a remote table's own count, else (a local or caching
    table, which opens at once) as its open returned, after what that open made ready."""
    at = getattr(table, "opened_at", None)
    return math.inf if at is None else float(at)


async def _maybe_await(method: Any, *args: Any) -> None:
    if method is None:
        return
    result = method(*args)
    if inspect.isawaitable(result):
        await result


class AppTaskContext:
    """The context an application's functions get: the task's own, and its tables."""

    def __init__(self, context: Any, tables: Mapping[str, ReadWriteTable]) -> None:
        self._context = context
        self._tables = tables

    @property
    def task_name(self) -> TaskName:
        name: TaskName = self._context.task_name
        return name

    @property
    def config(self) -> Mapping[str, Any]:
        config: Mapping[str, Any] = self._context.config
        return config

    @property
    def system_stream_partitions(self) -> Set[SystemStreamPartition]:
        ssps: Set[SystemStreamPartition] = self._context.system_stream_partitions
        return ssps

    @property
    def metrics(self) -> MetricsRegistry:
        metrics: MetricsRegistry = self._context.metrics
        return metrics

    def get_store(self, name: str) -> KeyValueStore[Any, Any]:
        """Store ``name``; a local table's store, with a cache in front of the table, as a
        view whose writes drop the cache's entries of their keys (``LocalTable``)."""
        table = self._tables.get(name)
        if isinstance(table, LocalTable):
            return table.store_for_task()
        store: KeyValueStore[Any, Any] = self._context.get_store(name)
        return store

    def get_table(self, table_id: str) -> ReadWriteTable:
        table = self._tables.get(table_id)
        if table is not None:
            return table
        fallback = getattr(self._context, "get_table", None)
        if fallback is not None:  # a store of the job file, as a table
            try:
                found: ReadWriteTable = fallback(table_id)
            except TableError:
                pass  # none either: the application's message, below
            else:
                return found
        known = ", ".join(sorted(self._tables)) or "none"
        raise TableError(
            f"task {self.task_name!r} asked for table {table_id!r}, which the application did "
            f"not describe (tables: {known}; app_desc.get_table(...) describes one) and the "
            f"job file has no store of that name (stores.{table_id}.factory)",
            table_id=table_id,
        )


__all__ = ["AppTaskContext", "TaskTables"]
