"""TaskContextImpl: what ``InitableTask.init`` receives."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from typing import Any

from samzapy.api.errors import StoreError, TableError
from samzapy.api.metrics import MetricsRegistry
from samzapy.api.store import KeyValueStore
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.api.tables import ReadWriteTable
from samzapy.metrics.registry import MetricsRegistry as ContainerMetrics
from samzapy.tables import LocalTable


class TaskContextImpl:
    """A task's name, input partitions, the job's config, metrics, stores, and those stores
    as tables; ``time_ms``: the container's clock's wall-clock time (the operator task's
    processing time; None: the operators read the wall clock themselves); ``now``: its
    monotonic seconds (the idle timeouts of generated watermarks; None: ``time.monotonic``);
    ``before_commit(fn)``: ``fn()`` runs at each commit before the task's stores flush, its
    writes covered by the checkpoint (None: the task has no stores)."""

    def __init__(
        self,
        *,
        task_name: TaskName,
        config: Mapping[str, Any],
        system_stream_partitions: Set[SystemStreamPartition],
        metrics: ContainerMetrics,
        stores: Mapping[str, KeyValueStore[Any, Any]] | None = None,
        time_ms: Callable[[], int] | None = None,
        now: Callable[[], float] | None = None,
        before_commit: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self._task_name = task_name
        self._config = config
        self._ssps = system_stream_partitions
        self._metrics = metrics
        self._stores = dict(stores or {})
        self._tables: dict[str, ReadWriteTable] = {}
        self.time_ms = time_ms
        self.now = now
        self.before_commit = before_commit

    @property
    def task_name(self) -> TaskName:
        return self._task_name

    @property
    def config(self) -> Mapping[str, Any]:
        return self._config

    @property
    def system_stream_partitions(self) -> Set[SystemStreamPartition]:
        return self._ssps

    @property
    def metrics(self) -> MetricsRegistry:
        return self._metrics

    def get_store(self, name: str) -> KeyValueStore[Any, Any]:
        try:
            return self._stores[name]
        except KeyError:
            declared = ", ".join(sorted(self._stores)) or "none"
            raise StoreError(
                f"task {self._task_name!r} asked for store {name!r}, which is not declared "
                f"(expected stores.{name}.factory in the job config; declared: {declared})"
            ) from None

    def get_table(self, table_id: str) -> ReadWriteTable:
        """A task class's tables are its stores: store ``table_id`` as a table (``put`` of
        None deletes, as in Samza's tables), one per task, its metrics (``<table_id>-gets``,
        ...) in the task's group from the first call."""
        table = self._tables.get(table_id)
        if table is None:
            if table_id not in self._stores:
                declared = ", ".join(sorted(self._stores)) or "none"
                raise TableError(
                    f"task {self._task_name!r} asked for table {table_id!r}: a task class's "
                    f"tables are the stores of its job file (stores.{table_id}.factory), and "
                    f"there is none (stores: {declared})",
                    table_id=table_id,
                )
            table = LocalTable(table_id, self._stores[table_id])
            table.metrics.register(self._metrics, f"task.{self._task_name}")
            self._tables[table_id] = table
        return table


__all__ = ["TaskContextImpl"]
