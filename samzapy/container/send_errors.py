"""Sends that cannot be made: the error of one that failed after the task's call returned
(``send_failed``), and under exactly-once the producer that refuses every send to a system
without the task's transaction (``RefusingProducer``).

A task's first sends to a stream wait until its partitions are known (``collector.py``), so
they may fail only after the call that made them returned; the error still names the task,
and the partition and offset of the input message whose call sent it. A send to a system
that a ``RefusingProducer`` stands for fails the same way, before its stream is looked up,
created or its system connected: nothing of it reaches that system.

The others: a message a framed stream cannot carry (not bytes once serialized), a partition
the stream does not have, and a send to an intermediate stream after the sending task told it
its end (``sent_after_end``): that stream's readers may have finished, so it fails the task
rather than vanish.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import SerdeError, StreamSystemError, TaskError
from samzapy.api.system import SystemStream, TaskName
from samzapy.system.ports import SystemProducer


def send_failed(
    exc: Exception, task: TaskName, origin: IncomingMessageEnvelope | None
) -> TaskError:
    """A send of ``task`` failed after its call returned: the error names the task and, when
    the send was made by a call for an input message, that message's partition and offset."""
    if origin is None:
        return TaskError(f"a send of task {task!r} failed: {exc}", task_name=task)
    ssp = origin.system_stream_partition
    return TaskError(
        f"a send of task {task!r} (processing {ssp} at offset {origin.offset}) failed: {exc}",
        task_name=task,
        ssp=ssp,
        offset=origin.offset,
    )


def framable(stream: SystemStream, message: Any) -> bytes:
    """``message`` as a framed stream's record body: bytes, else a SerdeError."""
    if isinstance(message, bytes):
        return message
    raise SerdeError(
        f"{stream} is framed (samza.intermediate or samza.framed) and needs its messages "
        f"serialized to bytes, got {type(message).__name__}: set the stream's samza.msg.serde "
        "(for example json)"
    )


def refused(stream: SystemStream, what: str, exc: Exception) -> SerdeError:
    """The key, partition key or message of a send to ``stream`` that its serde refused."""
    part = "message" if what == "message" else "key"
    reason = str(exc) if isinstance(exc, SerdeError) else f"{type(exc).__name__}: {exc}"
    return SerdeError(f"cannot send to {stream}: the {part} serde refused the {what}: {reason}")


class OutOfRange(NamedTuple):
    """What a send to a partition a stream does not have was: ``partition`` of
    ``system_stream``, which has ``partitions``."""

    system_stream: SystemStream
    partition: int
    partitions: int

    def error(self, remedy: str) -> StreamSystemError:
        """The error of the send, ``remedy`` saying how to give the stream more partitions
        (a TestRunner tells its own way); ``out_of_range_of`` reads this back from it."""
        ss, partition, partitions = self
        error = StreamSystemError(
            f"partition {partition} is out of range for {ss}, which has {partitions} "
            f"partitions: send to a partition from 0 to {partitions - 1}, or give the stream "
            f"more partitions ({remedy})"
        )
        # A plain StreamSystemError, as the job logs it; the facts ride along for a runner.
        setattr(error, _OUT_OF_RANGE, self)
        return error


_OUT_OF_RANGE = "samzapy_out_of_range"


def out_of_range(
    partition: int, stream: SystemStream, partitions: int, stream_id: Callable[[SystemStream], str]
) -> StreamSystemError:
    """A send to a partition ``stream`` does not have."""
    remedy = f"streams.{stream_id(stream)}.partitions, used when samzapy creates the stream"
    return OutOfRange(stream, partition, partitions).error(remedy)


def out_of_range_of(error: BaseException | None) -> OutOfRange | None:
    """The send ``error`` (from ``out_of_range``) was; None for any other error."""
    found = getattr(error, _OUT_OF_RANGE, None)
    return found if isinstance(found, OutOfRange) else None


def sent_after_end(stream: SystemStream, task: TaskName | None) -> StreamSystemError:
    """A send of ``task`` to an intermediate stream it already sent its end-of-stream to."""
    return StreamSystemError(
        f"task {task!r} sent to {stream} after its end-of-stream: its partitions of the "
        "stream's upstream inputs (streams.<id>.samza.upstream.inputs) all ended, so it told "
        "the stream's readers it would write nothing more, and they may have finished: the "
        "message would never be read. Send it before then: from process, window, on_watermark "
        "or on_stream_watermark (StreamWatermarkListenerTask, called with END_WATERMARK for an "
        "upstream input just before the end is sent), not from on_end_of_stream, which runs "
        "once every input of the task, the intermediate stream too, ended"
    )


class RefusingProducer(SystemProducer):
    """Under exactly-once, the producer of every system but the transactional one: a task's
    outputs commit in a transaction of that kafka system, and no other system has one."""

    def __init__(self, system: str, transactional: str) -> None:
        self._system = system
        self._transactional = transactional

    def refusal(self, system_stream: SystemStream) -> StreamSystemError:
        """The error a send to ``system_stream`` fails with."""
        return StreamSystemError(
            f"cannot send to {system_stream}: task.processing.guarantee is exactly-once, and "
            f"a task's outputs commit in a transaction of kafka system "
            f"{self._transactional!r}; system {self._system!r} has none"
        )

    def send(
        self, system_stream: SystemStream, partition: int | None, key: Any, message: Any
    ) -> None:
        raise self.refusal(system_stream)

    def send_with_headers(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
        headers: Any,
    ) -> None:
        self.send(system_stream, partition, key, message)

    async def flush(self) -> None:
        return None


__all__ = [
    "OutOfRange",
    "RefusingProducer",
    "framable",
    "out_of_range",
    "out_of_range_of",
    "refused",
    "send_failed",
    "sent_after_end",
]
