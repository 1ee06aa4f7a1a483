"""The Prometheus reporter: serves the registry at ``/metrics`` and the probes on one HTTP server.

A small HTTP/1.1 server on the container's event loop (``asyncio.start_server``, one request
per connection) answers:

- ``GET /metrics``: the registry in Prometheus' text format (prometheus-client).
- ``GET /healthz``: 200 ``{"status": "ok"}`` while ``Health.healthy`` (answering at all shows
  the event loop runs), else 503 ``{"status": "unhealthy", "problems": {...}}``.
- ``GET /readyz``: 200 ``{"status": "ready"}`` once ``Health.ready`` and healthy, else 503
  ``{"status": "not ready", "tasks_running": ..., "problems": {...}}`` (``tasks_running``:
  ``Health.ready``, every assigned task restored and running; a stalled task makes the
  container not ready with its tasks running); a container with standby replicas adds
  ``"standbys": {task: {store: {...}}}`` (they do not affect readiness).

``HEAD`` works on the same paths; other methods get 405, other paths 404.

Naming rule, from samzapy's ``(group, name)`` to a Prometheus series:

1. ``sanitize(s)`` replaces each run of characters outside ``[A-Za-z0-9_]`` with ``_`` and
   strips leading and trailing ``_`` (``"messages-processed"`` -> ``messages_processed``);
   an empty result becomes ``_``. Case is kept.
2. A group ``"<kind>.<id>"`` (split at its first dot) gives the metric
   ``samzapy_<sanitize(kind)>_<sanitize(name)>`` with one label ``<sanitize(kind)>="<id>"``, the
   id verbatim: ``("task.Partition 0", "process-latency")`` ->
   ``samzapy_task_process_latency_seconds{task="Partition 0"}``. A label name that would start
   with a digit gets a leading ``_``; ``quantile`` and ``le`` (taken by summaries and
   histograms) become ``quantile_id`` and ``le_id``.
3. A group without a dot gives ``samzapy_<sanitize(group)>_<sanitize(name)>`` and no label:
   ``("container", "commits")`` -> ``samzapy_container_commits``.
4. By kind: a ``Counter`` is a counter family, its sample suffixed ``_total`` (a name already
   ending in ``_total`` is not doubled); a ``Gauge`` is a gauge; a ``Timer`` is a histogram in
   seconds, its name suffixed ``_seconds`` (unless already so), with cumulative
   ``_bucket{le=...}`` samples at ``HISTOGRAM_BOUNDS_S`` and ``+Inf``, ``_count`` and ``_sum``
   (a bucket counts the timer's own log-spaced buckets that lie wholly below its bound, so
   it is exact to within 1/8 of an octave).

5. HELP says what the metric means and its unit, from ``MetricsRegistry.description``
   (the container's metrics are described in ``catalogue.DESCRIPTIONS``):
   ``Time one commit took, flushes and checkpoint write included (seconds).``; a metric
   nobody described says so.

A metric whose series would clash with one already exported in the same scrape (two names that
sanitize alike, or one name used by two kinds) is left out and logged once as
``metric_not_exported``; a gauge whose function fails is left out of each scrape it fails in
and logged once as ``metric_read_failed``.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric as Family
from structlog.typing import FilteringBoundLogger

from samzapy.api.errors import ConfigError
from samzapy.metrics.health import Health
from samzapy.metrics.ports import MetricsReporter
from samzapy.metrics.registry import Counter, Gauge, Metric, MetricsRegistry

_PORT_KEY = "metrics.prometheus.port"
_HOST_KEY = "metrics.prometheus.host"
_PREFIX = "samzapy"
#: The upper bounds (seconds) of the histogram buckets of every timer: 100 µs to 60 s.
HISTOGRAM_BOUNDS_S = (
    *(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05),
    *(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)
_NS_PER_S = 1e9
_INVALID_RUN = re.compile(r"[^A-Za-z0-9_]+")
_RESERVED_LABELS = frozenset({"quantile", "le"})

_LINE_LIMIT = 16 * 1024  # bytes per request or header line
_MAX_HEADERS = 100
_EXCHANGE_TIMEOUT_S = 10.0  # a client that neither sends nor reads cannot hold a connection
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def sanitize(text: str) -> str:
    """``text`` as a Prometheus name fragment: runs of other characters become one ``_``."""
    return _INVALID_RUN.sub("_", text).strip("_") or "_"


def _label_name(kind: str) -> str:
    label = sanitize(kind)
    if label[0].isdigit():
        label = f"_{label}"
    return f"{label}_id" if label in _RESERVED_LABELS else label


def _series_of(group: str) -> tuple[str, dict[str, str]]:
    """The name stem and labels that ``group`` gives its metrics (rules 2 and 3)."""
    kind, dot, ident = group.partition(".")
    stem = f"{_PREFIX}_{sanitize(kind)}"
    return stem, ({_label_name(kind): ident} if dot else {})


def _registered(registry: MetricsRegistry) -> Iterator[tuple[str, str, Metric]]:
    # snapshot() flattens counters and gauges to numbers; the exposition needs each kind.
    yield from registry.items()


class RegistryCollector:
    """A prometheus-client collector that translates a ``MetricsRegistry`` at each scrape."""

    def __init__(self, registry: MetricsRegistry, logger: FilteringBoundLogger) -> None:
        self._registry = registry
        self._logger = logger
        self._reported_clashes: set[tuple[str, str]] = set()
        self._reported_failures: set[tuple[str, str]] = set()

    def collect(self) -> Iterable[Family]:
        """One family per exported name, in registry order (rule 4 in the module docstring)."""
        families: dict[str, Family] = {}
        owners: dict[str, str] = {}  # sample name -> the family that emits it
        series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for group, name, metric in _registered(self._registry):
            stem, labels = _series_of(group)
            base = f"{stem}_{sanitize(name)}"
            if isinstance(metric, Counter):
                typ, family_name = "counter", base.removesuffix("_total")
                sample_names = [f"{family_name}_total"]
            elif isinstance(metric, Gauge):
                typ, family_name = "gauge", base
                sample_names = [family_name]
            else:
                typ = "histogram"
                family_name = base if base.endswith("_seconds") else f"{base}_seconds"
                sample_names = [
                    f"{family_name}_bucket",
                    f"{family_name}_count",
                    f"{family_name}_sum",
                ]
            family = families.get(family_name)
            key = (family_name, tuple(sorted(labels.items())))
            clash = None
            if family is None:
                taken = [n for n in sample_names if n in owners]
                if taken:
                    clash = f"{taken[0]} is already exported by {owners[taken[0]]}"
            elif family.type != typ:
                clash = f"{family_name} is already exported as a {family.type}"
            elif key in series:
                clash = f"{family_name}{dict(key[1])} is already exported"
            if clash is not None:
                self._report_clash(group, name, family_name, clash)
                continue
            try:
                samples = list(_samples(metric, family_name, labels))
            except Exception:
                if (group, name) not in self._reported_failures:
                    self._reported_failures.add((group, name))
                    self._logger.exception("metric_read_failed", group=group, metric=name)
                continue
            if family is None:
                family = families[family_name] = Family(
                    family_name, self._help(group, name, typ, labels), typ
                )
                owners.update(dict.fromkeys(sample_names, family_name))
            series.add(key)
            for sample_name, sample_labels, value in samples:
                family.add_sample(sample_name, sample_labels, value)
        return list(families.values())

    def _help(self, group: str, name: str, typ: str, labels: dict[str, str]) -> str:
        """The HELP text: what the metric means and its unit (rule 5)."""
        described = self._registry.description(name)
        if described is not None:
            unit = f" ({described.unit})" if described.unit else ""
            return f"{described.help}{unit}."
        of = f"groups '{group.partition('.')[0]}.*'" if labels else f"group '{group}'"
        return f"samzapy {typ} '{name}' of {of} (not described)."

    def _report_clash(self, group: str, name: str, family_name: str, reason: str) -> None:
        if (group, name) in self._reported_clashes:
            return
        self._reported_clashes.add((group, name))
        self._logger.warning(
            "metric_not_exported",
            group=group,
            metric=name,
            prometheus_name=family_name,
            reason=reason,
        )


def _samples(
    metric: Metric, family_name: str, labels: dict[str, str]
) -> Iterator[tuple[str, dict[str, str], float]]:
    if isinstance(metric, Counter):
        yield f"{family_name}_total", labels, float(metric.count)
    elif isinstance(metric, Gauge):
        yield family_name, labels, float(metric.value)
    else:
        for bound in HISTOGRAM_BOUNDS_S:
            count = metric.count_at_most_ns(int(bound * _NS_PER_S))
            yield f"{family_name}_bucket", {**labels, "le": str(bound)}, float(count)
        yield f"{family_name}_bucket", {**labels, "le": "+Inf"}, float(metric.count)
        yield f"{family_name}_count", labels, float(metric.count)
        yield f"{family_name}_sum", labels, metric.total_ns / _NS_PER_S


@dataclass(frozen=True, slots=True)
class Response:
    """What the server sends back for one request."""

    status: int
    content_type: str
    body: bytes
    allow: str | None = None

    def encode(self, *, head: bool) -> bytes:
        """The response as bytes: status line, headers and (unless ``head``) the body."""
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS[self.status]}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Cache-Control: no-store",
            "Connection: close",
        ]
        if self.allow is not None:
            lines.append(f"Allow: {self.allow}")
        header = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return header if head else header + self.body


def _json(status: int, payload: dict[str, Any]) -> Response:
    body = json.dumps(payload, sort_keys=True, default=str).encode() + b"\n"
    return Response(status, _JSON, body)


def _text(status: int, text: str) -> Response:
    return Response(status, _TEXT, f"{text}\n".encode())


class PrometheusReporter(MetricsReporter):
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` on ``host``:``port`` from ``start``.

    ``port`` 0 picks a free port; after ``start``, ``port`` is the one bound. Metrics are
    pulled by the scraper, so ``stop`` only closes the server.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9090,
        health: Health | None = None,
        *,
        logger: FilteringBoundLogger | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.health = health if health is not None else Health()
        self._logger: FilteringBoundLogger = logger or structlog.get_logger()
        self._collectors: CollectorRegistry | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self, registry: MetricsRegistry) -> None:
        if self._collectors is not None:
            raise RuntimeError("PrometheusReporter.start() called twice")
        # A registry of our own: the global one would mix in process metrics and other users.
        self._collectors = CollectorRegistry(auto_describe=False)
        self._collectors.register(RegistryCollector(registry, self._logger))
        try:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.port, limit=_LINE_LIMIT
            )
        except OSError as exc:
            in_use = exc.errno in (errno.EADDRINUSE, errno.EACCES)
            raise ConfigError(
                f"{_PORT_KEY if in_use else _HOST_KEY}: cannot serve Prometheus metrics on "
                f"{self.host}:{self.port}: {exc.strerror or exc}; choose another "
                f"{'port' if in_use else 'address'}",
                key=_PORT_KEY if in_use else _HOST_KEY,
            ) from exc
        self.port = self._server.sockets[0].getsockname()[1]
        self._logger.info("metrics_server_started", host=self.host, port=self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        connections = set(self._connections)
        for task in connections:
            task.cancel()
        if connections:
            await asyncio.wait(connections)
        await server.wait_closed()
        self._logger.info("metrics_server_stopped", host=self.host, port=self.port)

    def respond(self, method: str, path: str) -> Response:
        """The response to ``method`` on ``path`` (query string already removed)."""
        if path not in ("/metrics", "/healthz", "/readyz"):
            return _text(404, f"not found: {path}; try /metrics, /healthz or /readyz")
        if method not in ("GET", "HEAD"):
            return Response(405, _TEXT, b"method not allowed\n", allow="GET, HEAD")
        health = self.health
        if path == "/healthz":
            if health.healthy:
                return _json(200, {"status": "ok"})
            return _json(503, {"status": "unhealthy", "problems": health.problems})
        if path == "/readyz":
            standbys = {"standbys": health.standbys} if health.standbys else {}
            if health.ready and health.healthy:
                return _json(200, {"status": "ready", **standbys})
            payload = {
                "status": "not ready",
                "tasks_running": health.ready,
                "problems": health.problems,
            }
            return _json(503, {**payload, **standbys})
        assert self._collectors is not None  # the server runs only after start()
        try:
            body = generate_latest(self._collectors)
        except Exception:
            self._logger.exception("metrics_scrape_failed")
            return _text(500, "collecting metrics failed; see the container log")
        return Response(200, CONTENT_TYPE_LATEST, body)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # asyncio runs each connection's handler as a task
        self._connections.add(task)
        try:
            async with asyncio.timeout(_EXCHANGE_TIMEOUT_S):
                request = await _read_request(reader)
                if request is None:
                    response, method = _text(400, "malformed HTTP request"), "GET"
                else:
                    method, path = request
                    response = self.respond(method, path)
                writer.write(response.encode(head=method == "HEAD"))
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass  # the client went away or stalled; nothing to answer
        except asyncio.CancelledError:
            # stop() cancels open connections. Nothing awaits this task but stop(), and
            # asyncio's stream server (3.12.1) logs a cancelled handler as an error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str] | None:
    """The method and path of one request, after its headers; None when it is malformed."""
    try:
        request_line = await reader.readline()
        for _ in range(_MAX_HEADERS):
            line = await reader.readline()
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                return None
        else:
            return None
    except ValueError:  # a line longer than the limit
        return None
    parts = request_line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    method, target, _version = parts
    return method, target.split("?", 1)[0]


__all__ = ["PrometheusReporter", "RegistryCollector", "Response", "sanitize"]
