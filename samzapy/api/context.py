"""What a task talks to: MessageCollector, TaskCoordinator (RequestScope) and TaskContext."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from samzapy.api.envelope import OutgoingMessageEnvelope
    from samzapy.api.metrics import MetricsRegistry
    from samzapy.api.store import KeyValueStore
    from samzapy.api.system import SystemStreamPartition, TaskName
    from samzapy.api.tables import ReadWriteTable


class RequestScope(enum.Enum):
    """Which tasks a commit or shutdown request applies to."""

    CURRENT_TASK = "current_task"
    ALL_TASKS_IN_CONTAINER = "all_tasks_in_container"


class MessageCollector(Protocol):
    """Sends messages to output streams. Thread-safe: may be called from any thread."""

    def send(self, envelope: OutgoingMessageEnvelope) -> None: ...


class TaskCoordinator(Protocol):
    """Lets a task ask for a commit or a shutdown; both take effect once the current call ends."""

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None: ...

    def shutdown(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None: ...


class TaskContext(Protocol):
    """Given to ``InitableTask.init``: the task's name, its partitions, config, stores, metrics."""

    @property
    def task_name(self) -> TaskName: ...

    @property
    def config(self) -> Mapping[str, Any]: ...

    @property
    def system_stream_partitions(self) -> Set[SystemStreamPartition]: ...

    @property
    def metrics(self) -> MetricsRegistry: ...

    def get_store(self, name: str) -> KeyValueStore[Any, Any]:
        """The task's instance of store ``name`` (``stores.<name>.*``); StoreError naming the
        declared stores when there is none."""
        ...

    def get_table(self, table_id: str) -> ReadWriteTable:
        """The task's instance of table ``table_id``: an application's table
        (``app_desc.get_table``), or for a task class a store of the job file as a table;
        TableError naming the known tables when there is none."""
        ...


__all__ = ["MessageCollector", "RequestScope", "TaskContext", "TaskCoordinator"]
