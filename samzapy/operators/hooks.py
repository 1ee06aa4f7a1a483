"""The operator task's hooks that windows fire in: the tick (``task.window.ms``), each input
stream's watermark, and end-of-stream. Each binds the collector first (a hook may come before
any message did), then returns what the panes it fired still owe asynchronous operators (that
awaitable raises what failed as they fired, once the panes before it completed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from samzapy.api.context import MessageCollector, TaskCoordinator
from samzapy.api.system import SystemStream
from samzapy.api.task import (
    END_WATERMARK,
    EndOfStreamListenerTask,
    StreamWatermarkListenerTask,
    WindowableTask,
)
from samzapy.operators.windows import gather_pending


class WindowHooks(WindowableTask, EndOfStreamListenerTask, StreamWatermarkListenerTask):
    """Mixed into the operator task, which has ``graph`` and ``_bind``."""

    graph: Any

    def _bind(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        raise NotImplementedError

    #: Monotonic seconds, which the idle timeouts of generated watermarks read.
    _now: Callable[[], float] = staticmethod(time.monotonic)

    def use_clock(self, context: Any) -> None:
        """Processing-time windows, triggers and joins, and the idle timeouts of generated
        watermarks, read the container's clock, which the context gives (a ManualClock under
        ``TestRunner``), rather than the wall clock and ``time.monotonic``."""
        time_ms = getattr(context, "time_ms", None)
        if time_ms is not None:
            for op in [*self.graph.windows, *self.graph.joins]:
                op.now_ms = time_ms
        now = getattr(context, "now", None)
        if now is not None:
            self._now = now

    def window(self, collector: MessageCollector, coordinator: TaskCoordinator) -> Any:
        """The tick (``task.window.ms``): idle streams, processing-time panes, timed triggers,
        and joins sweeping what expired."""
        graph = self.graph
        if not graph.windows and not graph.joins:
            return None
        self._bind(collector, coordinator)

        def tick() -> None:
            graph.watermarks.tick(self._now())
            for window in graph.windows:
                window.tick()
            for join in graph.joins:
                join.tick()

        return self._fire(tick)

    def on_stream_watermark(
        self,
        stream: SystemStream,
        watermark: int,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Any:
        """A stream's watermark moved (event time); ``END_WATERMARK``: it ended, and so do
        the windows whose streams all ended (``Watermarks.ended``), in either time domain."""
        graph = self.graph
        ended = watermark == END_WATERMARK and graph.windows
        if not graph.event_time and not ended:
            return None
        self._bind(collector, coordinator)

        def moved() -> None:
            if graph.event_time:
                graph.watermarks.received(stream, watermark)
            if ended:
                graph.watermarks.ended(stream)

        return self._fire(moved)

    def on_stream_idleness(
        self,
        stream: SystemStream,
        idle: bool,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Any:
        """Every partition of ``stream`` in this task went idle (or one is active again): in
        event time, the windows reading it beside other streams leave it out of their
        minimum meanwhile."""
        graph = self.graph
        if not graph.event_time:
            return None
        self._bind(collector, coordinator)
        return self._fire(lambda: graph.watermarks.stream_idleness(stream, idle))

    def on_end_of_stream(self, collector: MessageCollector, coordinator: TaskCoordinator) -> Any:
        """Every input ended: every open window fires."""
        graph = self.graph
        if not graph.windows:
            return None
        self._bind(collector, coordinator)

        def end() -> None:
            for window in graph.windows:
                window.end_of_stream()

        return self._fire(end)

    def _fire(self, fire: Callable[[], None]) -> Any:
        """``fire()``, then what its panes owe. When a pane fails after others went on (their
        ``flat_map_async`` calls started), those are awaited all the same, then the pane's
        failure raised: none is left never awaited, nor to a later message's processing."""
        try:
            fire()
        except Exception as exc:
            return gather_pending(self.graph.pending, exc)
        return gather_pending(self.graph.pending)


__all__ = ["WindowHooks"]
