"""The metrics registry: counters, gauges and timers by group and name, and their snapshot.

Pure and synchronous. The container updates metrics on the hot path (once or more per
message), so an update is a slot write or two: no locks (everything runs on one event loop),
no allocation of containers, no clock reads. Reporters read the registry with ``snapshot()``.

Timers keep an approximate latency histogram in fixed, log-spaced buckets (eight linear
sub-buckets per power of two, in the manner of an HDR histogram). A percentile is reported as
the middle of its bucket, so it is off by at most half a bucket: 1/16 = 6.25 % of the value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from samzapy.metrics.catalogue import DESCRIPTIONS, Description

_SUB_BITS = 3
_SUB_COUNT = 1 << _SUB_BITS  # linear sub-buckets per power of two
# Values below 2 * _SUB_COUNT ns get a bucket each; above, a bucket spans 1/8 of its octave.
_MAX_SHIFT = 37  # octaves up to 2**41 ns (about 36 minutes); longer durations clamp
_BUCKET_COUNT = _SUB_COUNT * _MAX_SHIFT + 2 * _SUB_COUNT
_NS_PER_MS = 1_000_000


#: The bucket of each duration from ``_FAST_LOW`` to below ``_FAST_HIGH`` ns (a message's
#: usual range: 512 ns to 2 ms), at ``ns >> _FAST_SHIFT``: exact there, where every bucket
#: spans a multiple of 2**_FAST_SHIFT ns. ``Timer.update_all_ns`` looks it up rather than
#: computing it: the per-message cost of the hot path's latency timer halves.
_FAST_SHIFT = 6
_FAST_LOW = 1 << (_FAST_SHIFT + _SUB_BITS)
_FAST_HIGH = 1 << 21


def _fast_buckets() -> list[int]:
    table = [0] * (_FAST_LOW >> _FAST_SHIFT)  # below _FAST_LOW: never looked up
    for octave in range(_FAST_SHIFT + _SUB_BITS, _FAST_HIGH.bit_length() - 1):
        shift = octave - _SUB_BITS
        for top in range(_SUB_COUNT, 2 * _SUB_COUNT):
            table += [_SUB_COUNT * shift + top] * (1 << (shift - _FAST_SHIFT))
    return table


_FAST = _fast_buckets()


def _bucket_bounds(index: int) -> tuple[int, int]:
    """The half-open range ``[low, high)`` of nanoseconds that fall into bucket ``index``."""
    if index < 2 * _SUB_COUNT:
        return index, index + 1
    shift = index // _SUB_COUNT - 1
    top = index - _SUB_COUNT * shift
    return top << shift, (top + 1) << shift


class Counter:
    """A count that only goes up, such as messages processed."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    @classmethod
    def of(cls, fn: Callable[[], float]) -> Counter:
        """A counter whose count is ``fn()``, read each time: for a count its owner already
        keeps (``lambda: run_loop.processed``), so the hot path pays nothing. ``fn`` must
        never go down for the life of the registry; it may be a float (seconds spent)."""
        return _ReadCounter(fn)

    def inc(self, n: int = 1) -> None:
        """Add ``n`` (default 1) to the count."""
        self.count += n

    def __repr__(self) -> str:
        return f"Counter(count={self.count})"


class _ReadCounter(Counter):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], float]) -> None:
        self._fn = fn

    @property
    def count(self) -> float:  # type: ignore[override]
        return self._fn()

    def inc(self, n: int = 1) -> None:
        raise TypeError("this counter reads its count from a function; inc() is not allowed")


class Gauge:
    """A value that goes up and down, set by its owner or read from a function at snapshot time."""

    __slots__ = ("_fn", "_value")

    def __init__(self, value: float = 0) -> None:
        self._value: float = value
        self._fn: Callable[[], float] | None = None

    @classmethod
    def of(cls, fn: Callable[[], float]) -> Gauge:
        """A gauge whose value is ``fn()``, called each time the value is read."""
        gauge = cls()
        gauge._fn = fn
        return gauge

    @property
    def value(self) -> float:
        """The last value set, or the function's current result for a gauge made by ``of``."""
        fn = self._fn
        return self._value if fn is None else fn()

    def set(self, value: float) -> None:
        """Set the value. A gauge made by ``of`` reads its function instead and refuses this."""
        if self._fn is not None:
            raise TypeError("this gauge reads its value from a function; set() is not allowed")
        self._value = value

    def __repr__(self) -> str:
        source = "fn" if self._fn is not None else repr(self._value)
        return f"Gauge(value={source})"


class Timer:
    """Durations in nanoseconds: count, total, maximum, mean and approximate percentiles."""

    __slots__ = ("_buckets", "count", "max_ns", "total_ns")

    def __init__(self) -> None:
        self.count = 0
        self.total_ns = 0
        self.max_ns = 0
        self._buckets = [0] * _BUCKET_COUNT

    def update_ns(self, ns: int) -> None:
        """Record one duration of ``ns`` nanoseconds (negative durations count as 0)."""
        self.count += 1
        if ns <= 0:
            self._buckets[0] += 1
            return
        self.total_ns += ns
        if ns > self.max_ns:
            self.max_ns = ns
        if ns < 2 * _SUB_COUNT:
            self._buckets[ns] += 1
            return
        shift = ns.bit_length() - (_SUB_BITS + 1)
        if shift > _MAX_SHIFT:
            self._buckets[_BUCKET_COUNT - 1] += 1
        else:
            self._buckets[_SUB_COUNT * shift + (ns >> shift)] += 1

    def update_all_ns(self, durations: list[int]) -> None:
        """Record each of ``durations`` (nanoseconds), as ``update_ns`` would one by one: the
        hot path records a turn of calls at once."""
        buckets = self._buckets
        count = len(durations)
        if count and min(durations) >= _FAST_LOW and (high := max(durations)) < _FAST_HIGH:
            fast = _FAST
            for ns in durations:
                buckets[fast[ns >> _FAST_SHIFT]] += 1
            self.count += count
            self.total_ns += sum(durations)
            if high > self.max_ns:
                self.max_ns = high
            return
        # A turn with a duration outside the table's range: the table for the others.
        fast, low, high = _FAST, _FAST_LOW, _FAST_HIGH
        total = 0
        top = self.max_ns
        for ns in durations:
            if low <= ns < high:
                buckets[fast[ns >> _FAST_SHIFT]] += 1
                total += ns
                if ns > top:
                    top = ns
                continue
            if ns <= 0:
                buckets[0] += 1
                continue
            total += ns
            if ns > top:
                top = ns
            if ns < 2 * _SUB_COUNT:
                buckets[ns] += 1
                continue
            shift = ns.bit_length() - (_SUB_BITS + 1)
            if shift > _MAX_SHIFT:
                buckets[_BUCKET_COUNT - 1] += 1
            else:
                buckets[_SUB_COUNT * shift + (ns >> shift)] += 1
        self.count += count
        self.total_ns += total
        self.max_ns = top

    @property
    def mean_ns(self) -> float:
        """The mean duration, 0.0 before the first update."""
        return self.total_ns / self.count if self.count else 0.0

    def percentile_ns(self, q: float) -> float:
        """The approximate ``q``-quantile (``0 < q <= 1``) in nanoseconds, 0.0 when empty.

        Within 6.25 % of the exact value for durations below 2**41 ns; never above ``max_ns``.
        """
        if not 0 < q <= 1:
            raise ValueError(f"percentile must be in (0, 1], got {q!r}")
        if self.count == 0:
            return 0.0
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self._buckets):
            seen += n
            if n and seen >= rank:
                low, high = _bucket_bounds(index)
                return float(min((low + high - 1) / 2, self.max_ns))
        return float(self.max_ns)  # unreachable unless counts were edited by hand

    def count_at_most_ns(self, bound_ns: int) -> int:
        """How many durations were at most ``bound_ns``, counting a bucket when its whole range
        is (so within one bucket, 1/8 of an octave, of the exact count): histogram buckets."""
        total = 0
        for index, n in enumerate(self._buckets):
            if not n:
                continue
            _, high = _bucket_bounds(index)
            if high - 1 > bound_ns:
                break
            total += n
        return total

    def summary(self) -> dict[str, float | int]:
        """``count``, ``mean_ms``, ``max_ms``, ``p50_ms`` and ``p99_ms``: what reporters show."""
        return {
            "count": self.count,
            "mean_ms": self.mean_ns / _NS_PER_MS,
            "max_ms": self.max_ns / _NS_PER_MS,
            "p50_ms": self.percentile_ns(0.5) / _NS_PER_MS,
            "p99_ms": self.percentile_ns(0.99) / _NS_PER_MS,
        }

    def __repr__(self) -> str:
        return f"Timer(count={self.count}, mean_ns={self.mean_ns:.0f}, max_ns={self.max_ns})"


Metric = Counter | Gauge | Timer
_M = TypeVar("_M", Counter, Gauge, Timer)


class MetricsRegistry:
    """Every metric of one container, by group (``container``, ``task.<task name>``) and name.

    Asking twice for the same group and name returns the same object, so components can look
    their metrics up once and keep the reference for the hot path.
    """

    __slots__ = ("_descriptions", "_groups")

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, Metric]] = {}
        self._descriptions: dict[str, Description] = {}

    def counter(
        self,
        group: str,
        name: str,
        fn: Callable[[], float] | None = None,
        *,
        help: str | None = None,
        unit: str | None = None,
    ) -> Counter:
        """The counter ``name`` of ``group``, created at 0 on first use; with ``fn``, created
        as ``Counter.of(fn)`` (used only when the counter is created). ``help`` and ``unit``
        describe the name (see ``describe``)."""
        self._describe_if_given(name, help, unit)
        if fn is None:
            return self._get(group, name, Counter, Counter)
        return self._get(group, name, Counter, lambda: Counter.of(fn))

    def gauge(
        self,
        group: str,
        name: str,
        fn: Callable[[], float] | None = None,
        *,
        help: str | None = None,
        unit: str | None = None,
    ) -> Gauge:
        """The gauge ``name`` of ``group``; with ``fn``, created as ``Gauge.of(fn)``.

        ``fn`` is only used when the gauge is created; an existing gauge is returned as is.
        """
        self._describe_if_given(name, help, unit)
        if fn is None:
            return self._get(group, name, Gauge, Gauge)
        return self._get(group, name, Gauge, lambda: Gauge.of(fn))

    def timer(self, group: str, name: str, *, help: str | None = None) -> Timer:
        """The timer ``name`` of ``group``, created empty on first use (unit: seconds)."""
        self._describe_if_given(name, help, "seconds")
        return self._get(group, name, Timer, Timer)

    def describe(self, name: str, help: str, unit: str) -> None:
        """Say what metrics called ``name`` mean, in every group, and their unit: Prometheus'
        HELP text. ``catalogue.DESCRIPTIONS`` describes the container's own metrics."""
        self._descriptions[name] = Description(help, unit)

    def description(self, name: str) -> Description | None:
        """What ``describe`` said about ``name``, else the catalogue's entry, else None."""
        return self._descriptions.get(name) or DESCRIPTIONS.get(name)

    def _describe_if_given(self, name: str, help: str | None, unit: str | None) -> None:
        if help is not None:
            self.describe(name, help, unit or "")

    def groups(self) -> list[str]:
        """The names of the groups that hold at least one metric, in creation order."""
        return list(self._groups)

    def items(self) -> list[tuple[str, str, Metric]]:
        """Every metric as ``(group, name, metric)``, in creation order (for reporters that
        need each kind, such as Prometheus)."""
        return [(g, n, m) for g, metrics in self._groups.items() for n, m in metrics.items()]

    def remove_group(self, group: str) -> None:
        """Forget every metric of ``group`` (a task that left this container); no-op if absent."""
        self._groups.pop(group, None)

    def snapshot(
        self, failed: Callable[[str, str, Exception], None] | None = None
    ) -> dict[str, dict[str, Any]]:
        """The current values: group -> name -> value.

        Counters give their count, gauges their value (function gauges are called now), timers
        a dict of ``count``, ``mean_ms``, ``max_ms``, ``p50_ms`` and ``p99_ms``. A metric whose
        function raises fails the snapshot; with ``failed``, it is left out and
        ``failed(group, name, error)`` called instead (a reporter goes on with the others).
        """
        result: dict[str, dict[str, Any]] = {}
        for group, metrics in self._groups.items():
            values: dict[str, Any] = {}
            for name, metric in metrics.items():
                try:
                    if isinstance(metric, Counter):
                        values[name] = metric.count
                    elif isinstance(metric, Gauge):
                        values[name] = metric.value
                    else:
                        values[name] = metric.summary()
                except Exception as exc:
                    if failed is None:
                        raise
                    failed(group, name, exc)
            result[group] = values
        return result

    def _get(self, group: str, name: str, kind: type[_M], make: Callable[[], _M]) -> _M:
        metrics = self._groups.get(group)
        if metrics is None:
            metrics = self._groups[group] = {}
        metric = metrics.get(name)
        if metric is None:
            created = make()
            metrics[name] = created
            return created
        if not isinstance(metric, kind):
            raise TypeError(
                f"metric {group}.{name} is a {type(metric).__name__}, not a {kind.__name__}"
            )
        return metric


__all__ = ["Counter", "Description", "Gauge", "Metric", "MetricsRegistry", "Timer"]
