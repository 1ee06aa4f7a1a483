"""The container's health state: what the ``/healthz`` and ``/readyz`` probes report.

Pure and synchronous; owned by the event loop (no locks). The container sets ``ready``; a
watchdog records problems (a stalled task, say) under a key of its choosing and clears them
when they go away. The Prometheus reporter's server only reads this state.
"""

from __future__ import annotations

from typing import Any


class Health:
    """Readiness and the current problems of one container.

    ``ready`` is true once every assigned task is restored and running, and false again while
    tasks are reassigned. ``healthy`` is true while no problem is recorded.
    """

    __slots__ = ("_problems", "ready", "standbys")

    def __init__(self) -> None:
        self.ready = False
        self._problems: dict[str, dict[str, Any]] = {}
        #: The container's standby replicas (kafka-group), shown by ``/readyz``: task ->
        #: store -> how far it got (``coordinator/standby.py``); they do not affect readiness.
        self.standbys: dict[str, Any] = {}

    def set_problem(self, key: str, detail: dict[str, Any]) -> None:
        """Record (or replace) the problem ``key`` with a JSON-friendly ``detail``."""
        self._problems[key] = dict(detail)

    def clear_problem(self, key: str) -> None:
        """Forget the problem ``key``; no-op if it is not recorded."""
        self._problems.pop(key, None)

    @property
    def problems(self) -> dict[str, dict[str, Any]]:
        """A copy of the recorded problems: key -> detail."""
        return {key: dict(detail) for key, detail in self._problems.items()}

    @property
    def healthy(self) -> bool:
        """True while no problem is recorded."""
        return not self._problems

    def __repr__(self) -> str:
        return f"Health(ready={self.ready}, problems={sorted(self._problems)})"


__all__ = ["Health"]
