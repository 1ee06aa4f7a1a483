"""A task's MessageCollector, and which input message the task's call in progress is for.

A send is routed at once when its stream's partitions are known; the first sends to a stream
wait until they are (``collector.py``), and may fail only then, after the call that made them
returned. So each send carries the input message of the call that made it, and such a failure
names the task, that message's partition and its offset, as a failure in the call itself does.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from samzapy.api.envelope import IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.system import TaskName
from samzapy.container.collector import OutputRouter

_thread = threading.get_ident
_current_task = asyncio.current_task


class MessageInProgress:
    """Which input message the task's call in progress is for, so that a send that fails
    later, once its stream's partitions are known, still names its partition and offset. A
    sync task's slot sets ``env`` around its calls. Each slot of an async task (an asyncio
    task awaiting its calls one at a time) sets its entry in ``calls`` around each call: a
    send made in the slot's own asyncio task names that call's message, one made in a task
    the call created names none. (A context variable would follow those too, but setting
    one per call cost a quarter of the CPU of a call that sleeps, measured.)"""

    __slots__ = ("calls", "env", "is_async")

    def __init__(self, *, is_async: bool = False) -> None:
        self.is_async = is_async
        self.env: IncomingMessageEnvelope | None = None
        self.calls: dict[asyncio.Task[Any] | None, IncomingMessageEnvelope | None] = {}


class TaskCollector:
    """A task's MessageCollector. Thread-safe: a send from another thread is handed to the
    event loop. When the call that made it runs on the thread pool, the send is routed ahead
    of the call's completion. When the call runs on the loop thread, the send waits until
    the task yields, after the call's own sends, and possibly after a barrier."""

    __slots__ = ("_current", "_loop", "_loop_thread", "_route", "_router", "_task")

    def __init__(
        self,
        router: OutputRouter,
        loop: asyncio.AbstractEventLoop,
        task: TaskName | None = None,
        current: MessageInProgress | None = None,
    ) -> None:
        self._router = router
        self._route = router.send
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._task = task
        self._current = current if current is not None else MessageInProgress()

    def send(self, envelope: OutgoingMessageEnvelope) -> None:
        current = self._current
        if _thread() == self._loop_thread:
            env = current.calls.get(_current_task()) if current.is_async else current.env
            self._route(envelope, self._task, None, env)
        else:  # an async task's send from a thread names no call: several may be in flight
            env = None if current.is_async else current.env
            self._loop.call_soon_threadsafe(
                self._router.send_from_thread, envelope, self._task, None, env
            )


__all__ = ["MessageInProgress", "TaskCollector"]
