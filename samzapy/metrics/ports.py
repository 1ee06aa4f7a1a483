"""The reporter port: what publishes a metrics registry, from start to stop."""

from __future__ import annotations

import abc

from samzapy.metrics.registry import MetricsRegistry


class MetricsReporter(abc.ABC):
    """Publishes the metrics of one registry from ``start`` until ``stop``."""

    @abc.abstractmethod
    async def start(self, registry: MetricsRegistry) -> None:
        """Begin reporting ``registry``; return promptly (run periodic work in a task)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop reporting, after publishing the final values. Called once, after ``start``."""


__all__ = ["MetricsReporter"]
