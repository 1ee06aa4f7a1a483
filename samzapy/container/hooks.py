"""Calling a task's methods other than process: init, window, on_watermark, on_end_of_stream
and close. Each failure becomes a TaskError naming the task, with the task's exception as its
cause: a BaseException the hook raises too (a CancelledError of its own, SystemExit), as from
``process``; only the caller's own cancellation (a stop) passes through. A pooled sync task's
barrier hooks run on the thread pool, like its process calls, unless they are coroutine
functions."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any

from samzapy.api.errors import OperatorError, TaskError
from samzapy.api.system import TaskName
from samzapy.container.clock import cancelled_here


class TaskHooks:
    """Runs one task's hooks; ``after_call`` runs after each (closing store iterators)."""

    __slots__ = ("_after_call", "_executor", "_name", "pooled", "running")

    def __init__(
        self,
        name: TaskName,
        executor: concurrent.futures.Executor | None,
        after_call: Callable[[], object],
    ) -> None:
        self._name = name
        self._executor = executor
        self._after_call = after_call
        #: The last hook handed to the thread pool (a cancelled barrier leaves it running).
        self.pooled: concurrent.futures.Future[Any] | None = None
        #: The hook being called now (``init``, ``window``...), None between calls.
        self.running: str | None = None

    async def call(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call ``fn`` on the loop thread, awaiting what it returns if it is awaitable."""
        self.running = what
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
            self._after_call()
        except BaseException as exc:  # the task's own: CancelledError, SystemExit too
            if cancelled_here(exc):
                raise
            raise self._failed(what, exc) from _cause(exc)
        finally:
            self.running = None

    async def call_at_barrier(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """A hook run at a barrier (window, on_watermark): on the thread pool when the task's
        process calls run there, else (and for a coroutine function) as ``call``."""
        if self._executor is None or inspect.iscoroutinefunction(fn):
            await self.call(what, fn, *args)
            return
        self.running = what
        try:
            call = self.pooled = self._executor.submit(fn, *args)
            result = await asyncio.wrap_future(call)
            if inspect.isawaitable(result):
                await result
            self._after_call()
        except BaseException as exc:
            if cancelled_here(exc):
                raise
            raise self._failed(what, exc) from _cause(exc)
        finally:
            self.running = None

    def _failed(self, what: str, exc: BaseException) -> TaskError:
        if isinstance(exc, OperatorError):  # an application's function: name its operator
            error = TaskError(
                f"{what}() of task {self._name!r} failed: {exc}",
                task_name=self._name,
                operator=exc.op_id,
            )
            return error
        return TaskError(f"{what}() of task {self._name!r} failed: {exc!r}", task_name=self._name)


def _cause(exc: BaseException) -> BaseException:
    """The user's own exception: an operator's function's, not the OperatorError around it."""
    if isinstance(exc, OperatorError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


__all__ = ["TaskHooks"]
