"""TableRetryPolicy: when and how often a remote table's failed call is tried again.

Samza's TableRetryPolicy in snake_case: a back-off (fixed, random or exponential, with
optional jitter), when to stop (after some attempts, or once some time has passed since the
first), and which errors are worth another try. A remote table with no policy does not retry.

    policy = (
        TableRetryPolicy()
        .with_exponential_backoff(timedelta(milliseconds=10), timedelta(seconds=1), 2)
        .with_stop_after_attempts(5)
        .with_retry_predicate(lambda exc: isinstance(exc, TimeoutError))
    )
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta

from samzapy.api.durations import duration_ms
from samzapy.api.errors import ConfigError


def _retry_everything(exc: BaseException) -> bool:
    return True


class TableRetryPolicy:
    """A remote table's retry policy. Defaults: 100 ms between attempts, stop after 3
    attempts, retry every ``Exception``."""

    def __init__(self) -> None:
        self.backoff = "fixed"
        self.sleep_ms = 100
        self.max_sleep_ms = 100
        self.factor = 1.0
        self.jitter_ms = 0
        self.max_attempts: int | None = 3
        self._attempts_given = False
        self.max_delay_ms: int | None = None
        self.predicate: Callable[[BaseException], bool] = _retry_everything

    def with_fixed_backoff(self, sleep: timedelta) -> TableRetryPolicy:
        self.backoff = "fixed"
        self.sleep_ms = self.max_sleep_ms = duration_ms(sleep, "the fixed back-off", positive=False)
        return self

    def with_random_backoff(self, min_sleep: timedelta, max_sleep: timedelta) -> TableRetryPolicy:
        low = duration_ms(min_sleep, "the random back-off's minimum", positive=False)
        high = duration_ms(max_sleep, "the random back-off's maximum")
        if high < low:
            raise ConfigError(f"the random back-off's maximum ({high} ms) is below its minimum")
        self.backoff, self.sleep_ms, self.max_sleep_ms = "random", low, high
        return self

    def with_exponential_backoff(
        self, sleep: timedelta, max_sleep: timedelta, factor: float = 2.0
    ) -> TableRetryPolicy:
        self.sleep_ms = duration_ms(sleep, "the exponential back-off's first sleep")
        self.max_sleep_ms = duration_ms(max_sleep, "the exponential back-off's longest sleep")
        if isinstance(factor, bool) or not isinstance(factor, int | float) or factor <= 1:
            raise ConfigError(f"the exponential back-off's factor must be above 1, got {factor!r}")
        self.backoff, self.factor = "exponential", float(factor)
        return self

    def with_jitter(self, jitter: timedelta) -> TableRetryPolicy:
        """Each sleep is moved by a random amount within ± ``jitter`` (never below zero)."""
        self.jitter_ms = duration_ms(jitter, "the jitter", positive=False)
        return self

    def with_stop_after_attempts(self, attempts: int) -> TableRetryPolicy:
        """At most ``attempts`` calls in all (the first one included)."""
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ConfigError(f"the number of attempts must be 1 or more, got {attempts!r}")
        self.max_attempts = attempts
        self._attempts_given = True
        return self

    def with_stop_after_delay(self, delay: timedelta) -> TableRetryPolicy:
        """No retry is scheduled to start later than ``delay`` after the first attempt began
        (its start may still wait for the table's rate limit); no attempt limit unless
        ``with_stop_after_attempts`` is also given."""
        self.max_delay_ms = duration_ms(delay, "the delay to stop after")
        if not self._attempts_given:
            self.max_attempts = None
        return self

    def with_retry_predicate(self, predicate: Callable[[BaseException], bool]) -> TableRetryPolicy:
        """Only errors for which ``predicate(exc)`` is true are retried."""
        if not callable(predicate):
            raise ConfigError(f"the retry predicate must be callable, got {predicate!r}")
        self.predicate = predicate
        return self

    def sleep_before(self, attempt: int) -> float:
        """Seconds to wait before attempt ``attempt`` (2 for the first retry)."""
        if self.backoff == "random":
            ms = random.uniform(self.sleep_ms, self.max_sleep_ms)
        elif self.backoff == "exponential":
            ms = min(self.sleep_ms * self.factor ** (attempt - 2), self.max_sleep_ms)
        else:
            ms = self.sleep_ms
        if self.jitter_ms:
            ms = max(0.0, ms + random.uniform(-self.jitter_ms, self.jitter_ms))
        return ms / 1000

    def __repr__(self) -> str:
        stop = f"{self.max_attempts} attempts" if self.max_attempts else "no attempt limit"
        return f"TableRetryPolicy({self.backoff} {self.sleep_ms}-{self.max_sleep_ms} ms, {stop})"


__all__ = ["TableRetryPolicy"]
