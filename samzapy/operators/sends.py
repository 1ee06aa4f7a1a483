"""The operators that write: ``send_to``, ``partition_by``, ``broadcast``, and ``sink``.

Each sends through the task's collector (``send``, bound once the task gets it), or hands the
message to the user's sink with the collector and coordinator (``TaskIO``). A failed send is
the operator's failure; a message ``partition_by`` or ``broadcast`` cannot serialize names the
operator and its serde.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from samzapy.api.envelope import KV, OutgoingMessageEnvelope
from samzapy.api.errors import OperatorError, SamzapyError, SerdeError
from samzapy.api.system import SystemStream
from samzapy.operators.awaiting import not_awaited
from samzapy.operators.impl import OperatorImpl


def _nothing(envelope: OutgoingMessageEnvelope) -> None:
    return None


class TaskIO:
    """The task's collector and coordinator, as ``sink`` hands them to its function."""

    __slots__ = ("collector", "coordinator")

    def __init__(self) -> None:
        self.collector: Any = None
        self.coordinator: Any = None


class SendingOperator(OperatorImpl):
    """An operator that sends to a stream: ``send`` is the task's collector's, bound when the
    task gets its collector (one attribute on the hot path)."""

    __slots__ = ("clock", "send", "stream")

    def __init__(self, op_id: str, stream: SystemStream) -> None:
        super().__init__(op_id)
        self.stream = stream
        self.send: Callable[[OutgoingMessageEnvelope], None] = _nothing
        #: The graph's event clock when it keeps event time: sends carry the message's time.
        self.clock: Any = None

    def transform(self, message: Any) -> list[Any]:
        self.on_message(message)
        return []


class SinkOperator(OperatorImpl):
    kind = "sink"
    __slots__ = ("fn", "io")

    def __init__(self, op_id: str, fn: Callable[[Any, Any, Any], Any], io: TaskIO) -> None:
        super().__init__(op_id)
        self.fn = fn
        self.io = io

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        io = self.io
        try:
            result = self.fn(message, io.collector, io.coordinator)
        except Exception as exc:
            raise self.failed(exc) from exc
        if result is not None and inspect.iscoroutine(result):  # it would never run
            error = not_awaited(result, "sink's function")
            raise self.failed(error) from error
        return None

    def transform(self, message: Any) -> list[Any]:
        self.on_message(message)
        return []


class SendToOperator(SendingOperator):
    """Sends each message to its output stream: a ``KV``'s key with its value, anything else
    with no key."""

    kind = "send_to"
    __slots__ = ()

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        if type(message) is KV:
            envelope = OutgoingMessageEnvelope(self.stream, message[1], message[0])
        else:
            envelope = OutgoingMessageEnvelope(self.stream, message)
        if self.clock is not None:
            envelope.timestamp = self.clock.t
        try:
            self.send(envelope)
        except Exception as exc:
            raise self.failed(exc, f"send to {self.stream}") from exc
        return None


class PartitionByOperator(SendingOperator):
    """Sends ``KV(key_fn(m), value_fn(m))`` to the intermediate stream, partitioned by the key."""

    kind = "partition_by"
    __slots__ = ("key_fn", "serde", "value_fn")

    def __init__(
        self,
        op_id: str,
        stream: SystemStream,
        key_fn: Callable[[Any], Any],
        value_fn: Callable[[Any], Any],
        serde: str,
    ) -> None:
        super().__init__(op_id, stream)
        self.key_fn = key_fn
        self.value_fn = value_fn
        self.serde = serde

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        try:
            key = self.key_fn(message)
        except Exception as exc:
            raise self.failed(exc, "key function") from exc
        try:
            value = self.value_fn(message)
        except Exception as exc:
            raise self.failed(exc, "value function") from exc
        envelope = OutgoingMessageEnvelope(self.stream, value, key)
        if self.clock is not None:
            envelope.timestamp = self.clock.t
        try:
            self.send(envelope)
        except SerdeError as exc:
            raise self.unserializable(exc) from exc
        except Exception as exc:
            raise self.failed(exc, f"send to {self.stream}") from exc
        return None

    def unserializable(self, exc: SerdeError) -> OperatorError:
        self.failures += 1
        return OperatorError(
            f"operator {self.op_id!r} (partition_by) cannot serialize a message with its "
            f"serde {self.serde}: {exc}",
            op_id=self.op_id,
            kind=self.kind,
        )


class BroadcastOperator(SendingOperator):
    """Sends each message to the one partition of the broadcast stream every task reads; to a
    ``keyed`` one (a ``KVSerde``'s), a ``KV`` as its key and value."""

    kind = "broadcast"
    __slots__ = ("keyed", "serde")

    def __init__(self, op_id: str, stream: SystemStream, serde: str, keyed: bool) -> None:
        super().__init__(op_id, stream)
        self.serde = serde
        self.keyed = keyed

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        if self.keyed and type(message) is KV:
            envelope = OutgoingMessageEnvelope(self.stream, message[1], message[0], partition=0)
        else:
            envelope = OutgoingMessageEnvelope(self.stream, message, partition=0)
        if self.clock is not None:  # the stream's frames carry the message's event time
            envelope.timestamp = self.clock.t
        try:
            self.send(envelope)
        except SerdeError as exc:
            self.failures += 1
            raise OperatorError(
                f"operator {self.op_id!r} (broadcast) cannot serialize a message with its "
                f"serde {self.serde}: {exc}",
                op_id=self.op_id,
                kind=self.kind,
            ) from exc
        except SamzapyError as exc:
            raise self.failed(exc, f"send to {self.stream}") from exc
        return None

    def transform(self, message: Any) -> list[Any]:
        self.on_message(message)
        return []


__all__ = [
    "BroadcastOperator",
    "PartitionByOperator",
    "SendToOperator",
    "SendingOperator",
    "SinkOperator",
    "TaskIO",
]
