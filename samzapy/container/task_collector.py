"""A task's MessageCollector, and which input message the task's call in progress is for.

A send is routed at once when its stream's partitions are known; the first sends to a stream
wait until they are (``collector.py``), and may fail only then, after the call that made them
returned. So each send carries the input message of the call that made it, and such a failure
names the task, that message's partition and its offset, as a failure in the call itself does.

A sync task's call on the thread pool that outlasts ``task.shutdown.ms`` cannot be cancelled:
it runs on in its thread while its task is closed and committed, the checkpoint leaving its
message out. What it sends once the task is closed is dropped, as the loop takes it
(``MessageInProgress.from_call``): counted in ``sends-dropped``, logged once per task
(``sends_dropped``). Sends from other threads (ones the task made) are delivered as ever.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.system import TaskName
from samzapy.container.collector import OutputRouter
from samzapy.container.pool import in_task_pool as _in_task_pool

log = structlog.get_logger("samzapy.task")

_thread = threading.get_ident
_current_task = asyncio.current_task


class MessageInProgress:
    """Which input message the task's call in progress is for, so that a send that fails
    later, once its stream's partitions are known, still names its partition and offset. A
    sync task's slot sets ``env`` around its calls. Each slot of an async task (an asyncio
    task awaiting its calls one at a time) sets its entry in ``calls`` around each call: a
    send made in the slot's own asyncio task names that call's message, one made in a task
    the call created names none. (A context variable would follow those too, but setting
    one per call cost a quarter of the CPU of a call that sleeps, measured.)

    ``closed``: the task was closed, a sync task's call on the thread pool still running
    then was given up (its sends are dropped, ``from_call``)."""

    __slots__ = ("_on_dropped", "calls", "closed", "dropped", "env", "is_async")

    def __init__(
        self, *, is_async: bool = False, on_dropped: Callable[[], object] = lambda: None
    ) -> None:
        """``on_dropped``: counts a send dropped (``from_call``)."""
        self.is_async = is_async
        self.env: IncomingMessageEnvelope | None = None
        self.calls: dict[asyncio.Task[Any] | None, IncomingMessageEnvelope | None] = {}
        self.closed = False
        self.dropped = 0
        self._on_dropped = on_dropped

    def from_call(
        self, send: Callable[..., None], envelope: OutgoingMessageEnvelope, task: Any, *rest: Any
    ) -> None:
        """On the loop: ``send`` a send the task's call on the thread pool made, unless the
        task was closed meanwhile (the call was given up): then it is dropped."""
        if not self.closed:
            send(envelope, task, *rest)
            return
        if not self.dropped:
            log.warning(
                "sends_dropped",
                task=task,
                stream=str(envelope.system_stream),
                reason="a call on the thread pool that outlasted task.shutdown.ms sends after "
                "its task was closed: not delivered (the checkpoint leaves its message out); "
                "its later sends are counted in sends-dropped",
            )
        self.dropped += 1
        self._on_dropped()


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
            route = self._router.send_from_thread
            if _in_task_pool():  # the task's call on the thread pool: dropped once closed
                self._loop.call_soon_threadsafe(
                    current.from_call, route, envelope, self._task, None, env
                )
                return
            self._loop.call_soon_threadsafe(route, envelope, self._task, None, env)


__all__ = ["MessageInProgress", "TaskCollector"]
