"""Awaitables the operators await, and those they give up.

A message's processing through an application's graph may leave awaitables: a
``flat_map_async``'s, or those of a fan-out's branches (``await_all``). When the task stops
first, what was never awaited is let go of (``let_go``): a future is cancelled, a coroutine
closed, and one of the operators' own coroutines not started yet first lets go of what it
was to await, which closing it alone would leave running (a Task) or never awaited (a
coroutine). The operators return bare coroutines, the cheapest awaitable, so which argument
such a coroutine awaits is registered by its function (``awaits_argument``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from types import CodeType
from typing import Any

#: The operators' own coroutine functions, by their code: the argument each awaits.
_OWED: dict[CodeType, str] = {}


def awaits_argument(function: Callable[..., Any], argument: str) -> None:
    """Register ``function``, an ``async def`` of the operators', as awaiting its argument
    ``argument`` (an awaitable, or a list of them): ``let_go`` lets go of it when the
    coroutine is given up before it started."""
    _OWED[function.__code__] = argument


async def await_all(pending: list[Awaitable[Any]], failure: Exception | None = None) -> None:
    """Await each of ``pending`` in turn. When one fails the rest are still awaited (no
    branch of a fan-out is left never awaited, nor what its function started running on its
    own), then the first failure is raised: ``failure``, a synchronous one that came after
    them, first. A cancellation lets go of those not awaited yet (``let_go``)."""
    for i, awaitable in enumerate(pending):
        try:
            await awaitable
        except Exception as exc:
            if failure is None:
                failure = exc
        except BaseException:
            for rest in pending[i + 1 :]:
                let_go(rest)
            raise
    if failure is not None:
        raise failure


def let_go(awaitable: Awaitable[Any]) -> None:
    """Give up ``awaitable``, never awaited (its message's processing was cancelled first:
    the task stopped): a future (a Task, ``asyncio.gather``'s) is cancelled, so that what it
    runs stops with the message; a coroutine is closed. One of the operators' own not started
    yet (``await_all``'s, those ``awaits_argument`` registered) first has what it was to
    await let go of, which closing it would leave as it was: a Task running on its own, a
    coroutine never awaited."""
    if asyncio.isfuture(awaitable):
        awaitable.cancel()
        awaitable.add_done_callback(_outcome_taken)
    elif inspect.iscoroutine(awaitable):
        given = _OWED.get(awaitable.cr_code)
        if given is not None and inspect.getcoroutinestate(awaitable) == inspect.CORO_CREATED:
            owed = inspect.getcoroutinelocals(awaitable)[given]
            for each in owed if type(owed) is list else (owed,):
                let_go(each)
        awaitable.close()


def not_awaited(result: Any, what: str) -> TypeError:
    """The error of a function of an operator that awaits nothing (a ``filter``, a ``sink``)
    that returned an awaitable anyway (a sync function calling an ``async def`` one), which is
    let go of (``let_go``): a coroutine would never run, and is true (a filter would keep
    every message)."""
    let_go(result)
    return TypeError(
        f"{what} returned {type(result).__name__}, an awaitable it does not await: do "
        "asynchronous work in a flat_map_async"
    )


def _outcome_taken(future: asyncio.Future[Any]) -> None:
    """A future let go of ended: its outcome goes nowhere (``asyncio.gather``'s, cancelled,
    ends with a CancelledError as its exception, which asyncio would log as never retrieved)."""
    if not future.cancelled():
        future.exception()


awaits_argument(await_all, "pending")

__all__ = ["await_all", "awaits_argument", "let_go", "not_awaited"]
