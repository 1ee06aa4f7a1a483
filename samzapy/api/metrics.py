"""The metrics a task can record through ``context.metrics`` (Samza's MetricsRegistry): named
counters, gauges and timers in groups; the container's registry implements it and its
reporters publish them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Counter(Protocol):
    """A count that only goes up."""

    def inc(self, n: int = 1) -> None: ...


class Gauge(Protocol):
    """A value set from time to time, or read from a function when reported."""

    def set(self, value: float) -> None: ...


class Timer(Protocol):
    """A distribution of durations, in nanoseconds."""

    def update_ns(self, ns: int) -> None: ...


class MetricsRegistry(Protocol):
    """Creates (or returns the existing) metric of a group, by name."""

    def counter(self, group: str, name: str) -> Counter: ...

    def gauge(self, group: str, name: str, fn: Callable[[], float] | None = None) -> Gauge: ...

    def timer(self, group: str, name: str) -> Timer: ...


__all__ = ["Counter", "Gauge", "MetricsRegistry", "Timer"]
