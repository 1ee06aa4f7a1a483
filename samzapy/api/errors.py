"""The error hierarchy: every error samzapy raises on purpose derives from SamzapyError."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samzapy.api.system import SystemStreamPartition, TaskName


class SamzapyError(Exception):
    """Root of samzapy's own errors."""


class ConfigError(SamzapyError):
    """A configuration key is missing, unknown or ill-typed; the message names the key.

    When validation finds several problems, ``problems`` holds one message each and the
    error's own message lists them all.
    """

    def __init__(
        self, message: str, *, key: str | None = None, problems: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.key = key
        self.problems = problems or (message,)


class InputMissingError(ConfigError):
    """An input stream of the job does not exist on its system: the job cannot start until
    it is created (a configuration problem, not a failure of the job)."""

    def __init__(self, message: str, *, system: str, stream: str, hint: str) -> None:
        super().__init__(message, key="task.inputs")
        self.system = system
        self.stream = stream
        self.hint = hint


class TaskError(SamzapyError):
    """User code failed. The original exception is in ``__cause__``."""

    def __init__(
        self,
        message: str,
        *,
        task_name: TaskName | None = None,
        ssp: SystemStreamPartition | None = None,
        offset: str | None = None,
        operator: str | None = None,
    ) -> None:
        super().__init__(message)
        self.task_name = task_name
        self.ssp = ssp
        self.offset = offset
        #: The id of the application operator whose function failed, if any.
        self.operator = operator


class OperatorError(SamzapyError):
    """A function of an application's operator failed (or its output could not be sent).

    The task's error (a TaskError) names the operator, task, partition and offset; the
    function's own exception is in ``__cause__``."""

    def __init__(self, message: str, *, op_id: str, kind: str) -> None:
        super().__init__(message)
        self.op_id = op_id
        self.kind = kind


class WatermarkFiringError(OperatorError):
    """An operator failed on what an event-time window fired as a message moved its stream's
    watermark (``with_watermarks``): a pane, not the message, failed, so the task fails even
    under ``task.drop.process.errors`` (as it does when a watermark or ``task.window.ms``
    fires the pane). ``op_id``: the operator that failed; ``__cause__``: its own error."""


class TaskCallbackTimeoutError(TaskError):
    """An awaitable returned by process_async did not complete within task.callback.timeout.ms."""


class StreamSystemError(SamzapyError):
    """A system (consumer, producer or admin) failed."""


class TaskFencedError(StreamSystemError):
    """Another container owns the task now: this container's writes for it were refused
    (its transactional producer was fenced, or its checkpoint generation is older). The task
    is dropped at once; the write is never retried."""

    def __init__(
        self, message: str, *, task_name: TaskName | None = None, epoch: int | None = None
    ) -> None:
        super().__init__(message)
        self.task_name = task_name
        #: The owner epoch this container held for the task.
        self.epoch = epoch


class SendFailedError(StreamSystemError):
    """A producer's flush found messages it could not deliver: ``messages`` of them, as far as
    it knows (what ``task.drop.producer.errors`` counts as dropped)."""

    def __init__(self, message: str, *, messages: int) -> None:
        super().__init__(message)
        self.messages = messages


class SerdeError(StreamSystemError):
    """A message could not be serialized or deserialized. A message read: ``ssp`` and
    ``offset`` say where, ``task_name`` which task it was for (None when several read it)."""

    def __init__(
        self,
        message: str,
        *,
        ssp: SystemStreamPartition | None = None,
        offset: str | None = None,
        task_name: TaskName | None = None,
    ) -> None:
        super().__init__(message)
        self.ssp = ssp
        self.offset = offset
        self.task_name = task_name


class CheckpointError(SamzapyError):
    """Reading or writing a checkpoint failed."""


class JobCollisionError(SamzapyError):
    """Another job holds a Kafka resource this job's names map to (its checkpoint topic, its
    consumer group): two jobs whose ``job.name`` and ``job.id`` join to the same name. The
    message names both jobs and the resource; the remedy is a different job.name or job.id."""


class StoreError(SamzapyError):
    """A key-value store was misused or failed."""


class TableError(SamzapyError):
    """A table was misused, or a remote table's call failed (after its retries); the
    message names the table (and the key where there is one)."""

    def __init__(self, message: str, *, table_id: str, key: object = None) -> None:
        super().__init__(message)
        self.table_id = table_id
        self.key = key


__all__ = [
    "CheckpointError",
    "ConfigError",
    "JobCollisionError",
    "OperatorError",
    "SamzapyError",
    "SendFailedError",
    "SerdeError",
    "StoreError",
    "StreamSystemError",
    "TableError",
    "TaskCallbackTimeoutError",
    "TaskError",
    "TaskFencedError",
    "WatermarkFiringError",
]
