"""The task interfaces a job author mixes into a task class.

A task class is instantiated once per task (one per input partition). Each interface is a
marker class with the method the container calls; ``init``, ``window``, ``close`` and
``on_end_of_stream`` may be plain functions or coroutine functions.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samzapy.api.context import MessageCollector, TaskContext, TaskCoordinator
    from samzapy.api.envelope import IncomingMessageEnvelope
    from samzapy.api.system import SystemStream


class StreamTask:
    """A synchronous task: ``process`` returns when the message is fully processed."""

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        raise NotImplementedError


class AsyncStreamTask:
    """An asynchronous task: ``process_async`` returns an awaitable that completes when the
    message is fully processed (a coroutine, an ``asyncio.Future`` or a
    ``concurrent.futures.Future`` completed from any thread)."""

    def process_async(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Awaitable[Any] | Any:
        raise NotImplementedError


class InitableTask:
    """Called once before the first message, with the task's context."""

    def init(self, context: TaskContext) -> Awaitable[None] | None:
        raise NotImplementedError


class WindowableTask:
    """Called every ``task.window.ms`` when nothing of the task is in flight."""

    def window(
        self, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> Awaitable[None] | None:
        raise NotImplementedError


class ClosableTask:
    """Called once when the container shuts the task down."""

    def close(self) -> Awaitable[None] | None:
        raise NotImplementedError


class EndOfStreamListenerTask:
    """Called once when every input partition of the task has reached end-of-stream."""

    def on_end_of_stream(
        self, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> Awaitable[None] | None:
        raise NotImplementedError


class WatermarkListenerTask:
    """Called when the task's input watermark moves forward: every input partition that
    carries watermarks has reported event time up to ``watermark`` (milliseconds since the
    epoch). Runs, like ``window``, when nothing of the task is in flight."""

    def on_watermark(
        self, watermark: int, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> Awaitable[None] | None:
        raise NotImplementedError


class StreamWatermarkListenerTask:
    """Called when the watermark of one of the task's input streams moves forward: every
    partition of ``stream`` the task reads that carries watermarks has reported event time up
    to ``watermark``; ``END_WATERMARK`` once they all ended (also for a stream that carries
    none, upstream of an intermediate stream the task writes: before that stream's
    end-of-stream is sent, what the call sends precedes it). Runs, like ``on_watermark`` and
    just after it, when nothing of the task is in flight (the operator task of applications
    uses it: a window's watermark is the minimum over the streams that reach it)."""

    def on_stream_watermark(
        self,
        stream: SystemStream,
        watermark: int,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Awaitable[None] | None:
        raise NotImplementedError


#: The watermark of a stream whose partitions all ended: no message is still to come.
END_WATERMARK = 2**63 - 1


__all__ = [
    "END_WATERMARK",
    "StreamWatermarkListenerTask",
    "AsyncStreamTask",
    "ClosableTask",
    "EndOfStreamListenerTask",
    "InitableTask",
    "StreamTask",
    "WatermarkListenerTask",
    "WindowableTask",
]
