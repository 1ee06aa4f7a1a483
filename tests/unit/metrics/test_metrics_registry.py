"""MetricsRegistry and its metrics: counters, gauges, timers with approximate percentiles."""

from __future__ import annotations

import math
import random

import pytest

from samzapy.metrics import Counter, Gauge, MetricsRegistry, Timer
from samzapy.metrics.registry import _bucket_bounds

# A percentile is the middle of a bucket that spans 1/8 of its power of two.
MAX_RELATIVE_ERROR = 1 / 16


def exact_percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


class TestCounter:
    def test_starts_at_zero_and_adds(self) -> None:
        counter = Counter()
        assert counter.count == 0
        counter.inc()
        counter.inc(5)
        assert counter.count == 6

    def test_has_no_instance_dict(self) -> None:
        with pytest.raises(AttributeError):
            Counter().other = 1  # type: ignore[attr-defined]


class TestGauge:
    def test_set_replaces_the_value(self) -> None:
        gauge = Gauge()
        assert gauge.value == 0
        gauge.set(3.5)
        gauge.set(2)
        assert gauge.value == 2

    def test_of_reads_the_function_each_time(self) -> None:
        queue = [1, 2]
        gauge = Gauge.of(lambda: len(queue))
        assert gauge.value == 2
        queue.append(3)
        assert gauge.value == 3

    def test_of_refuses_set(self) -> None:
        gauge = Gauge.of(lambda: 1)
        with pytest.raises(TypeError, match=r"reads its value from a function"):
            gauge.set(2)
        assert gauge.value == 1


class TestTimer:
    def test_empty_timer_reports_zeros(self) -> None:
        timer = Timer()
        assert (timer.count, timer.total_ns, timer.max_ns, timer.mean_ns) == (0, 0, 0, 0.0)
        assert timer.percentile_ns(0.99) == 0.0

    def test_count_total_max_and_mean(self) -> None:
        timer = Timer()
        for ns in (1_000, 3_000, 2_000):
            timer.update_ns(ns)
        assert timer.count == 3
        assert timer.total_ns == 6_000
        assert timer.max_ns == 3_000
        assert timer.mean_ns == 2_000.0

    def test_recording_a_turn_at_once_equals_one_by_one(self) -> None:
        durations = [0, -3, 1, 7, 15, 16, 1_000, 123_456, 2**45, 5, 1_000]
        one, turn = Timer(), Timer()
        one.update_ns(4_000)
        turn.update_ns(4_000)
        for ns in durations:
            one.update_ns(ns)
        turn.update_all_ns(durations)
        assert (turn.count, turn.total_ns, turn.max_ns) == (one.count, one.total_ns, one.max_ns)
        assert turn._buckets == one._buckets
        assert turn.summary() == one.summary()

    def test_a_turn_in_the_looked_up_range_lands_where_one_by_one_does(self) -> None:
        # Every bucket boundary from 512 ns to 2 ms and its neighbours: the lookup table's
        # range (a turn of these takes the fast path), and one beyond each end.
        edges = [Timer() for _ in range(2)]
        bounds = sorted({b for i in range(300) for b in _bucket_bounds(i) if 512 <= b < 1 << 21})
        durations = [ns + d for ns in bounds for d in (-1, 0, 1) if 512 <= ns + d < 1 << 21]
        for turn in (durations, [*durations, 511], [*durations, 1 << 21]):
            one, batch = edges
            for ns in turn:
                one.update_ns(ns)
            batch.update_all_ns(turn)
            assert batch._buckets == one._buckets
            assert (batch.count, batch.total_ns, batch.max_ns) == (
                one.count,
                one.total_ns,
                one.max_ns,
            )

    def test_small_durations_are_exact(self) -> None:
        timer = Timer()
        for ns in range(1, 11):
            timer.update_ns(ns)
        assert timer.percentile_ns(0.5) == 5.0
        assert timer.percentile_ns(1.0) == 10.0

    def test_negative_durations_count_as_zero(self) -> None:
        timer = Timer()
        timer.update_ns(-5)
        assert (timer.count, timer.total_ns, timer.max_ns) == (1, 0, 0)
        assert timer.percentile_ns(0.5) == 0.0

    @pytest.mark.parametrize("seed", [1, 2, 3])
    @pytest.mark.parametrize("q", [0.5, 0.9, 0.99, 1.0])
    def test_percentiles_are_within_the_bucket_error(self, seed: int, q: float) -> None:
        rng = random.Random(seed)
        # Log-uniform from 1 µs to 10 s: every octave of realistic latencies gets samples.
        values = [int(10 ** rng.uniform(3, 10)) for _ in range(5_000)]
        timer = Timer()
        for ns in values:
            timer.update_ns(ns)
        exact = exact_percentile(values, q)
        assert timer.percentile_ns(q) == pytest.approx(exact, rel=MAX_RELATIVE_ERROR)

    def test_bucket_edges_stay_within_the_error(self) -> None:
        for ns in (16, 17, 31, 32, 1023, 1024, 1025, 999_999, 2**40 - 1, 2**40):
            timer = Timer()
            timer.update_ns(ns)
            timer.update_ns(ns)
            # One bucket's middle, capped by the maximum: never above what was seen.
            estimate = timer.percentile_ns(0.5)
            assert estimate <= ns
            assert estimate == pytest.approx(ns, rel=MAX_RELATIVE_ERROR)

    def test_huge_durations_clamp_but_never_exceed_max(self) -> None:
        timer = Timer()
        timer.update_ns(1_000)
        timer.update_ns(2**50)
        assert timer.max_ns == 2**50
        assert timer.percentile_ns(1.0) <= 2**50
        assert timer.percentile_ns(0.5) == pytest.approx(1_000, rel=MAX_RELATIVE_ERROR)

    @pytest.mark.parametrize("q", [0, -0.1, 1.5])
    def test_percentile_out_of_range_is_refused(self, q: float) -> None:
        with pytest.raises(ValueError, match=r"percentile must be in \(0, 1\]"):
            Timer().percentile_ns(q)

    def test_summary_is_in_milliseconds(self) -> None:
        timer = Timer()
        timer.update_ns(2_000_000)
        timer.update_ns(4_000_000)
        summary = timer.summary()
        assert summary["count"] == 2
        assert summary["mean_ms"] == 3.0
        assert summary["max_ms"] == 4.0
        assert summary["p50_ms"] == pytest.approx(2.0, rel=MAX_RELATIVE_ERROR)
        assert summary["p99_ms"] == pytest.approx(4.0, rel=MAX_RELATIVE_ERROR)


class TestMetricsRegistry:
    def test_same_group_and_name_give_the_same_metric(self) -> None:
        registry = MetricsRegistry()
        assert registry.counter("container", "processed") is registry.counter(
            "container", "processed"
        )
        assert registry.timer("container", "process-ns") is registry.timer(
            "container", "process-ns"
        )
        assert registry.gauge("container", "lag") is registry.gauge("container", "lag")

    def test_groups_keep_names_apart(self) -> None:
        registry = MetricsRegistry()
        a = registry.counter("task.Partition 0", "processed")
        b = registry.counter("task.Partition 1", "processed")
        assert a is not b
        assert registry.groups() == ["task.Partition 0", "task.Partition 1"]

    def test_one_name_cannot_hold_two_kinds(self) -> None:
        registry = MetricsRegistry()
        registry.counter("container", "processed")
        with pytest.raises(TypeError, match=r"container\.processed is a Counter, not a Timer"):
            registry.timer("container", "processed")

    def test_gauge_with_function_is_created_once(self) -> None:
        registry = MetricsRegistry()
        first = registry.gauge("container", "buffered", lambda: 7)
        again = registry.gauge("container", "buffered", lambda: 99)
        assert again is first
        assert first.value == 7

    def test_snapshot_shape(self) -> None:
        registry = MetricsRegistry()
        registry.counter("container", "processed").inc(3)
        registry.gauge("container", "partitions").set(4)
        pending = [1, 2]
        registry.gauge("task.Partition 0", "pending", lambda: len(pending))
        timer = registry.timer("task.Partition 0", "process-ns")
        timer.update_ns(1_000_000)
        pending.append(3)  # function gauges are read at snapshot time

        snapshot = registry.snapshot()

        assert snapshot == {
            "container": {"processed": 3, "partitions": 4},
            "task.Partition 0": {
                "pending": 3,
                "process-ns": {
                    "count": 1,
                    "mean_ms": 1.0,
                    "max_ms": 1.0,
                    "p50_ms": pytest.approx(1.0, rel=MAX_RELATIVE_ERROR),
                    "p99_ms": pytest.approx(1.0, rel=MAX_RELATIVE_ERROR),
                },
            },
        }

    def test_snapshot_is_a_copy(self) -> None:
        registry = MetricsRegistry()
        counter = registry.counter("container", "processed")
        snapshot = registry.snapshot()
        counter.inc()
        assert snapshot == {"container": {"processed": 0}}
        assert registry.snapshot() == {"container": {"processed": 1}}

    def test_remove_group(self) -> None:
        registry = MetricsRegistry()
        old = registry.counter("task.Partition 0", "processed")
        registry.remove_group("task.Partition 0")
        registry.remove_group("task.absent")
        assert registry.snapshot() == {}
        assert registry.counter("task.Partition 0", "processed") is not old
