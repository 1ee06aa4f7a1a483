"""TableMetrics: what one task's instance of a table counts, and how it joins a registry.

Plain ints on the hot path (a read adds one to ``gets``; no lookup, no lock: a table belongs
to one task, on one event loop), read by the registry when it reports, as the container's own
counters are (``Counter.of``). Only the remote call latency is a registry Timer, a
distribution; ``register`` swaps the table's private timer for the registry's.

Every table counts its reads (``gets``), writes (``puts``) and deletions (``deletes``) per
key: ``get_all`` of three keys adds three. A caching table counts its hits and misses (a read
that shares another's read of the table under way is a hit: misses are the keys it read); a
remote table its calls' latency (one sample per attempt, in nanoseconds), its retries, the
calls that failed for good (``failures``) and the calls that waited for the rate limiter
(``rate_limit_waits``, and the time they waited, ``rate_limit_wait_ns``, published in
seconds as Prometheus wants a duration).
"""

from __future__ import annotations

from collections.abc import Callable

from samzapy.metrics.registry import MetricsRegistry, Timer

# (attribute, metric name suffix, help, unit): the counters ``register`` publishes.
_COUNTERS = (
    ("gets", "gets", "Keys read from table {id}", "keys"),
    ("puts", "puts", "Keys written to table {id}", "keys"),
    ("deletes", "deletes", "Keys deleted from table {id}", "keys"),
    (
        "cache_hits",
        "cache-hits",
        "Reads of table {id} its cache answered, or that shared a read under way",
        "keys",
    ),
    (
        "cache_misses",
        "cache-misses",
        "Keys table {id} read from the table behind its cache",
        "keys",
    ),
    ("retries", "retries", "Calls of remote table {id} tried again after a failure", "calls"),
    ("failures", "failures", "Calls of remote table {id} that failed for good", "calls"),
    (
        "rate_limit_waits",
        "rate-limit-waits",
        "Calls of remote table {id} that waited for its rate limiter",
        "calls",
    ),
    (
        "rate_limit_wait_seconds",
        "rate-limit-wait-seconds",
        "Time calls of remote table {id} waited for its rate limiter",
        "seconds",
    ),
)


class TableMetrics:
    """The counts of one task's instance of table ``table_id`` (see the module docstring)."""

    __slots__ = (
        "cache_hits",
        "cache_misses",
        "call_latency",
        "deletes",
        "failures",
        "gets",
        "puts",
        "rate_limit_wait_ns",
        "rate_limit_waits",
        "retries",
        "table_id",
    )

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.gets = 0
        self.puts = 0
        self.deletes = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self.retries = 0
        self.failures = 0
        self.rate_limit_waits = 0
        self.rate_limit_wait_ns = 0
        #: One sample per remote call (each attempt), in nanoseconds.
        self.call_latency: Timer = Timer()

    def register(self, registry: MetricsRegistry, group: str) -> None:
        """Publish the counts in ``group`` of ``registry`` (``task.<task name>``, say) as
        ``<table_id>-gets``, ``-puts``, ``-deletes``, ``-cache-hits``, ``-cache-misses``,
        ``-retries``, ``-failures``, ``-rate-limit-waits``, ``-rate-limit-wait-seconds`` (counters
        read from this object) and ``<table_id>-call-latency`` (the registry's timer, which
        the table records into from now on)."""
        table_id = self.table_id
        for attribute, suffix, help, unit in _COUNTERS:
            registry.counter(
                group,
                f"{table_id}-{suffix}",
                self._reader(attribute),
                help=help.format(id=table_id),
                unit=unit,
            )
        self.call_latency = registry.timer(
            group,
            f"{table_id}-call-latency",
            help=f"Time of each call (each attempt) of remote table {table_id}",
        )

    @property
    def rate_limit_wait_seconds(self) -> float:
        return self.rate_limit_wait_ns / 1e9

    def _reader(self, attribute: str) -> Callable[[], float]:
        return lambda: getattr(self, attribute)

    def __repr__(self) -> str:
        return (
            f"TableMetrics({self.table_id!r}, gets={self.gets}, puts={self.puts}, "
            f"deletes={self.deletes}, hits={self.cache_hits}, misses={self.cache_misses}, "
            f"retries={self.retries}, failures={self.failures})"
        )


__all__ = ["TableMetrics"]
