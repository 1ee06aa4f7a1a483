"""WriteBatcher: a remote table's writes, held and sent in batches (Samza's batch provider).

Writes (puts and deletes) wait in the current batch until ``max_size`` of them are waiting or
the oldest has waited ``max_delay`` seconds; then the batch goes out in one call of ``send(kind,
entries)`` (the remote table's ``put_all_async`` or ``delete_all_async`` of its write
function). The rules:

1. A batch holds one kind of write. A write of the other kind sends the current batch first,
   so a delete after a put of the same key (or a put after a delete) is never reordered.
2. Batches are sent one at a time, in the order they were closed: a batch's call starts once
   the previous batch's call has returned (failed or not). So writes reach the remote side in
   the order they were made, at the price of one batch in flight at a time.
3. Each write's future completes when its batch's call did, with the call's exception when it
   failed: every writer of a failed batch sees the failure. A writer that stops waiting
   (cancelled) does not take its write back out of the batch.
4. ``flush()`` sends the current batch at once and waits until every batch sent so far has
   completed. It does not raise a batch's failure (the batch's writers each got it): it only
   makes sure nothing is left in flight, as a commit needs.

Everything runs on the event loop the batcher is used from; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

Send = Callable[[str, list[tuple[Any, Any]]], Awaitable[None]]


class WriteBatcher:
    """Batches of at most ``max_size`` writes, sent at most ``max_delay_s`` after their first
    write arrived, through ``send(kind, entries)`` (see the module docstring)."""

    def __init__(self, max_size: int, max_delay_s: float, send: Send) -> None:
        if max_size < 1:
            raise ValueError(f"a batch holds at least one write, got max_size={max_size!r}")
        self.max_size = max_size
        self.max_delay_s = max(0.0, max_delay_s)
        self._send = send
        self._kind = ""
        self._entries: list[tuple[Any, Any]] = []
        self._future: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_send: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self._unfinished: set[asyncio.Future[None]] = set()

    @property
    def waiting(self) -> int:
        """How many writes wait in the current batch, not yet sent."""
        return len(self._entries)

    def add(self, kind: str, key: Any, value: Any = None) -> asyncio.Future[None]:
        """Put one write in the current batch; the future of its batch (await it shielded:
        ``asyncio.shield(future)``, as other writers share it)."""
        if self._entries and kind != self._kind:
            self._close_batch()  # rule 1
        future = self._future
        if future is None:
            loop = asyncio.get_running_loop()
            future = self._future = loop.create_future()
            self._unfinished.add(future)
            future.add_done_callback(self._unfinished.discard)
            self._kind = kind
            self._timer = loop.call_later(self.max_delay_s, self._close_batch)
        self._entries.append((key, value))
        if len(self._entries) >= self.max_size:
            self._close_batch()
        return future

    def add_all(self, kind: str, entries: list[tuple[Any, Any]]) -> list[asyncio.Future[None]]:
        """``add`` each of ``entries``; the distinct futures of the batches they went into."""
        futures: list[asyncio.Future[None]] = []
        for key, value in entries:
            future = self.add(kind, key, value)
            if not futures or futures[-1] is not future:
                futures.append(future)
        return futures

    async def flush(self) -> None:
        """Rule 4: send the current batch, then wait for every batch sent so far."""
        self._close_batch()
        if self._unfinished:
            await asyncio.wait(list(self._unfinished))

    def _close_batch(self) -> None:
        """Send the current batch (if any), after the batch sent before it (rule 2)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        future = self._future
        if future is None:
            return
        entries, kind = self._entries, self._kind
        self._entries, self._future = [], None
        task = asyncio.get_running_loop().create_task(
            self._send_after(self._last_send, kind, entries, future)
        )
        self._last_send = task
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_after(
        self,
        previous: asyncio.Task[None] | None,
        kind: str,
        entries: list[tuple[Any, Any]],
        future: asyncio.Future[None],
    ) -> None:
        try:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            await self._send(kind, entries)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: no warning when no writer waits any more
            if not isinstance(exc, Exception):
                raise
        else:
            if not future.done():
                future.set_result(None)


__all__ = ["WriteBatcher"]
