"""Tables (Samza's Table API): what an application describes, and what a task reads and writes.

A table is a key-value view a task reads and writes by key: a local one (an in-memory or
RocksDB store of the task, changelogged on request), a remote one (a service reached through
the coroutine functions the application gives), or a cache in front of either.

    profiles = app_desc.get_table(
        RocksDbTableDescriptor("profiles", KVSerde("string", "json")).with_changelog_enabled()
    )
    views.join(profiles, EnrichWithProfile()).send_to(enriched)

``app_desc.get_table(descriptor)`` returns a ``Table``: a handle for ``send_to`` and ``join``
while the graph is described. At run time each task has its own instance of every table,
which its functions reach in ``init(context)`` with ``context.get_table(table_id)`` (a
``ReadWriteTable``), as low-level tasks do.

A local table of task ``t`` is store ``<table_id>`` of ``t`` (``stores.<table_id>.*``, the
keys a job file would set, which win); a remote table has one instance per task too, each
with its own rate limiter, so a job's rate is the limit times its tasks (as in Samza).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, Protocol

from samzapy.api.descriptors import KVSerde, check_id
from samzapy.api.durations import duration_ms
from samzapy.api.envelope import KV
from samzapy.api.errors import ConfigError
from samzapy.api.retry import TableRetryPolicy


class TableDescriptor:
    """What every table descriptor has: its id (``[A-Za-z0-9_-]+``, unique in the job)."""

    kind = ""

    def __init__(self, table_id: str) -> None:
        self.table_id = check_id(table_id, "a table id")

    def describe(self) -> str:
        """One line for ``samzapy plan``."""
        return self.kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.table_id!r})"


class LocalTableDescriptor(TableDescriptor):
    """A table kept in one of the task's stores (``stores.<table_id>.*``)."""

    factory = ""

    def __init__(self, table_id: str, kv_serde: KVSerde) -> None:
        super().__init__(table_id)
        if not isinstance(kv_serde, KVSerde):
            raise ConfigError(
                f"table {table_id!r}: a local table takes a KVSerde(key_serde, value_serde), "
                f"got {kv_serde!r}"
            )
        self.kv_serde = kv_serde
        self.changelog_enabled = False
        self.changelog_stream: str | None = None
        self.configs: dict[str, Any] = {}

    def with_changelog_enabled(self) -> LocalTableDescriptor:
        """Back the table with a changelog (``<job.name>-<job.id>-table-<table_id>`` on the
        job's intermediate system): a restarted or moved task restores it, exact after a crash
        as stores are."""
        self.changelog_enabled = True
        return self

    def with_changelog_stream(self, stream: str) -> LocalTableDescriptor:
        """The changelog's topic (a name on the job's intermediate system); enables it."""
        if not isinstance(stream, str) or not stream or "/" in stream:
            raise ConfigError(
                f"table {self.table_id!r}: the changelog stream must be a topic name, "
                f"got {stream!r}"
            )
        self.changelog_stream = stream
        self.changelog_enabled = True
        return self

    def with_config(self, key: str, value: Any) -> LocalTableDescriptor:
        """Any other ``stores.<table_id>.<key>`` setting (``object.cache.size``, ...)."""
        if not isinstance(key, str) or not key:
            raise ConfigError(f"table {self.table_id!r}: with_config takes a key, got {key!r}")
        self.configs[key] = value
        return self

    def describe(self) -> str:
        changelog = ", changelogged" if self.changelog_enabled else ""
        return f"{self.factory} store {self.table_id}{changelog}"


class InMemoryTableDescriptor(LocalTableDescriptor):
    """A table in an in-memory store of each task (Samza's InMemoryTableDescriptor)."""

    kind = "inmemory"
    factory = "inmemory"


class RocksDbTableDescriptor(LocalTableDescriptor):
    """A table in a RocksDB store of each task (Samza's RocksDbTableDescriptor)."""

    kind = "rocksdb"
    factory = "rocksdb"


class RemoteTableDescriptor(TableDescriptor):
    """A table behind coroutine functions (Samza's RemoteTableDescriptor).

    The read function has ``async get_async(key)`` (None when absent) and optionally ``async
    get_all_async(keys)`` (a dict); the write function ``async put_async(key, value)``,
    ``async delete_async(key)`` and optionally ``put_all_async(entries)`` and
    ``delete_all_async(keys)``. Either may have ``init(context)`` and ``close()``; each task
    gets its own copy. A table with no write function is read-only."""

    kind = "remote"

    def __init__(self, table_id: str) -> None:
        super().__init__(table_id)
        self.read_fn: Any = None
        self.write_fn: Any = None
        self.read_rate: float | None = None
        self.write_rate: float | None = None
        self.read_retry: TableRetryPolicy | None = None
        self.write_retry: TableRetryPolicy | None = None
        self.batch_size: int | None = None
        self.batch_delay_ms = 0

    def with_read_function(self, fn: Any) -> RemoteTableDescriptor:
        if not callable(getattr(fn, "get_async", None)):
            raise ConfigError(
                f"table {self.table_id!r}: the read function must have a coroutine method "
                f"get_async(key), got {fn!r}"
            )
        self.read_fn = fn
        return self

    def with_write_function(self, fn: Any) -> RemoteTableDescriptor:
        missing = [m for m in ("put_async", "delete_async") if not callable(getattr(fn, m, None))]
        if missing:
            raise ConfigError(
                f"table {self.table_id!r}: the write function must have coroutine methods "
                f"put_async(key, value) and delete_async(key); {fn!r} has no {missing[0]}"
            )
        self.write_fn = fn
        return self

    def with_read_rate_limit(self, per_second: float) -> RemoteTableDescriptor:
        """At most ``per_second`` reads a second per task (a token bucket, one second of
        burst at most); a read over the limit waits for its token."""
        self.read_rate = _rate(per_second, f"table {self.table_id!r}: the read rate limit")
        return self

    def with_write_rate_limit(self, per_second: float) -> RemoteTableDescriptor:
        self.write_rate = _rate(per_second, f"table {self.table_id!r}: the write rate limit")
        return self

    def with_read_retry_policy(self, policy: TableRetryPolicy) -> RemoteTableDescriptor:
        self.read_retry = _policy(policy, self.table_id)
        return self

    def with_write_retry_policy(self, policy: TableRetryPolicy) -> RemoteTableDescriptor:
        self.write_retry = _policy(policy, self.table_id)
        return self

    def with_write_batch(
        self, max_size: int, max_delay: timedelta = timedelta(milliseconds=10)
    ) -> RemoteTableDescriptor:
        """Batch writes: puts and deletes are held until ``max_size`` are waiting or the
        oldest has waited ``max_delay``, then sent with the write function's
        ``put_all_async``/``delete_all_async`` (one call each per batch). A write completes
        when its batch did; a task's commit waits for every batch (Samza's batch provider)."""
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigError(
                f"table {self.table_id!r}: the batch size must be a whole number of 1 or more, "
                f"got {max_size!r}"
            )
        self.batch_size = max_size
        self.batch_delay_ms = duration_ms(max_delay, f"table {self.table_id!r}: the batch delay")
        return self

    def describe(self) -> str:
        parts = ["remote", "read" + ("/write" if self.write_fn is not None else " only")]
        if self.read_rate is not None:
            parts.append(f"reads ≤ {self.read_rate:g}/s")
        if self.write_rate is not None:
            parts.append(f"writes ≤ {self.write_rate:g}/s")
        if self.read_retry is not None or self.write_retry is not None:
            parts.append("retried")
        if self.batch_size is not None:
            parts.append(f"write batches of {self.batch_size}")
        return ", ".join(parts)


class CachingTableDescriptor(TableDescriptor):
    """A cache in front of another table (Samza's CachingTableDescriptor): reads are served
    from the cache while fresh; writes go through to the table and update the cache
    (write-through), or with ``with_write_around()`` invalidate the cache entry instead."""

    kind = "caching"

    def __init__(self, table_id: str, table_descriptor: TableDescriptor) -> None:
        super().__init__(table_id)
        if not isinstance(table_descriptor, TableDescriptor) or isinstance(
            table_descriptor, CachingTableDescriptor
        ):
            raise ConfigError(
                f"table {table_id!r}: a caching table is put in front of a local or remote "
                f"table descriptor, got {table_descriptor!r}"
            )
        self.table = table_descriptor
        self.read_ttl_ms: int | None = None
        self.write_ttl_ms: int | None = None
        self.cache_size = 1000
        self.write_around = False

    def with_read_ttl(self, ttl: timedelta) -> CachingTableDescriptor:
        """How long an entry read from the table stays in the cache."""
        self.read_ttl_ms = duration_ms(ttl, f"table {self.table_id!r}: the read ttl")
        return self

    def with_write_ttl(self, ttl: timedelta) -> CachingTableDescriptor:
        """How long an entry written through the cache stays in it (default: the read ttl)."""
        self.write_ttl_ms = duration_ms(ttl, f"table {self.table_id!r}: the write ttl")
        return self

    def with_cache_size(self, entries: int) -> CachingTableDescriptor:
        """At most this many entries per task, least recently used out first (default 1000)."""
        if isinstance(entries, bool) or not isinstance(entries, int) or entries < 1:
            raise ConfigError(
                f"table {self.table_id!r}: the cache size must be a whole number of 1 or more, "
                f"got {entries!r}"
            )
        self.cache_size = entries
        return self

    def with_write_around(self) -> CachingTableDescriptor:
        """Writes skip the cache (and drop the key's entry) instead of updating it."""
        self.write_around = True
        return self

    def describe(self) -> str:
        mode = "write-around" if self.write_around else "write-through"
        ttl = "" if self.read_ttl_ms is None else f", read ttl {self.read_ttl_ms} ms"
        return f"cache of {self.cache_size} ({mode}{ttl}) in front of {self.table.table_id}"


def _rate(per_second: Any, what: str) -> float:
    if isinstance(per_second, bool) or not isinstance(per_second, int | float) or per_second <= 0:
        raise ConfigError(
            f"{what} must be a number of calls a second above zero, got {per_second!r}"
        )
    return float(per_second)


def _policy(policy: Any, table_id: str) -> TableRetryPolicy:
    if not isinstance(policy, TableRetryPolicy):
        raise ConfigError(
            f"table {table_id!r}: a retry policy is a TableRetryPolicy, got {policy!r}"
        )
    return policy


class Table:
    """An application's handle on a table (``app_desc.get_table``): what ``send_to`` and
    ``join`` take. Tasks reach the table itself with ``context.get_table(table_id)``."""

    __slots__ = ("descriptor", "graph")

    def __init__(self, graph: Any, descriptor: TableDescriptor) -> None:
        self.graph = graph
        self.descriptor = descriptor

    @property
    def table_id(self) -> str:
        return self.descriptor.table_id

    def __repr__(self) -> str:
        return f"Table({self.table_id!r})"


class ReadWriteTable(Protocol):
    """A task's instance of a table (``context.get_table(table_id)``).

    The ``*_async`` methods are coroutine functions, for the event loop (``process_async``,
    ``flat_map_async``, ...). The plain ones are for code off the event loop (a sync task run
    on the thread pool): a remote table's refuse to run on the event loop's thread, which they
    would block, with a TableError saying so; a local table's run anywhere."""

    table_id: str

    def get(self, key: Any) -> Any: ...

    async def get_async(self, key: Any) -> Any: ...

    def get_all(self, keys: Iterable[Any]) -> Mapping[Any, Any]:
        """A dict of the keys that have a value; a ``KeyedValues`` (``samzapy.api.keys``), a
        read-only mapping by key identity, when the keys cannot all be dict keys of their own
        (a list key; 1 and True)."""
        ...

    async def get_all_async(self, keys: Iterable[Any]) -> Mapping[Any, Any]: ...

    def put(self, key: Any, value: Any) -> None:
        """``value`` None deletes the key."""
        ...

    async def put_async(self, key: Any, value: Any) -> None: ...

    def put_all(self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]) -> None: ...

    async def put_all_async(
        self, entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any]
    ) -> None: ...

    def delete(self, key: Any) -> None: ...

    async def delete_async(self, key: Any) -> None: ...

    def delete_all(self, keys: Iterable[Any]) -> None: ...

    async def delete_all_async(self, keys: Iterable[Any]) -> None: ...

    def flush(self) -> None:
        """Waits for every write made so far (a remote table's batches) to complete."""
        ...

    async def flush_async(self) -> None: ...


__all__ = [
    "CachingTableDescriptor",
    "InMemoryTableDescriptor",
    "LocalTableDescriptor",
    "ReadWriteTable",
    "RemoteTableDescriptor",
    "RocksDbTableDescriptor",
    "Table",
    "TableDescriptor",
]
