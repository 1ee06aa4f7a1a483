"""Intervals below a second where a second or more is meant: ``metrics.reporter.interval.ms``
(of the ``log`` reporter) and ``task.progress.interval.ms``.

Both are in milliseconds, as Samza's ``task.commit.ms`` is, while a Samza metrics interval
is often written in seconds: ported as ``60``, the ``log`` reporter dumps the whole registry
about 16 times a second, and at ``1`` the log grows by megabytes a second. Not an error (tests
run with 100 ms): ``samzapy validate`` and ``run`` log an ``interval_under_a_second`` warning
for each (``cli/problems.py``, step 7).
"""

from __future__ import annotations

from samzapy.config.views import ResolvedConfig

#: Below this many milliseconds, an interval is warned of.
SECOND_MS = 1000


def short_intervals(config: ResolvedConfig) -> list[tuple[str, int, str]]:
    """``(key, interval in ms, why)`` for each interval in use that is under a second: the
    ``log`` reporter's, and the ``progress`` line's when it is on (above 0)."""
    found = []
    if "log" in config.metrics.reporters:
        found.append(
            ("metrics.reporter.interval.ms", config.metrics.reporter_interval_ms, "metrics")
        )
    found.append(("task.progress.interval.ms", config.task.progress_interval_ms, "progress line"))
    return [(key, ms, _why(key, ms, what)) for key, ms, what in found if 0 < ms < SECOND_MS]


def _why(key: str, ms: int, what: str) -> str:
    return (
        f"{key} is in milliseconds: {ms} logs the {what} every {ms} ms, "
        f"{round(SECOND_MS / ms, 1):g} times a second (an interval of {ms} s is {ms * SECOND_MS})"
    )


__all__ = ["SECOND_MS", "short_intervals"]
