"""Durations in descriptors: a ``timedelta`` as whole milliseconds, checked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from samzapy.api.errors import ConfigError


def duration_ms(value: Any, what: str, *, positive: bool = True) -> int:
    """A ``timedelta`` as whole milliseconds; a ConfigError naming ``what`` and the value when
    it is not one, not a whole number of milliseconds, or not more than zero (``positive``;
    zero or more otherwise)."""
    if not isinstance(value, timedelta):
        raise ConfigError(f"{what} must be a datetime.timedelta, got {value!r}")
    ms, rest = divmod(value, timedelta(milliseconds=1))
    if rest:  # samzapy works in ms: 1.5 ms would quietly be 1, 1 µs would be 0
        raise ConfigError(f"{what} must be a whole number of milliseconds, got {value!r}")
    if ms < 0 or (positive and ms <= 0):
        bound = "more than zero" if positive else "zero or more"
        raise ConfigError(f"{what} must be {bound} milliseconds, got {value!r}")
    return int(ms)


__all__ = ["duration_ms"]
