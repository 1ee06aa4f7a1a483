"""What job authors import: task interfaces, envelopes, names, collector, coordinator, errors,
the high-level API (applications, descriptors, MessageStream) and task applications."""

from samzapy.api.application import StreamApplication, StreamApplicationDescriptor
from samzapy.api.context import MessageCollector, RequestScope, TaskContext, TaskCoordinator
from samzapy.api.descriptors import (
    FileSystemDescriptor,
    InMemorySystemDescriptor,
    InputDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    OutputDescriptor,
)
from samzapy.api.envelope import KV, IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.errors import (
    CheckpointError,
    ConfigError,
    OperatorError,
    SamzapyError,
    SerdeError,
    StoreError,
    StreamSystemError,
    TableError,
    TaskCallbackTimeoutError,
    TaskError,
    TaskFencedError,
)
from samzapy.api.keys import KeyedValues
from samzapy.api.metrics import MetricsRegistry
from samzapy.api.retry import TableRetryPolicy
from samzapy.api.store import KeyValueIterator, KeyValueStore
from samzapy.api.stream import MessageStream, OutputStream
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.api.tables import (
    CachingTableDescriptor,
    InMemoryTableDescriptor,
    ReadWriteTable,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    Table,
    TableDescriptor,
)
from samzapy.api.task import (
    END_WATERMARK,
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    StreamWatermarkListenerTask,
    WatermarkListenerTask,
    WindowableTask,
)
from samzapy.api.task_application import TaskApplication, TaskApplicationDescriptor
from samzapy.api.windows import (
    AccumulationMode,
    FiringType,
    Triggers,
    Window,
    WindowKey,
    WindowPane,
    Windows,
)

__all__ = [
    "END_WATERMARK",
    "CachingTableDescriptor",
    "InMemoryTableDescriptor",
    "ReadWriteTable",
    "RemoteTableDescriptor",
    "RocksDbTableDescriptor",
    "Table",
    "TableDescriptor",
    "TableError",
    "TableRetryPolicy",
    "Windows",
    "WindowPane",
    "WindowKey",
    "Window",
    "Triggers",
    "FiringType",
    "AccumulationMode",
    "KV",
    "AsyncStreamTask",
    "CheckpointError",
    "ClosableTask",
    "ConfigError",
    "EndOfStreamListenerTask",
    "FileSystemDescriptor",
    "InMemorySystemDescriptor",
    "IncomingMessageEnvelope",
    "InitableTask",
    "InputDescriptor",
    "KVSerde",
    "KafkaSystemDescriptor",
    "KeyedValues",
    "KeyValueIterator",
    "KeyValueStore",
    "MessageCollector",
    "MessageStream",
    "MetricsRegistry",
    "OperatorError",
    "OutgoingMessageEnvelope",
    "OutputDescriptor",
    "OutputStream",
    "RequestScope",
    "SamzapyError",
    "SerdeError",
    "StoreError",
    "StreamApplication",
    "StreamApplicationDescriptor",
    "StreamSystemError",
    "StreamTask",
    "StreamWatermarkListenerTask",
    "SystemStream",
    "SystemStreamPartition",
    "TaskApplication",
    "TaskApplicationDescriptor",
    "TaskCallbackTimeoutError",
    "TaskContext",
    "TaskCoordinator",
    "TaskError",
    "TaskFencedError",
    "TaskName",
    "WatermarkListenerTask",
    "WindowableTask",
]
