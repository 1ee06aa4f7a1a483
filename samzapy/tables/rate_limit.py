"""TokenBucket: the rate limiter of one direction (reads or writes) of a remote table.

Pure and synchronous: ``reserve(n)`` takes ``n`` tokens and says how long the caller must wait
before making its call; the remote table then awaits that wait (``asyncio.sleep``), so a call
over the limit never blocks the event loop.

Semantics, close to the Guava RateLimiter that Samza's tables use:

1. The bucket refills at ``rate`` tokens a second and holds at most ``capacity =
   max(1, rate)`` of them: one second of burst at most (and at least one call for rates
   below one a second).
2. It starts full (Guava's starts empty but lets the first call through at once; starting
   full lets a task that just started make its first second of calls without waiting, as the
   calls it would have made in the second before).
3. A reservation may take the bucket below zero: the caller waits until the refill has paid
   the debt back, and later callers wait behind it. Reservations are served in the order
   they are made, and a call of ``n`` tokens (a batch of ``n`` keys) is never refused, only
   delayed, however large ``n`` is.
4. A reservation is never given back: a caller cancelled while it waits has used its tokens.

Over any interval of ``t`` seconds starting at a full bucket, at most ``capacity + rate * t``
tokens are granted without waiting past the interval's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens a second, at most ``max(1, rate)`` stored; ``clock`` returns seconds
    (default ``time.monotonic``; tests pass one they move by hand)."""

    __slots__ = ("_clock", "_last", "_tokens", "capacity", "rate")

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not rate > 0:
            raise ValueError(f"a token bucket's rate must be above zero, got {rate!r}")
        self.rate = float(rate)
        self.capacity = max(1.0, self.rate)
        self._clock = clock
        self._tokens = self.capacity
        self._last = clock()

    @property
    def tokens(self) -> float:
        """The tokens in the bucket now (below zero while callers wait)."""
        self._refill()
        return self._tokens

    def reserve(self, n: int = 1) -> float:
        """Take ``n`` tokens; the seconds to wait before using them (0.0: go at once)."""
        self._refill()
        self._tokens -= n
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    def _refill(self) -> None:
        now = self._clock()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
            self._last = now

    def __repr__(self) -> str:
        return f"TokenBucket(rate={self.rate:g}/s, tokens={self.tokens:.2f})"


__all__ = ["TokenBucket"]
