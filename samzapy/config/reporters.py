"""Checks of ``metrics.reporters``: each item a reporter samzapy has or a class path, once;
and ``metrics.prometheus.host``, an address.

A reporter listed twice would run twice: the ``log`` one logs every report twice, and the
second ``prometheus`` one cannot bind the port the first holds, which ``samzapy run`` reported
as a port another program uses. An empty host (``${METRICS_HOST:-}``, say) is asyncio's
"every interface": the metrics server would answer from outside the machine, where the
default (``127.0.0.1``) and the documented ``0.0.0.0`` say what they mean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.config.schema import REPORTERS

KEY = "metrics.reporters"
HOST_KEY = "metrics.prometheus.host"


def reporter_problems(
    values: Mapping[str, Any],
    is_class_path: Callable[[str], bool],
    problem: Callable[[str | None, str], None],
) -> None:
    """Report an item that is neither a reporter's name nor a ``module:Class`` path, an item
    listed twice, and an empty Prometheus host beside the prometheus reporter."""
    seen: set[str] = set()
    for item in values.get(KEY) or ():
        if item not in REPORTERS and not is_class_path(item):
            problem(
                KEY,
                f"{KEY} items must be {', '.join(REPORTERS)} or a 'module:Class' path, "
                f"got {item!r}",
            )
        elif item in seen:
            problem(KEY, f"{KEY} lists {item!r} twice: each reporter runs once, list it once")
        seen.add(item)
    host = values.get(HOST_KEY)  # only the prometheus reporter listens (a template may
    # leave ${METRICS_HOST:-} empty with the reporter off)
    if "prometheus" in seen and isinstance(host, str) and not host.strip():
        problem(
            HOST_KEY,
            f"{HOST_KEY} must be an address to listen on (127.0.0.1: this machine only, "
            f"0.0.0.0: every interface), got {host!r}",
        )


__all__ = ["reporter_problems"]
