"""What a task instance reports upward (``TaskListener``, which the run loop implements), and
the ``TaskCoordinator`` its task's calls get, which turns requests into those reports."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any, Protocol

from samzapy.api.context import RequestScope
from samzapy.api.system import TaskName


class TaskListener(Protocol):
    """What a task instance reports upward; the run loop implements it."""

    def fail(self, error: BaseException) -> None: ...

    def task_finished(self, name: TaskName) -> None: ...

    def request_commit(self, name: TaskName, scope: RequestScope) -> None: ...

    def request_shutdown(self, name: TaskName, scope: RequestScope) -> None: ...


class TaskCoordinatorImpl:
    """A task's TaskCoordinator: requests take effect once the current call ends. A request
    made on another thread (a call on the thread pool) is handed to the loop's thread, where
    the run loop's state lives."""

    __slots__ = ("_commit", "_context", "_listener", "_loop", "_loop_thread", "_name")

    def __init__(self, name: TaskName, commit: Callable[[], None], listener: TaskListener) -> None:
        """``commit`` requests a commit of the task itself; the listener gets the rest.
        Made on the loop's thread."""
        self._name = name
        self._commit = commit
        self._listener = listener
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._context = contextvars.copy_context()  # the log's job and container, for one

    def commit(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        _check(scope)
        if scope is RequestScope.CURRENT_TASK:
            self._on_loop(self._commit)
        else:
            self._on_loop(self._listener.request_commit, self._name, scope)

    def shutdown(self, scope: RequestScope = RequestScope.CURRENT_TASK) -> None:
        _check(scope)
        self._on_loop(self._listener.request_shutdown, self._name, scope)

    def _on_loop(self, request: Callable[..., None], *args: Any) -> None:
        if threading.get_ident() == self._loop_thread:
            request(*args)
        else:
            self._loop.call_soon_threadsafe(request, *args, context=self._context.copy())


def _check(scope: Any) -> None:
    """A scope that is no RequestScope (the string "all_tasks_in_container") would be taken
    for the current task's: an error in the call instead."""
    if not isinstance(scope, RequestScope):
        raise TypeError(
            f"a request's scope must be a RequestScope (RequestScope.CURRENT_TASK or "
            f"RequestScope.ALL_TASKS_IN_CONTAINER), got {scope!r}"
        )


__all__ = ["TaskCoordinatorImpl", "TaskListener"]
