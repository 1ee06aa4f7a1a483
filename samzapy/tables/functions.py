"""TableFunctions: the life cycle of a remote table's read and write functions.

A task's remote table holds its own copies of the functions (``RemoteTable``); their optional
``init(context)`` and ``close()``, plain or coroutine functions, run on the task's event loop:

1. ``attach(context)`` notes the context ``init`` gets. The task attaches every table before
   it opens any (``samzapy.operators.task_tables``).
2. ``initialise()`` calls each function's ``init(context)``, once: when the task opens the
   table, or earlier, at the table's first call once attached (from another table's
   function's ``init``, which may reach any table of the task), so that a function's
   ``init`` finds every table it reaches ready, whatever order they were described in.
   Concurrent first calls share that one ``init``; one cancelled in it (a caller that gave
   up waiting) leaves it to the next call, which runs the ``init`` of the functions whose
   ``init`` had not returned. A call made from the table's own
   functions' ``init`` (directly, or through another table's) goes ahead without waiting:
   nothing it could wait for would end.
3. ``close()`` calls the ``close()`` of each function whose ``init`` returned (all of them,
   even when one fails; the first failure is raised after): when the write function's
   ``init`` fails, the read function's ``close`` still releases what its ``init`` opened,
   and the write function's is not called (``begun``: such a table still has something to
   close). The task closes its
   tables in the reverse order they became ready (``ready_at``), so a function's ``close``
   may still use the tables its ``init`` did.

One object given as both functions is one function: its ``init`` and ``close`` run once.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from contextvars import ContextVar
from typing import Any

from samzapy.api.errors import TableError

#: The order in which functions became ready (step 2).
_READY = itertools.count()
#: The functions whose ``init`` this chain of calls is inside (step 2).
_INITIALISING: ContextVar[tuple[TableFunctions, ...]] = ContextVar(
    "samzapy_table_functions_initialising", default=()
)


class TableFunctions:
    """The read and write functions (None: read-only) of table ``table_id``."""

    def __init__(self, table_id: str, read_fn: Any, write_fn: Any) -> None:
        self.table_id = table_id
        #: The functions by role, once each (one object may be both).
        self.roles: list[tuple[str, Any]]
        if write_fn is None:
            self.roles = [("read", read_fn)]
        elif write_fn is read_fn:
            self.roles = [("read/write", read_fn)]
        else:
            self.roles = [("read", read_fn), ("write", write_fn)]
        self._context: Any = None
        self._attached = False
        #: Whether every ``init`` returned (step 2), and when, in the order of the process's
        #: functions (a table whose ``init`` used another one became ready after it).
        self.ready = False
        self.ready_at: int | None = None
        #: The functions whose ``init`` returned (or that have none), in that order.
        self._initialised_roles: list[tuple[str, Any]] = []
        #: Set once step 2 ended, either way (None: not begun).
        self._initialised: asyncio.Event | None = None

    @property
    def begun(self) -> bool:
        """Whether a function's ``init`` returned: ``close`` has something to close, even
        when the table never became ready."""
        return bool(self._initialised_roles)

    @property
    def attached(self) -> bool:
        """Whether step 1 ran (a first call then runs step 2)."""
        return self._attached

    def attach(self, context: Any) -> None:
        """Step 1."""
        self._context, self._attached = context, True

    async def initialise(self) -> None:
        """Step 2 (nothing once it ran). A first call cancelled in an ``init`` (a caller that
        gave up waiting) is no failure: the next call, or one waiting, runs the ``init`` of
        the functions whose ``init`` did not return."""
        while True:
            if self.ready or self in _INITIALISING.get():
                return
            running = self._initialised
            if running is None:
                break
            await running.wait()  # a concurrent first call runs it: wait for it
            if self.ready:
                return
            if self._initialised is running:  # it ended without being cancelled: it failed
                raise TableError(
                    f"table {self.table_id!r} is not usable: the init of its functions failed",
                    table_id=self.table_id,
                )
        self._initialised = running = asyncio.Event()
        token = _INITIALISING.set((*_INITIALISING.get(), self))
        try:
            for role, fn in self.roles:
                if any(fn is done for _, done in self._initialised_roles):
                    continue  # its init returned before a cancelled call's
                await self._call(role, fn, "init", self._context)
                self._initialised_roles.append((role, fn))
            self.ready, self.ready_at = True, next(_READY)
        except asyncio.CancelledError:
            self._initialised = None  # not begun, for the next call
            raise
        finally:
            _INITIALISING.reset(token)
            running.set()

    async def close(self) -> None:
        """Step 3."""
        failure: TableError | None = None
        for role, fn in self._initialised_roles:
            try:
                await self._call(role, fn, "close")
            except TableError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    async def _call(self, role: str, fn: Any, name: str, *args: Any) -> None:
        method = getattr(fn, name, None)
        if not callable(method):
            return
        try:
            result = method(*args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raise TableError(
                f"table {self.table_id!r}: {name} of its {role} function failed: {exc!r}",
                table_id=self.table_id,
            ) from exc


__all__ = ["TableFunctions"]
