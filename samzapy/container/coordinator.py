"""What a task instance reports upward (``TaskListener``, which the run loop implements), and
the ``TaskCoordinator`` its task's calls get, which turns requests into those reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from samzapy.api.context import RequestScope
from samzapy.api.system import TaskName


class TaskListener(Protocol):
    """What a task instance reports upward; the run loop implements it."""

    def fail(self, error: BaseException) -> None: ...

    def task_finished(self, name: TaskName) -> None: ...

    def request_commit(self, name: TaskName, scope: RequestScope) -> None: ...

    def request_shutdown(self, name: TaskName, scope: RequestScope) -> None: ...


class TaskCoordinatorImpl:
    """A task's TaskCoordinator: requests take effect once the current call ends."""

    __slots__ = ("_commit", "_listener", "_name")

    def __init__(self, name: TaskName, commit: Callable[[], None], listener: TaskListener) -> None:
        """``commit`` requests a commit of the task itself; the listener gets the rest."""
        self._name = name
        self._commit = commit
        self._listener = listener

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        if scope is RequestScope.CURRENT_TASK:
            self._commit()
        else:
            self._listener.request_commit(self._name, scope)

    def shutdown(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        self._listener.request_shutdown(self._name, scope)


__all__ = ["TaskCoordinatorImpl", "TaskListener"]
