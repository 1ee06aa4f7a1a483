"""One task's copy of an operator's function, with its ``init`` and ``close`` hooks.

Each task gets its own copy of every function object (``copy.deepcopy``, one memo per task:
an object given to several operators stays one object in each task, as Samza deserializes a
task's whole graph at once); plain functions, lambdas and builtins are shared, as they carry
no per-task state.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.graph import OperatorSpec

#: Functions shared by every task as they are: they hold no state of their own.
_SHARED = (types.FunctionType, types.BuiltinFunctionType, types.BuiltinMethodType)


class TaskFunction:
    """One task's copy of an operator's function: what to call, and its init and close."""

    __slots__ = ("call", "op", "ready", "target")

    def __init__(self, op: OperatorSpec, fn: Any, what: str, memo: dict[int, Any]) -> None:
        self.op = op
        if isinstance(fn, _SHARED):
            self.target = fn
        else:
            try:
                # One memo per task: an object given to several operators stays one object
                # in each task (as Samza deserializes a task's whole graph at once).
                self.target = copy.deepcopy(fn, memo)
            except Exception as exc:
                raise ConfigError(
                    f"the {what} of operator {op.op_id!r} ({op.kind}) cannot be copied for each "
                    f"task (copy.deepcopy failed: {exc!r}): create what it cannot copy in its "
                    "init(context) instead"
                ) from exc
        apply = getattr(self.target, "apply", None)
        self.call: Callable[..., Any] = apply if callable(apply) else self.target
        #: Whether its ``init`` returned (or it has none): only then is its ``close`` called,
        #: as a task whose start failed closes only what it initialised.
        self.ready = self.hook("init") is None

    def hook(self, name: str) -> Callable[..., Any] | None:
        if isinstance(self.target, _SHARED):
            return None
        method = getattr(self.target, name, None)
        return method if callable(method) else None


__all__ = ["TaskFunction"]
