"""The checks an application's functions pass when it is described: each is a callable (or
an object with a callable ``apply``), and one its operator calls synchronously is no
coroutine function, whose coroutine nothing would await."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from samzapy.api.errors import ConfigError


def check_function(fn: Any, what: str) -> Any:
    """``fn`` if it is a callable or an object with a callable ``apply``."""
    if callable(getattr(fn, "apply", None)) or callable(fn):
        return fn
    raise ConfigError(f"{what} must be a callable or an object with an apply method, got {fn!r}")


def is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine: an ``async def`` function or method, an
    object whose ``__call__`` is one, or a ``functools.partial`` of either."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    # type(fn)'s __call__: an object's own; a class's is its metaclass's (it makes an object)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(type(fn), "__call__", None)  # noqa: B004 (the method, not whether fn is callable)
    )


def check_sync(fn: Any, what: str) -> Any:
    """``fn`` unless it (or its ``apply``) is asynchronous: a ConfigError naming ``what``."""
    apply = getattr(fn, "apply", None)
    if is_async(apply if callable(apply) else fn):
        raise ConfigError(
            f"{what} is a coroutine function (async def), whose coroutine would never be "
            f"awaited, got {fn!r}: use flat_map_async for asynchronous work"
        )
    return fn


def check_sync_function(fn: Any, what: str) -> Any:
    """``fn`` if it is a function (``check_function``) its operator can call synchronously."""
    return check_sync(check_function(fn, what), what)


__all__ = ["check_function", "check_sync", "check_sync_function", "is_async"]
