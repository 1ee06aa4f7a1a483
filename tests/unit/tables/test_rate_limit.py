"""The token bucket (with a clock moved by hand) and a remote table's rate limits (measured)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from table_fakes import FakeClock, Service

from samzapy.api.retry import TableRetryPolicy
from samzapy.api.tables import RemoteTableDescriptor
from samzapy.metrics.registry import MetricsRegistry
from samzapy.tables import RemoteTable, TokenBucket


def test_a_full_bucket_lets_one_second_of_calls_through_then_spaces_them() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, clock)
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)  # behind the one before


def test_the_bucket_refills_at_the_rate_up_to_one_second_of_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, clock)
    for _ in range(10):
        bucket.reserve()
    clock.advance(0.35)
    assert bucket.tokens == pytest.approx(3.5)
    clock.advance(3600)  # idle for an hour: still one second of burst only
    assert bucket.tokens == pytest.approx(10)
    assert sum(bucket.reserve() == 0.0 for _ in range(20)) == 10


def test_a_rate_below_one_still_allows_one_call() -> None:
    clock = FakeClock()
    bucket = TokenBucket(0.5, clock)
    assert bucket.capacity == 1
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(2.0)


def test_a_reservation_larger_than_the_bucket_waits_for_its_debt() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, clock)
    assert bucket.reserve(25) == pytest.approx(1.5)  # 15 tokens short at 10 a second
    clock.advance(1.5)
    assert bucket.reserve() == pytest.approx(0.1)


def test_a_bucket_refuses_a_rate_of_zero() -> None:
    with pytest.raises(ValueError, match="rate must be above zero"):
        TokenBucket(0)


def remote(read_rate: float | None = None, write_rate: float | None = None) -> RemoteTable:
    descriptor = RemoteTableDescriptor("profiles")
    if read_rate is not None:
        descriptor.with_read_rate_limit(read_rate)
    if write_rate is not None:
        descriptor.with_write_rate_limit(write_rate)
    service = Service({"k": 1})
    return RemoteTable(descriptor, service, service)


async def test_reads_over_the_limit_wait_their_turn_without_blocking_the_loop() -> None:
    table = remote(read_rate=50)
    service = table.read_fn
    start = time.monotonic()
    calls = [asyncio.ensure_future(table.get_async("k")) for _ in range(200)]
    await asyncio.sleep(0)  # each call takes its token or its turn (its first step)
    reserved_in = time.monotonic() - start
    ticks, slept_at = 0, start
    while time.monotonic() - start < 0.5:
        slept_at = time.monotonic()
        await asyncio.sleep(0.01)
        ticks += 1
    done = service.count("get")
    window = time.monotonic() - start
    for call in calls:
        call.cancel()
    await asyncio.gather(*calls, return_exceptions=True)
    # A full bucket (50) at once, then 50 a second from the first call's token: every call
    # whose turn came before the last tick's timer is done, none whose turn is still to come.
    # (About 75 after 0.5 s; a loaded machine may wake the loop late, widening the window.)
    fewest = 50 + 50 * (slept_at + 0.01 - start - reserved_in)
    assert fewest - 6 <= done <= 50 + 50 * window + 6, (done, fewest, window)
    # The loop kept turning meanwhile: waits that held it (a time.sleep per call) would have
    # held this loop for their sum, seconds, at its first tick.
    assert ticks >= 10, (ticks, window)
    # 150 calls over the bucket, less one for each token it refilled while they reserved
    # (none unless that took 1/50 s or more).
    assert 150 - int(50 * reserved_in) <= table.metrics.rate_limit_waits <= 150, reserved_in
    # The 150 waits were 1/50 s, 2/50 s, ... 150/50 s long, each less the time that passed
    # between the first call's token and its own reservation.
    full = sum(range(1, 151)) / 50 * 1e9
    waited = table.metrics.rate_limit_wait_ns
    assert full - 150 * reserved_in * 1e9 - 1e6 <= waited <= full + 1e6, (waited, reserved_in)


async def test_writes_have_their_own_limit() -> None:
    table = remote(read_rate=1000, write_rate=2)
    began = time.monotonic()
    await table.put_async("a", 1)
    await table.put_async("b", 2)  # the write bucket's two tokens
    start = time.monotonic()
    await asyncio.gather(*(table.get_async("k") for _ in range(20)))
    # Reads do not wait for the write bucket, whose next token is half a second away.
    assert table.metrics.rate_limit_waits == 0
    assert time.monotonic() - start < 0.45
    asked = time.monotonic()
    await table.put_async("c", 3)  # waits for the write bucket's next token
    assert time.monotonic() - start >= 0.4
    assert table.metrics.rate_limit_waits == 1
    # Published in seconds, as Prometheus wants a duration.
    registry = MetricsRegistry()
    table.metrics.register(registry, "task.Partition 0")
    published = registry.snapshot()["task.Partition 0"]["profiles-rate-limit-wait-seconds"]
    assert published == table.metrics.rate_limit_wait_ns / 1e9
    # Half a second after the second put's token, less the time the reads took: the puts'
    # turns came after ``began``, the third's at ``asked`` (give or take a loaded machine's
    # tick).
    assert 0.5 - (asked - began) - 0.05 <= published <= 0.5


async def test_a_retry_takes_a_token_too() -> None:
    """docs/tables.md: "a call over the limit waits for its token (on the event loop,
    blocking nothing). A retry takes a token too". A bucket of four tokens on a clock that
    stands still: a read that fails twice before it succeeds spends three of them, so one
    more read goes at once and the next waits a quarter of a second for its token."""
    clock = FakeClock()
    descriptor = (
        RemoteTableDescriptor("profiles")
        .with_read_rate_limit(4)
        .with_read_retry_policy(
            TableRetryPolicy().with_fixed_backoff(timedelta(0)).with_stop_after_attempts(5)
        )
    )
    service = Service({"k": 1}, failures=2)
    table = RemoteTable(descriptor, service, clock=clock)
    assert await table.get_async("k") == 1
    assert service.count("get") == 3
    assert table.metrics.retries == 2
    assert table.metrics.rate_limit_waits == 0  # the bucket started full: four tokens
    assert await table.get_async("k") == 1  # the fourth token
    assert table.metrics.rate_limit_waits == 0
    start = time.monotonic()
    assert await table.get_async("k") == 1  # none left: it waits for the refill
    assert table.metrics.rate_limit_waits == 1
    assert table.metrics.rate_limit_wait_ns == pytest.approx(0.25e9)
    assert time.monotonic() - start >= 0.24
