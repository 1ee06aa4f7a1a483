"""Sends that cannot be made: the error of one that failed after the task's call returned
(``send_failed``), and under exactly-once the producer that refuses every send to a system
without the task's transaction (``RefusingProducer``).

A task's first sends to a stream wait until its partitions are known (``collector.py``), so
they may fail only after the call that made them returned; the error still names the task,
and the partition and offset of the input message whose call sent it. A send to a system
that a ``RefusingProducer`` stands for fails the same way, before its stream is looked up,
created or its system connected: nothing of it reaches that system.
"""

from __future__ import annotations

from typing import Any

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError, TaskError
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


__all__ = ["RefusingProducer", "send_failed"]
