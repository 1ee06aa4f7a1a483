"""Metrics reporters: what publishes a registry's snapshots, and how config names pick one.

A reporter is started once with the container's registry and stopped once at shutdown. The
shipped ``LogReporter`` logs one ``metrics_reported`` event per interval and a last one when it
stops, so the final counts of a job always reach the log. ``prometheus`` names the
``PrometheusReporter`` (``samzapy.metrics.prometheus``). Other reporters are named in config
as ``module:Class`` and built with no arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog
from structlog.typing import FilteringBoundLogger

from samzapy.api.errors import ConfigError
from samzapy.config import ResolvedConfig
from samzapy.config.classes import create
from samzapy.metrics.health import Health
from samzapy.metrics.ports import MetricsReporter
from samzapy.metrics.registry import MetricsRegistry

_REPORTERS_KEY = "metrics.reporters"

log = structlog.get_logger("samzapy.metrics")


class LogReporter(MetricsReporter):
    """Logs the registry's snapshot as a ``metrics_reported`` event every ``interval_ms``.

    The snapshot is the event's ``metrics`` value (group -> name -> value), so a JSON log line
    carries it as structured data. ``sleep`` is injectable so tests can drive the interval.
    """

    def __init__(
        self,
        interval_ms: int,
        logger: FilteringBoundLogger | None = None,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if interval_ms <= 0:
            raise ConfigError(
                f"metrics reporter interval must be a positive number of ms, got {interval_ms!r}"
            )
        self.interval_ms = interval_ms
        self._logger: FilteringBoundLogger = logger or structlog.get_logger()
        self._sleep = sleep
        self._registry: MetricsRegistry | None = None
        self._task: asyncio.Task[None] | None = None
        #: The metrics whose read failed, logged once each (``metric_read_failed``).
        self._failed: set[tuple[str, str]] = set()

    async def start(self, registry: MetricsRegistry) -> None:
        if self._registry is not None:
            raise RuntimeError("LogReporter.start() called twice")
        self._registry = registry
        self._task = asyncio.create_task(self._run(), name="samzapy-log-reporter")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        # wait() rather than awaiting the task: a cancellation of stop() itself must propagate.
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            self._logger.error("metrics_reporter_failed", exc_info=task.exception())
        self.report()

    def report(self) -> None:
        """Log the current snapshot now. A metric whose function fails is left out of it and
        logged once as ``metric_read_failed``, as the Prometheus reporter does: the others,
        the final counts among them, still reach the log."""
        if self._registry is None:
            return
        try:
            snapshot = self._registry.snapshot(self._read_failed)
        except Exception:
            self._logger.exception("metrics_report_failed")
            return
        self._logger.info("metrics_reported", metrics=snapshot)

    def _read_failed(self, group: str, name: str, exc: Exception) -> None:
        if (group, name) not in self._failed:
            self._failed.add((group, name))
            self._logger.error("metric_read_failed", group=group, metric=name, exc_info=exc)

    async def _run(self) -> None:
        interval_s = self.interval_ms / 1000
        while True:
            await self._sleep(interval_s)
            self.report()


def reporter_for(
    name: str, *, interval_ms: int, host: str, port: int, health: Health | None = None
) -> MetricsReporter:
    """The reporter that the ``metrics.reporters`` entry ``name`` designates.

    ``log`` is the ``LogReporter``; ``prometheus`` is the ``PrometheusReporter`` serving on
    ``host``:``port`` and reporting ``health`` (a fresh ``Health`` when None); ``module:Class``
    imports ``Class`` from ``module`` and calls it with no arguments. Any failure is a
    ``ConfigError`` naming ``metrics.reporters``.
    """
    if name == "log":
        return LogReporter(interval_ms)
    if name == "prometheus":
        # Imported here: prometheus_client costs a job that does not serve it 50 ms at start.
        from samzapy.metrics.prometheus import PrometheusReporter

        return PrometheusReporter(host, port, health)
    module_name, sep, class_name = name.partition(":")
    if not sep or not module_name or not class_name:
        raise ConfigError(
            f"{_REPORTERS_KEY}: unknown reporter {name!r}; expected 'log', 'prometheus' or "
            "'module:Class'",
            key=_REPORTERS_KEY,
        )
    reporter: MetricsReporter = create(
        name,
        key=_REPORTERS_KEY,
        base=MetricsReporter,
        what="a samzapy.metrics.MetricsReporter subclass",
    )
    return reporter


async def stop_reporters(reporters: Sequence[MetricsReporter]) -> None:
    """Stop each of ``reporters`` in turn. One whose stop fails (a push to an endpoint gone)
    is logged as ``metrics_reporter_failed``: the others still stop (the log reporter's last
    report among them), and the job's outcome stays what it was."""
    for reporter in reporters:
        try:
            await reporter.stop()
        except Exception:
            kind = type(reporter)
            log.exception(
                "metrics_reporter_failed", reporter=f"{kind.__module__}:{kind.__qualname__}"
            )


async def start_reporters(
    config: ResolvedConfig, registry: MetricsRegistry, health: Health
) -> list[MetricsReporter]:
    """Start the reporters ``metrics.reporters`` names, on ``registry``."""
    cfg = config.metrics
    started: list[MetricsReporter] = []
    for name in cfg.reporters:
        reporter = reporter_for(
            name,
            interval_ms=cfg.reporter_interval_ms,
            host=cfg.prometheus_host,
            port=cfg.prometheus_port,
            health=health,
        )
        await reporter.start(registry)
        started.append(reporter)
    return started


__all__ = ["LogReporter", "MetricsReporter", "reporter_for", "start_reporters", "stop_reporters"]
