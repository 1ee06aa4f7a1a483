"""Durations in descriptors: a ``timedelta`` as whole milliseconds, checked."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from samzapy.api.errors import ConfigError


def duration_ms(value: Any, what: str, *, positive: bool = True) -> int:
    """A ``timedelta`` as whole milliseconds; a ConfigError naming ``what`` otherwise."""
    if not isinstance(value, timedelta):
        raise ConfigError(f"{what} must be a datetime.timedelta, got {value!r}")
    ms = value // timedelta(milliseconds=1)
    if ms < 0 or (positive and ms <= 0):
        bound = "more than zero" if positive else "zero or more"
        raise ConfigError(f"{what} must be {bound} milliseconds, got {value!r}")
    return int(ms)


__all__ = ["duration_ms"]
