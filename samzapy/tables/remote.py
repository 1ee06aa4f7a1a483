"""RemoteTable: a task's instance of a table behind a service (Samza's RemoteTable).

The application gives a read function (``get_async(key)``, optionally ``get_all_async(keys)``)
and, for a table it writes, a write function (``put_async``, ``delete_async``, optionally
``put_all_async(entries)`` and ``delete_all_async(keys)``); each task has its own copy of
them and its own RemoteTable. The table adds, in this order around each call of a function:

1. Batching (``with_write_batch``): writes wait in batches and go out with one
   ``put_all_async``/``delete_all_async`` call each (or one call per key when the write
   function has no such method); see ``samzapy.tables.batch`` for ordering and completion.
   Reads never wait for a batch, and do not see the writes still waiting in one.
2. Retries (``with_read_retry_policy``/``with_write_retry_policy``): a call that fails with an
   exception the policy's predicate accepts is tried again after ``policy.sleep_before``,
   until the policy's attempts or delay run out. Then, or at once without a policy, the
   caller gets a TableError naming the table, the operation and the key(s), the last
   exception in ``__cause__``. Cancellation (``asyncio.CancelledError``) is never retried
   nor wrapped.
3. Rate limiting (``with_read_rate_limit``/``with_write_rate_limit``): each attempt takes one
   token per key from the direction's token bucket (``samzapy.tables.rate_limit``) and
   awaits its turn when the bucket is empty; the event loop keeps running meanwhile.

A cache in front of this same instance (``caches``: a caching table of the task over it)
drops its entries of the keys a write changes once the write completed (or failed), so that
a write made to the table directly (not through the cache) is seen through the cache too.

Keys are told apart by their type and value (``samzapy.api.keys``, rule 3): ``get_all``
asks for each key once and answers with the keys as given (a list key included), and a
batch sent without ``put_all_async`` puts each key's last value once.

``put_async(key, None)`` deletes the key, as ``(key, None)`` in ``put_all_async`` does; an
absent key reads as None and is left out of ``get_all_async``'s result. A table without a
write function is read-only: a write raises TableError naming the table.

Life cycle, on the task's event loop at task init: ``attach(context)`` notes the loop and the
context of the functions' ``init``; ``open(context)`` (attaching first if need be) calls each
function's optional ``init(context)``, once, and so does the first call of a table attached
but not yet open (``samzapy.tables.functions``: a function's ``init`` may use any table of
the task). ``close()`` sends what waits in a batch, waits for it, then calls each function's
optional ``close()``. The plain methods (``get``, ``put``...) are for code off the event loop
and refuse to run on it (``samzapy.tables.bridge``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from samzapy.api.envelope import KV
from samzapy.api.errors import ConfigError, TableError
from samzapy.api.keys import KeyIdentity, by_identity, found_map, unique
from samzapy.api.retry import TableRetryPolicy
from samzapy.api.store import entry_pairs, key_list
from samzapy.api.tables import RemoteTableDescriptor
from samzapy.tables.batch import WriteBatcher
from samzapy.tables.bridge import LoopBridge
from samzapy.tables.functions import TableFunctions
from samzapy.tables.local import CachedBehind, not_a_pair, not_keys
from samzapy.tables.metrics import TableMetrics
from samzapy.tables.rate_limit import TokenBucket

# How many keys a failure message lists before it says how many more there were.
_KEYS_SHOWN = 5


class RemoteTable(CachedBehind):
    """Table ``descriptor.table_id`` over ``read_fn`` and ``write_fn`` (None: read-only), this
    task's copies; ``clock`` (seconds, default ``time.monotonic``) drives the rate limiters
    and the retry policies' delays. See the module docstring."""

    #: The plain methods refuse to run on the event loop's thread.
    sync_anywhere = False
    #: No serde: keys are told apart by type and value (``key_identity``).
    key_serde = None

    def __init__(
        self,
        descriptor: RemoteTableDescriptor,
        read_fn: Any,
        write_fn: Any = None,
        *,
        metrics: TableMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()  # the caches in front of it (see the module docstring)
        table_id = self.table_id = descriptor.table_id
        if read_fn is None or not callable(getattr(read_fn, "get_async", None)):
            raise ConfigError(
                f"table {table_id!r}: a remote table needs a read function with a coroutine "
                f"method get_async(key) (with_read_function), got {read_fn!r}"
            )
        self.descriptor = descriptor
        self.read_fn = read_fn
        self.write_fn = write_fn
        self.metrics = metrics if metrics is not None else TableMetrics(table_id)
        self._clock = clock
        self._read_retry = descriptor.read_retry
        self._write_retry = descriptor.write_retry
        self._read_limiter = _bucket(descriptor.read_rate, clock)
        self._write_limiter = _bucket(descriptor.write_rate, clock)
        self._get_all = _method(read_fn, "get_all_async")
        self._put_all = _method(write_fn, "put_all_async")
        self._delete_all = _method(write_fn, "delete_all_async")
        self._bridge = LoopBridge(table_id)
        self._functions = TableFunctions(table_id, read_fn, write_fn)
        self.key_identity = KeyIdentity.structural(table_id)
        self._batcher: WriteBatcher | None = None
        if descriptor.batch_size is not None and write_fn is not None:
            self._batcher = WriteBatcher(
                descriptor.batch_size, descriptor.batch_delay_ms / 1000, self._send_batch
            )

    # -- life cycle -------------------------------------------------------------------------------

    def attach(self, context: Any) -> None:
        """At task init, on the task's event loop: note the loop, and the context the
        functions' ``init`` gets (a first call then opens the table)."""
        self._bridge.open()
        self._functions.attach(context)

    async def open(self, context: Any) -> None:
        """``init(context)`` each function that has one, once (attached first if need be)."""
        if not self._functions.attached:
            self.attach(context)
        await self._functions.initialise()

    @property
    def opened(self) -> bool:
        """Whether the functions' ``init`` all returned."""
        return self._functions.ready

    @property
    def begun(self) -> bool:
        """Whether a function's ``init`` returned, so that ``close`` has something to close
        (a table whose other function's ``init`` failed is not ``opened``, but is begun)."""
        return self._functions.begun

    @property
    def opened_at(self) -> int | None:
        """When the table became ready, in the process's order of tables (None: not yet)."""
        return self._functions.ready_at

    async def close(self) -> None:
        """Send and wait for the batched writes, then ``close()`` each function that has one
        (all of them, even when one fails; the first failure is raised after)."""
        await self.flush_async()
        await self._functions.close()

    # -- reads ------------------------------------------------------------------------------------

    async def get_async(self, key: Any) -> Any:
        self.metrics.gets += 1
        return await self._call("get", key, 1, self.read_fn.get_async, key)

    async def get_all_async(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        identity = self.key_identity
        wanted, idents = unique(identity, key_list(keys, not_keys(self.table_id, "get_all")))
        if not wanted:
            return {}
        self.metrics.gets += len(wanted)
        if self._get_all is not None:
            read = await self._call("get_all", wanted, len(wanted), self._get_all, wanted)
            found = by_identity(identity, read)  # a mapping, or (key, value) pairs
        else:
            get = self.read_fn.get_async
            values = await _all_or_cancel([self._call("get", key, 1, get, key) for key in wanted])
            found = {i: v for i, v in zip(idents, values, strict=True) if v is not None}
        pairs = [(key, found[i]) for key, i in zip(wanted, idents, strict=True) if i in found]
        return found_map(identity, pairs)

    # -- writes -----------------------------------------------------------------------------------

    async def put_async(self, key: Any, value: Any) -> None:
        if value is None:
            await self.delete_async(key)
            return
        write_fn = self._writable("put", key)
        self.metrics.puts += 1
        try:
            if self._batcher is not None:
                await asyncio.shield(self._batcher.add("put", key, value))
            else:
                await self._call("put", key, 1, write_fn.put_async, key, value)
        finally:
            self._changed((key,))

    async def put_all_async(
        self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]
    ) -> None:
        pairs = list(entry_pairs(entries, not_a_pair(self.table_id)))
        if not pairs:
            return
        self._writable("put_all", [key for key, _ in pairs])
        for _, value in pairs:
            if value is None:
                self.metrics.deletes += 1
            else:
                self.metrics.puts += 1
        # Runs of puts and runs of deletions, in order: [(k, 1), (k, None)] leaves k absent.
        runs: list[tuple[str, list[tuple[Any, Any]]]] = []
        for key, value in pairs:
            kind = "delete" if value is None else "put"
            if not runs or runs[-1][0] != kind:
                runs.append((kind, []))
            runs[-1][1].append((key, value))
        try:
            if self._batcher is not None:
                batcher = self._batcher
                await _wait_batches([f for kind, run in runs for f in batcher.add_all(kind, run)])
                return
            for kind, run in runs:
                await self._send_batch(kind, run)
        finally:
            self._changed([key for key, _ in pairs])

    async def delete_async(self, key: Any) -> None:
        write_fn = self._writable("delete", key)
        self.metrics.deletes += 1
        try:
            if self._batcher is not None:
                await asyncio.shield(self._batcher.add("delete", key))
            else:
                await self._call("delete", key, 1, write_fn.delete_async, key)
        finally:
            self._changed((key,))

    async def delete_all_async(self, keys: Iterable[Any]) -> None:
        keys = key_list(keys, not_keys(self.table_id, "delete_all"))
        if not keys:
            return
        self._writable("delete_all", keys)
        self.metrics.deletes += len(keys)
        entries = [(key, None) for key in keys]
        try:
            if self._batcher is not None:
                await _wait_batches(self._batcher.add_all("delete", entries))
            else:
                await self._send_batch("delete", entries)
        finally:
            self._changed(keys)

    async def flush_async(self) -> None:
        """Send the writes waiting in a batch and wait until every batch sent has completed
        (a batch's failure goes to its writers, not here)."""
        if self._batcher is not None:
            await self._batcher.flush()

    async def _send_batch(self, kind: str, entries: list[tuple[Any, Any]]) -> None:
        """One call of ``put_all_async``/``delete_all_async``, or one call per key (the last
        value of each key, concurrently) when the write function has no such method."""
        write_fn = self.write_fn
        keys = [key for key, _ in entries]
        if kind == "put":
            if self._put_all is not None:
                await self._call("put_all", keys, len(entries), self._put_all, entries)
                return
            identity = self.key_identity
            latest = {identity(k): (k, v) for k, v in entries}
            await _all_or_cancel(
                [self._call("put", k, 1, write_fn.put_async, k, v) for k, v in latest.values()]
            )
        else:
            if self._delete_all is not None:
                await self._call("delete_all", keys, len(keys), self._delete_all, keys)
                return
            once, _ = unique(self.key_identity, keys)
            await _all_or_cancel(
                [self._call("delete", k, 1, write_fn.delete_async, k) for k in once]
            )

    def _writable(self, op: str, key: Any) -> Any:
        if self.write_fn is None:
            raise TableError(
                f"table {self.table_id!r} is read-only (it has no write function): cannot "
                f"{op} {_keys(key)}; give it one with with_write_function(...)",
                table_id=self.table_id,
                key=key,
            )
        return self.write_fn

    # -- one call: rate limit and retries ----------------------------------------------------------

    async def _call(
        self, op: str, key: Any, tokens: int, fn: Callable[..., Any], *args: Any
    ) -> Any:
        """``fn(*args)``, rate-limited and retried as ``op``'s direction says (steps 2 and 3
        of the module docstring); a TableError once it failed for good."""
        functions = self._functions
        if not functions.ready and functions.attached:
            await functions.initialise()  # used before it was opened
        reading = op in ("get", "get_all")
        policy = self._read_retry if reading else self._write_retry
        limiter = self._read_limiter if reading else self._write_limiter
        metrics = self.metrics
        first = self._clock()
        attempt = 1
        while True:
            if limiter is not None:
                wait = limiter.reserve(tokens)
                if wait > 0:
                    metrics.rate_limit_waits += 1
                    metrics.rate_limit_wait_ns += int(wait * 1e9)
                    await asyncio.sleep(wait)
            start = time.perf_counter_ns()
            try:
                result = await fn(*args)
            except Exception as exc:  # CancelledError is a BaseException: never caught here
                metrics.call_latency.update_ns(time.perf_counter_ns() - start)
                delay, why = retry_delay(policy, attempt, self._clock() - first, exc)
                if delay is None:
                    metrics.failures += 1
                    raise TableError(
                        f"table {self.table_id!r}: {op} of {_keys(key)} failed {why}: {exc!r}",
                        table_id=self.table_id,
                        key=key,
                    ) from exc
                metrics.retries += 1
                attempt += 1
                await asyncio.sleep(delay)
            else:
                metrics.call_latency.update_ns(time.perf_counter_ns() - start)
                return result

    # -- plain methods, for code off the event loop ----------------------------------------------

    def _blocking(self, op: str, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        return self._bridge.run(op, make)

    def get(self, key: Any) -> Any:
        return self._blocking("get", lambda: self.get_async(key))

    def get_all(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        keys = key_list(keys, not_keys(self.table_id, "get_all"))
        found: Mapping[Any, Any] = self._blocking("get_all", lambda: self.get_all_async(keys))
        return found

    def put(self, key: Any, value: Any) -> None:
        self._blocking("put", lambda: self.put_async(key, value))

    def put_all(self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]) -> None:
        listed = list(entry_pairs(entries, not_a_pair(self.table_id)))
        self._blocking("put_all", lambda: self.put_all_async(listed))

    def delete(self, key: Any) -> None:
        self._blocking("delete", lambda: self.delete_async(key))

    def delete_all(self, keys: Iterable[Any]) -> None:
        keys = key_list(keys, not_keys(self.table_id, "delete_all"))
        self._blocking("delete_all", lambda: self.delete_all_async(keys))

    def flush(self) -> None:
        self._blocking("flush", self.flush_async)

    def __repr__(self) -> str:
        return f"RemoteTable({self.table_id!r}, {self.descriptor.describe()})"


def retry_delay(
    policy: TableRetryPolicy | None, attempt: int, elapsed_s: float, exc: BaseException
) -> tuple[float | None, str]:
    """Whether to try again after attempt ``attempt`` failed with ``exc``, ``elapsed_s``
    seconds after the first attempt started: ``(seconds to sleep, "")``, or ``(None, why
    not)`` with the reason as the failure message puts it."""
    if policy is None:
        return None, "(no retry policy)"
    if not policy.predicate(exc):
        return None, f"(not retried: the retry predicate declines {type(exc).__name__})"
    tries = f"after {attempt} attempt{'s' if attempt > 1 else ''}"
    if policy.max_attempts is not None and attempt >= policy.max_attempts:
        return None, tries
    delay = policy.sleep_before(attempt + 1)
    if policy.max_delay_ms is not None and (elapsed_s + delay) * 1000 > policy.max_delay_ms:
        return None, f"{tries} (the retry policy stops after {policy.max_delay_ms} ms)"
    return delay, ""


def _keys(key: Any) -> str:
    """``key 'a'``, or for a list ``keys ['a', 'b', ...] (12 in all)``."""
    if not isinstance(key, list):
        return f"key {key!r}"
    shown = ", ".join(repr(k) for k in key[:_KEYS_SHOWN])
    more = f", ... ({len(key)} in all)" if len(key) > _KEYS_SHOWN else ""
    return f"keys [{shown}{more}]"


def _bucket(rate: float | None, clock: Callable[[], float]) -> TokenBucket | None:
    return None if rate is None else TokenBucket(rate, clock)


def _method(fn: Any, name: str) -> Callable[..., Any] | None:
    method = getattr(fn, name, None) if fn is not None else None
    return method if callable(method) else None


async def _all_or_cancel(calls: list[Coroutine[Any, Any, Any]]) -> list[Any]:
    """Every call's result, run concurrently; the first failure cancels the others."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


async def _wait_batches(futures: list[asyncio.Future[None]]) -> None:
    """Wait for every batch a write went into; then raise the first one's failure."""
    await asyncio.wait(futures)
    for future in futures:
        if future.cancelled():  # the batch's call was cancelled: as awaiting it would say
            raise asyncio.CancelledError
        exc = future.exception()
        if exc is not None:
            raise exc


__all__ = ["RemoteTable", "retry_delay"]
