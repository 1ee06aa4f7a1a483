"""LoopBridge: how a table's plain (blocking) methods run its coroutines from another thread.

A remote table lives on the event loop of its task: its rate limiters, batches and in-flight
calls belong to that loop. Its plain methods (``get``, ``put``...) are for code off the loop,
such as a synchronous task run on the thread pool; they hand the coroutine to the loop and
wait for its result. Called on the loop's own thread they would wait for the loop while
holding it, forever, so they refuse with a TableError that names the coroutine to await
instead.

1. ``open()``, on the loop (the table's ``open`` at task init), notes the loop and its thread.
2. ``run(op, make)`` checks the calling thread before it builds the coroutine (so a refused
   call leaves no coroutine un-awaited), then runs it with
   ``asyncio.run_coroutine_threadsafe(...).result()``: the coroutine's exception is raised
   in the calling thread as it is.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from samzapy.api.errors import TableError

T = TypeVar("T")


class LoopBridge:
    """The event loop a table was opened on, for the table's plain methods."""

    __slots__ = ("_loop", "_thread", "table_id")

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the table was opened on, None before ``open``."""
        return self._loop

    def open(self) -> None:
        """Step 1: note the running loop and its thread (call it on the loop)."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def on_loop_thread(self) -> bool:
        """Whether the caller runs on the thread of the table's loop."""
        return self._thread is not None and threading.get_ident() == self._thread

    def run(self, op: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Step 2: ``make()``'s coroutine, run on the table's loop, from another thread."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise TableError(
                f"table {self.table_id!r}: {op}() needs the table open on a running event loop "
                f"(its task's init opens it), and it is not",
                table_id=self.table_id,
            )
        if self.on_loop_thread():
            raise TableError(
                f"table {self.table_id!r}: {op}() would block the event loop: use "
                f"{op}_async (await table.{op}_async(...)) on the loop, and {op}() only off it "
                f"(a synchronous task on the thread pool)",
                table_id=self.table_id,
            )
        return asyncio.run_coroutine_threadsafe(make(), loop).result()


__all__ = ["LoopBridge"]
