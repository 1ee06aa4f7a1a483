"""The table operators: ``send_to(table)`` and the stream-table join.

Each task has its own instance of every table (``samzapy.tables``), given to the operators
when the task opens (``use_table``). A local table's calls are synchronous: the operators run
inline, as a map does. Anything else (a remote table, a cache) is called with its coroutine
methods and the operator returns an awaitable: the operator task becomes asynchronous, up to
``task.max.concurrency`` messages are in flight per task, and each counts as processed once
its call (and everything after it) completed.

- ``send_to(table)``: a ``KV`` is put, a ``KV`` with value None deletes its key. Writes of one
  key to a remote table are made one after the other, in input order (one key as the table
  tells keys apart: ``samzapy.api.keys``; a list key is a key, 1 and True are two).
- stream-table join (Samza's StreamTableJoinOperatorImpl): ``apply(message, record)`` with
  ``record`` the table's ``KV(key, value)`` or None; a None result is dropped. Remote
  look-ups of successive messages overlap, their results go on in input order.

The stream-stream join is in ``stream_joins.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from samzapy.api.envelope import KV
from samzapy.api.keys import KeyIdentity
from samzapy.operators.impl import OperatorImpl

_new = tuple.__new__


def _kv(message: Any, op: OperatorImpl) -> KV:
    if isinstance(message, KV):
        return message
    error = TypeError(
        f"send_to a table takes KV(key, value) messages, got {type(message).__name__}: map "
        "each message to a KV first"
    )
    raise op.failed(error, "write") from error


class SendToTableOperator(OperatorImpl):
    kind = "send_to_table"
    __slots__ = ("asynchronous", "identity", "last_write", "table", "table_id")

    def __init__(self, op_id: str, table_id: str, asynchronous: bool) -> None:
        super().__init__(op_id)
        self.table_id = table_id
        self.asynchronous = asynchronous
        self.table: Any = None
        #: remote: each key's latest write still in flight (writes of a key keep their
        #: order), by the key's identity in the table
        self.last_write: dict[Any, asyncio.Future[Any]] = {}
        self.identity: Any = None

    def use_table(self, table: Any) -> None:
        self.table = table
        identity = getattr(table, "key_identity", None)
        self.identity = identity or KeyIdentity.structural(self.table_id)

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        kv = _kv(message, self)
        if self.asynchronous:
            return self._write_async(kv)
        try:
            if kv.value is None:
                self.table.delete(kv.key)
            else:
                self.table.put(kv.key, kv.value)
        except Exception as exc:
            raise self.failed(exc, f"write to table {self.table_id!r}") from exc
        return None

    def transform(self, message: Any) -> list[Any]:
        self.on_message(message)
        return []

    def timed(self, message: Any) -> Awaitable[Any] | None:
        return self.on_message(message)

    def _write_async(self, kv: KV) -> Awaitable[Any]:
        try:
            ident = self.identity(kv.key)
        except Exception as exc:  # a key the table cannot tell apart from others
            raise self.failed(exc, f"write to table {self.table_id!r}") from exc
        before = self.last_write.get(ident)
        done = asyncio.get_running_loop().create_future()
        self.last_write[ident] = done
        return self._write(kv, ident, before, done)

    async def _write(self, kv: KV, ident: Any, before: Any, done: asyncio.Future[Any]) -> None:
        try:
            if before is not None:
                await asyncio.shield(before)
            if kv.value is None:
                await self.table.delete_async(kv.key)
            else:
                await self.table.put_async(kv.key, kv.value)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise self.failed(exc, f"write to table {self.table_id!r}") from exc
        finally:
            if not done.done():
                done.set_result(None)
            if self.last_write.get(ident) is done:
                del self.last_write[ident]


class StreamTableJoinOperator(OperatorImpl):
    kind = "stream_table_join"
    counts_out = True
    __slots__ = ("apply", "asynchronous", "clock", "message_key", "previous", "table", "table_id")

    def __init__(self, op_id: str, table_id: str, join_fn: Any, asynchronous: bool) -> None:
        super().__init__(op_id)
        self.table_id = table_id
        self.asynchronous = asynchronous
        self.apply = join_fn.apply
        self.message_key = join_fn.get_message_key
        self.table: Any = None
        #: asynchronous: the previous message's completion (results keep the input order)
        self.previous: asyncio.Future[Any] | None = None
        #: The graph's event clock when it keeps event time (asynchronous: a result goes on
        #: with its message's time, whatever message came in during the look-up).
        self.clock: Any = None

    def use_table(self, table: Any) -> None:
        self.table = table

    def _key(self, message: Any) -> Any:
        try:
            return self.message_key(message)
        except Exception as exc:
            raise self.failed(exc, "get_message_key") from exc

    def _join(self, message: Any, key: Any, value: Any) -> Any:
        record = None if value is None else _new(KV, (key, value))
        try:
            result = self.apply(message, record)
        except Exception as exc:
            raise self.failed(exc) from exc
        if result is not None:
            self.out += 1
        return result

    def transform(self, message: Any) -> list[Any]:
        key = self._key(message)
        try:
            value = None if key is None else self.table.get(key)
        except Exception as exc:
            raise self.failed(exc, f"look-up in table {self.table_id!r}") from exc
        result = self._join(message, key, value)
        return [] if result is None else [result]

    def on_message(self, message: Any) -> Awaitable[Any] | None:
        if self.asynchronous:
            return self._ordered(message, False)
        results = self.transform(message)
        return self.emit(results[0]) if results else None

    def timed(self, message: Any) -> Awaitable[Any] | None:
        if self.asynchronous:
            return self._ordered(message, True)
        return super().timed(message)

    def _ordered(self, message: Any, timed: bool) -> Awaitable[Any]:
        key = self._key(message)
        before = self.previous
        done = self.previous = asyncio.get_running_loop().create_future()
        event_time = None if self.clock is None else self.clock.t
        return self._complete(message, key, before, done, timed, event_time)

    async def _complete(
        self,
        message: Any,
        key: Any,
        before: asyncio.Future[Any] | None,
        done: asyncio.Future[Any],
        timed: bool,
        event_time: int | None,
    ) -> None:
        # The container awaits this at once (its slots await inline): the look-up starts
        # now, in input order, with no task of its own; the result waits for the previous
        # message's to have gone on.
        try:
            try:
                value = None if key is None else await self.table.get_async(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise self.failed(exc, f"look-up in table {self.table_id!r}") from exc
            if before is not None and not before.done():
                await asyncio.shield(before)
            result = self._join(message, key, value)
            if result is None:
                return
            if self.clock is not None:
                self.clock.t = event_time  # another message came in during the look-up
            pending = self.timed_after([result]) if timed else self.emit(result)
            if pending is not None:
                await pending
        finally:
            if not done.done():
                done.set_result(None)


__all__ = ["SendToTableOperator", "StreamTableJoinOperator"]
