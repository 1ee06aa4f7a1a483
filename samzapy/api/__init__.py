"""What job authors import: task interfaces, envelopes, names, collector, coordinator, errors."""

from samzapy.api.context import MessageCollector, RequestScope, TaskContext, TaskCoordinator
from samzapy.api.envelope import KV, IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.errors import (
    CheckpointError,
    ConfigError,
    SamzapyError,
    SerdeError,
    StoreError,
    StreamSystemError,
    TaskCallbackTimeoutError,
    TaskError,
    TaskFencedError,
)
from samzapy.api.metrics import MetricsRegistry
from samzapy.api.store import KeyValueIterator, KeyValueStore
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.api.task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    WatermarkListenerTask,
    WindowableTask,
)

__all__ = [
    "KV",
    "AsyncStreamTask",
    "CheckpointError",
    "ClosableTask",
    "ConfigError",
    "EndOfStreamListenerTask",
    "IncomingMessageEnvelope",
    "InitableTask",
    "KeyValueIterator",
    "KeyValueStore",
    "MetricsRegistry",
    "MessageCollector",
    "OutgoingMessageEnvelope",
    "RequestScope",
    "SamzapyError",
    "SerdeError",
    "StoreError",
    "StreamTask",
    "StreamSystemError",
    "SystemStream",
    "SystemStreamPartition",
    "TaskCallbackTimeoutError",
    "TaskContext",
    "TaskCoordinator",
    "TaskError",
    "TaskFencedError",
    "TaskName",
    "WatermarkListenerTask",
    "WindowableTask",
]
