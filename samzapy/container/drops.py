"""Messages a task cannot process: the drop policy and the dead-letter stream.

``task.drop.process.errors: true`` drops a message whose ``process`` (or ``process_async``,
or the awaitable it returned) raised: the slot hands the task's error to ``Drops``, which
logs ``message_dropped`` (at most once per partition per minute), counts ``process-errors``
and tells the slot to go on; the offset then counts as processed, so the checkpoint moves
past it. A task whose producer was fenced is never dropped: it must stop; nor is a
``SystemExit`` or ``KeyboardInterrupt`` (``never_dropped``).

``task.dead.letter.stream: <system>.<stream>`` writes every dropped message, by either
``task.drop.*.errors`` key, to that stream as it was read (``RawRecord``: key and value bytes
before any serde or frame decoding, and the record's headers), with the headers
``DEAD_LETTER_HEADERS`` added. It goes through the task's own producer of that system: a
commit flushes it before its checkpoint, a failed write fails the job as an output would,
and under exactly-once it commits in the transaction of the offsets that move past it.

A message the consumer could not deserialize reaches the task as a ``DroppedEnvelope`` at
its offset, with or without a dead-letter stream: the task counts the offset as processed (so
the checkpoint moves past it, the partition's last record too) and, when the job has one,
writes its dead letter, in order with the task's other writes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord, raw_record
from samzapy.api.errors import TaskError, TaskFencedError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.config.views import TaskConfig
from samzapy.container.inputs import ControlEnvelope
from samzapy.metrics.log_limit import DROP_LOG_INTERVAL_S, LogLimit
from samzapy.metrics.registry import Counter
from samzapy.system.ports import SystemProducer


class NotAwaitableError(TypeError):
    """``process_async`` returned something that is not awaitable: the task's code is wrong,
    not the message."""


#: Failures never dropped under task.drop.process.errors: a fenced task, a task whose code
#: breaks the contract, and a process out of memory (and ``never_dropped``'s others).
_NEVER_DROPPED = (TaskFencedError, NotAwaitableError, MemoryError)


def never_dropped(cause: BaseException) -> bool:
    """Whether ``cause`` fails the task even under task.drop.process.errors: ``_NEVER_DROPPED``,
    and what is no ``Exception`` but a ``CancelledError`` (``SystemExit``, ``KeyboardInterrupt``,
    ``GeneratorExit``: the process is asked to stop, not the message refused)."""
    if isinstance(cause, _NEVER_DROPPED):
        return True
    return not isinstance(cause, Exception | asyncio.CancelledError)


log = structlog.get_logger("samzapy.drops")


class DropLog(LogLimit[SystemStreamPartition]):
    """Says when a drop on a partition is to be logged (``LogLimit``), by the loop's clock.
    The consumers keep one for what they cannot deserialize and each task one for what it
    fails on: each kind is limited on its own."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(lambda: asyncio.get_running_loop().time())


#: The headers a dead letter carries after the input record's own (values UTF-8 text).
DEAD_LETTER_HEADERS = (
    "samzapy.error",  # the error's message
    "samzapy.error.type",  # its type: module.Class (builtins: Class)
    "samzapy.dropped.by",  # task.drop.process.errors or task.drop.deserialization.errors
    "samzapy.task",  # the task that dropped it
    "samzapy.stream",  # the input: system.stream
    "samzapy.partition",  # the input partition
    "samzapy.offset",  # the message's offset in it
    "samzapy.time",  # when it was dropped: ms since the epoch
    "samzapy.operator",  # an application's operator whose function failed (only then)
)

PROCESS_ERRORS_KEY = "task.drop.process.errors"
DESERIALIZATION_ERRORS_KEY = "task.drop.deserialization.errors"


class DroppedEnvelope(ControlEnvelope):
    """A message the consumer could not deserialize and dropped, queued at its offset for its
    task to count as processed (so the checkpoint moves past it, the partition's last record
    too) and to write its dead letter (``record``: None when the job has no dead-letter
    stream)."""

    __slots__ = ("error", "record")

    def __init__(
        self,
        ssp: SystemStreamPartition,
        offset: str,
        record: RawRecord | None,
        error: BaseException,
    ) -> None:
        super().__init__(ssp, offset, None)
        self.record = record
        self.error = error

    @property
    def is_end_of_stream(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"DroppedEnvelope({self.system_stream_partition}, {self.offset!r}, {self.error!r})"


def error_type(exc: BaseException) -> str:
    """``module.Class`` of ``exc`` (a builtin's: ``Class``)."""
    cls = type(exc)
    name = cls.__qualname__
    return name if cls.__module__ == "builtins" else f"{cls.__module__}.{name}"


def dead_letter_headers(
    record: RawRecord,
    error: BaseException,
    *,
    dropped_by: str,
    task: TaskName,
    ssp: SystemStreamPartition,
    offset: str,
    operator: str | None = None,
    now_ms: int | None = None,
) -> list[tuple[str, bytes]]:
    """The input record's headers, then those naming the error and where it happened."""
    ours = [
        str(error),
        error_type(error),
        dropped_by,
        str(task),
        f"{ssp.system}.{ssp.stream}",
        str(ssp.partition),
        offset,
        str(int(time.time() * 1000) if now_ms is None else now_ms),
    ]
    if operator is not None:
        ours.append(operator)
    names = DEAD_LETTER_HEADERS[: len(ours)]
    headers = [*record.headers, *zip(names, (v.encode() for v in ours), strict=True)]
    return headers


class Drops:
    """One task's policy for the messages it cannot process (see the module docstring)."""

    def __init__(
        self,
        task: TaskName,
        *,
        drop_process_errors: bool,
        dead_letter: SystemStream | None = None,
        producer: SystemProducer | None = None,
        counted: Callable[[], object] = lambda: None,
    ) -> None:
        """``producer``: the task's producer of the dead-letter stream's system; ``counted``:
        called once per message dropped by ``task.drop.process.errors``."""
        if dead_letter is not None and producer is None:
            raise ValueError("a dead-letter stream needs the producer of its system")
        self.task = task
        self.drop_process_errors = drop_process_errors
        self.dead_letter_stream = dead_letter
        self._producer = producer
        self._counted = counted
        self._log = DropLog()

    def process_failed(
        self, error: TaskError, env: IncomingMessageEnvelope
    ) -> BaseException | None:
        """The task's call on ``env`` failed with ``error`` (the cause: its own exception).
        Returns the error the task fails with, or None when the message was dropped."""
        cause = error.__cause__ if error.__cause__ is not None else error
        if not self.drop_process_errors or never_dropped(cause):
            return error
        ssp = env.system_stream_partition
        self._counted()
        if (not_logged := self._log.due(ssp)) is not None:
            log.warning(
                "message_dropped",
                task=str(self.task),
                ssp=str(ssp),
                offset=env.offset,
                error=repr(cause),
                not_logged=not_logged,
                **({"operator": error.operator} if error.operator is not None else {}),
                reason=f"the task failed on it and {PROCESS_ERRORS_KEY} is true",
            )
        record = raw_record(env) or RawRecord(env.key, env.message)
        return self._write(record, cause, PROCESS_ERRORS_KEY, ssp, env.offset, error.operator)

    def deserialization_failed(self, env: DroppedEnvelope) -> BaseException | None:
        """Write the dead letter of a message the consumer dropped (logged and counted
        there). Returns the error the task fails with, or None."""
        if env.record is None:  # no dead-letter stream
            return None
        ssp = env.system_stream_partition
        return self._write(env.record, env.error, DESERIALIZATION_ERRORS_KEY, ssp, env.offset)

    def _write(
        self,
        record: RawRecord,
        error: BaseException,
        dropped_by: str,
        ssp: SystemStreamPartition,
        offset: str,
        operator: str | None = None,
    ) -> BaseException | None:
        stream, producer = self.dead_letter_stream, self._producer
        if stream is None or producer is None:
            return None
        headers = dead_letter_headers(
            record,
            error,
            dropped_by=dropped_by,
            task=self.task,
            ssp=ssp,
            offset=offset,
            operator=operator,
        )
        try:
            producer.send_with_headers(stream, None, record.key, record.value, headers)
        except Exception as exc:
            failure = TaskError(
                f"task {str(self.task)!r} cannot write the dead letter of {ssp} at offset "
                f"{offset} to {stream} (task.dead.letter.stream): {exc}",
                task_name=self.task,
                ssp=ssp,
                offset=offset,
            )
            failure.__cause__ = exc
            return failure
        return None


def task_drops(
    config: TaskConfig,
    task: TaskName,
    producers: Mapping[str, SystemProducer],
    counter: Callable[[], Counter],
) -> Drops | None:
    """``task``'s policy, over its producers (under exactly-once, its transactional one), and
    ``counter()``, the ``process-errors`` counter (registered only when it counts); None when
    the job neither drops process errors nor has a dead-letter stream."""
    stream = config.dead_letter_stream
    if not config.drop_process_errors and stream is None:
        return None
    return Drops(
        task,
        drop_process_errors=config.drop_process_errors,
        dead_letter=stream,
        producer=None if stream is None else producers[stream.system],
        counted=counter().inc if config.drop_process_errors else lambda: None,
    )


__all__ = [
    "NotAwaitableError",
    "DEAD_LETTER_HEADERS",
    "DROP_LOG_INTERVAL_S",
    "DropLog",
    "DroppedEnvelope",
    "Drops",
    "dead_letter_headers",
    "error_type",
    "never_dropped",
    "task_drops",
]
