"""What a task's watermarks owe at its next barrier: the task's input watermark
(``on_watermark``), each input stream's watermark (``on_stream_watermark``) and the
watermarks to send to the intermediate streams the job writes.

The control bookkeeping (``TaskControl``) says which moved, at the moment a control message is
taken or a partition ends; this decides it then and delivers it at the barrier, in that order:
the task's hooks first, so whatever they send precedes the watermark downstream.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from samzapy.api.system import SystemStream
from samzapy.api.task import StreamWatermarkListenerTask, WatermarkListenerTask
from samzapy.control.reconcile import TaskControl

log = structlog.get_logger("samzapy.task")

#: ``call(name, hook, *args)``: runs a hook of the task at the barrier.
HookCaller = Callable[..., Coroutine[Any, Any, None]]


class TaskWatermarks:
    """The watermarks due for one task (decided by ``note``, delivered by ``deliver``)."""

    def __init__(self, control: TaskControl, task: Any, name: str) -> None:
        self._control = control
        self._task = task
        self._name = name
        self._per_stream = isinstance(task, StreamWatermarkListenerTask)
        #: The operator task's hook for streams that went idle or active (not a task-API
        #: interface: the task classes' per-stream watermarks stay as they were).
        self._stream_idleness = getattr(task, "on_stream_idleness", None)
        self._input_due: int | None = None
        self._streams_due: dict[SystemStream, int] = {}
        self._stream_idleness_due: dict[SystemStream, bool] = {}
        self._outputs_due: dict[SystemStream, int] = {}
        self._idle_due: dict[SystemStream, int] = {}

    def note(self) -> bool:
        """Decide now which watermarks moved; True when something is due."""
        control = self._control
        watermark = control.advance_input_watermark()
        if watermark is not None:
            self._input_due = watermark
        if self._per_stream:
            self._streams_due.update(control.advance_stream_watermarks())
            if self._stream_idleness is not None:
                self._stream_idleness_due.update(control.advance_stream_idleness())
        moved = control.advance_output_watermarks()
        if moved:
            self._outputs_due.update(moved)
            for ss in moved:
                self._idle_due.pop(ss, None)
        idle = control.advance_output_idleness()
        if idle:
            self._idle_due.update(idle)
            for ss in idle:
                self._outputs_due.pop(ss, None)
        return (
            watermark is not None
            or bool(moved)
            or bool(self._streams_due)
            or bool(self._stream_idleness_due)
            or bool(idle)
        )

    async def deliver(
        self,
        call: HookCaller,
        collector: Any,
        coordinator: Any,
        send: Callable[[SystemStream, int, bool], None],
    ) -> None:
        """Give the task what moved, then ``send`` each output watermark (and tell the outputs
        that went idle: ``send(stream, its watermark, True)``)."""
        watermark, self._input_due = self._input_due, None
        streams, self._streams_due = self._streams_due, {}
        idleness, self._stream_idleness_due = self._stream_idleness_due, {}
        outputs, self._outputs_due = self._outputs_due, {}
        idle, self._idle_due = self._idle_due, {}
        task = self._task
        if watermark is not None:
            log.debug("watermark_advanced", task=self._name, watermark=watermark)
            if isinstance(task, WatermarkListenerTask):
                await call("on_watermark", task.on_watermark, watermark, collector, coordinator)
        for stream, stream_idle in idleness.items():
            assert self._stream_idleness is not None
            await call(
                "on_stream_idleness",
                self._stream_idleness,
                stream,
                stream_idle,
                collector,
                coordinator,
            )
        for stream, stream_watermark in streams.items():
            await call(
                "on_stream_watermark",
                task.on_stream_watermark,
                stream,
                stream_watermark,
                collector,
                coordinator,
            )
        for stream, timestamp in outputs.items():
            send(stream, timestamp, False)
        for stream, timestamp in idle.items():
            send(stream, timestamp, True)


__all__ = ["TaskWatermarks"]
