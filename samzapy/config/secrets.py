"""Which configuration values are secrets, and their redaction.

A key is secret when the key, or a dotted tail of it, matches one of ``SECRET_KEYS`` or one of
the glob patterns the job lists in ``job.redacted.keys``: ``systems.kafka.sasl.plain.password``
matches ``sasl.*password*`` through its tail ``sasl.plain.password``. A secret's value never
leaves the process: ``samzapy validate`` prints ``REDACTED`` in its place, configuration
errors about it do not repeat it, and the logging set-up scrubs the values returned by
``secret_values`` from every line it writes (tracebacks included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any, Final

#: Glob patterns of secret keys, matched against each dotted tail of a key.
SECRET_KEYS: Final = ("sasl.*password*", "ssl.*password*", "*.secret*", "secret*")
#: The key under which a job lists further secret keys (glob patterns, like SECRET_KEYS).
REDACTED_KEYS_KEY: Final = "job.redacted.keys"
#: What stands in for a secret value.
REDACTED: Final = "<redacted>"
#: Values shorter than this are not scrubbed from free text (they would mangle every line);
#: they are still redacted wherever the key is known.
MIN_SCRUBBED_LENGTH: Final = 4


def split_items(text: str) -> list[str]:
    """A list-of-strings key given as one string: its items, separated by commas."""
    return [item.strip() for item in text.split(",") if item.strip()]


def extra_patterns(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The job's own secret-key patterns (``job.redacted.keys``): a list, or one string of
    patterns separated by commas, as every list-of-strings key takes (read from the raw
    configuration, before it is checked: its values are scrubbed from the first log line)."""
    value = config.get(REDACTED_KEYS_KEY)
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(split_items(value))
    items = value if isinstance(value, Iterable) else (value,)
    return tuple(p for p in (str(v).strip() for v in items) if p)


def is_secret(key: str, extra: Iterable[str] = ()) -> bool:
    """Whether ``key`` holds a secret (see the module docstring)."""
    if key == REDACTED_KEYS_KEY:
        return False
    parts = key.split(".")
    tails = [".".join(parts[i:]) for i in range(len(parts))]
    patterns = (*SECRET_KEYS, *extra)
    return any(fnmatchcase(tail, pattern) for tail in tails for pattern in patterns)


def redacted(values: Mapping[str, Any], extra: Iterable[str] | None = None) -> dict[str, Any]:
    """``values`` with every set secret replaced by ``REDACTED`` (``extra`` defaults to the
    patterns ``values`` itself lists)."""
    patterns = tuple(extra_patterns(values) if extra is None else extra)
    return {
        key: REDACTED if value is not None and is_secret(key, patterns) else value
        for key, value in values.items()
    }


def secret_values(values: Mapping[str, Any]) -> set[str]:
    """The text of every secret value set in ``values``, for scrubbing free text."""
    patterns = extra_patterns(values)
    found: set[str] = set()
    for key, value in values.items():
        if value is None or not is_secret(key, patterns):
            continue
        items = value if isinstance(value, list | tuple) else [value]
        found.update(text for text in map(str, items) if len(text) >= MIN_SCRUBBED_LENGTH)
    return found


__all__ = [
    "MIN_SCRUBBED_LENGTH",
    "REDACTED",
    "REDACTED_KEYS_KEY",
    "SECRET_KEYS",
    "extra_patterns",
    "is_secret",
    "redacted",
    "secret_values",
    "split_items",
]
