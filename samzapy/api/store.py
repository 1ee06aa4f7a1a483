"""The store a task gets from ``context.get_store(name)``: KeyValueStore, KeyValueIterator.

A store belongs to one task: each task of a job has its own instance of every declared store
(``stores.<name>.factory``), and only that task's callbacks touch it, so a store needs no
locking. Keys and values are objects; the store turns them into bytes with the store's
``stores.<name>.key.serde`` and ``stores.<name>.msg.serde`` and keeps the bytes, ordered by the
serialized key's bytes (unsigned, lexicographic, as RocksDB's default comparator and Samza).

The contract every store keeps, and that ``tests/contract/test_store_contract.py`` checks:

1. ``None`` is never a key, and never a value: ``put(key, None)`` is an error (use ``delete``).
2. Reads see every write made before them through the same store, including unflushed ones.
3. ``range`` and ``all`` return entries in serialized-key byte order; ``range`` includes
   ``from_key`` and excludes ``to_key``.
4. An iterator lives at most as long as the task callback that opened it (``process``,
   ``window``, ``init``...): when the callback ends the container closes it, and any later use
   raises StoreError naming the store and the task. Closing one early (``close()`` or a
   ``with`` block) frees it at once.
5. Entries written while an iterator is open may or may not be seen by it, but writing never
   makes an open iterator fail or return a key twice.
6. A key or value that its serde cannot handle raises StoreError naming the store, the task and
   the key; nothing of a failed ``put_all`` or ``delete_all`` is written.
7. ``flush`` makes the writes so far durable for a persistent store (RocksDB); the container
   flushes every store before it writes a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

from samzapy.api.envelope import KV

K = TypeVar("K")
V = TypeVar("V")


class KeyValueIterator(Protocol):
    """Entries of a store, as ``KV(key, value)``, in serialized-key byte order.

    Close it when done (``close()``, or use it as a context manager); the container closes any
    still open when the task callback that opened it ends. Using it after it is closed raises
    StoreError naming the store and the task.
    """

    def __iter__(self) -> Iterator[KV]: ...

    def __next__(self) -> KV:
        """The next entry; StopIteration after the last one."""
        ...

    def close(self) -> None:
        """Releases the iterator; closing it again does nothing."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class KeyValueStore(Protocol[K, V]):
    """A task's key-value store (Samza's ``KeyValueStore``); see the module docstring for the
    contract. Every error it raises on purpose is a StoreError naming the store and the task."""

    def get(self, key: K) -> V | None:
        """The value stored under ``key``, or None when there is none."""
        ...

    def get_all(self, keys: Iterable[K]) -> Mapping[K, V]:
        """The values stored under ``keys``, each key once, as given; a key with no value is
        left out. A dict, unless the keys found cannot all be keys of one dict (a list key,
        or 1 and True under ``json``): then a ``KeyedValues`` (``samzapy.api.keys``), a
        read-only mapping that finds a key by what the key serde writes of it. ``keys`` is
        any iterable of keys but a str or bytes, which is refused (its characters are not
        the keys meant): one key is ``[key]``."""
        ...

    def put(self, key: K, value: V) -> None:
        """Stores ``value`` under ``key``, replacing any value there. ``value`` None is an
        error: use ``delete`` to remove an entry."""
        ...

    def put_all(self, entries: Iterable[KV | tuple[K, V]] | Mapping[K, V]) -> None:
        """Stores every ``(key, value)`` of ``entries`` (``KV``s or pairs, or a mapping's
        items), in order (a later entry for the same key wins), as one batch: when one entry
        is rejected, none is written."""
        ...

    def delete(self, key: K) -> None:
        """Removes the entry of ``key``; deleting a missing key does nothing."""
        ...

    def delete_all(self, keys: Iterable[K]) -> None:
        """Removes the entries of ``keys`` (as ``get_all`` takes them) as one batch."""
        ...

    def range(self, from_key: K, to_key: K) -> KeyValueIterator:
        """The entries whose serialized key is ``>= from_key`` and ``< to_key`` in byte order
        (empty when ``from_key >= to_key``)."""
        ...

    def all(self) -> KeyValueIterator:
        """Every entry, in serialized-key byte order."""
        ...

    def flush(self) -> None:
        """Makes the writes so far durable (a no-op for an in-memory store)."""
        ...


def entry_pairs(
    entries: Iterable[KV | tuple[Any, Any]] | Mapping[Any, Any],
    refuse: Callable[[Any], Exception],
) -> Iterator[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of a ``put_all``'s ``entries``, a store's or a table's: a
    mapping's items (iterating a dict gives its keys, and a key "ab" would unpack as key "a",
    value "b"), else each ``KV`` or pair; ``refuse(entry)`` is raised for an entry that is no
    pair (a string of two characters is none)."""
    for entry in entries.items() if isinstance(entries, Mapping) else entries:
        if isinstance(entry, _TEXT):
            raise refuse(entry)
        try:
            key, value = entry
        except (TypeError, ValueError):
            raise refuse(entry) from None
        yield key, value


def key_list(keys: Iterable[Any], refuse: Callable[[Any], Exception]) -> list[Any]:
    """The keys of a ``get_all`` or ``delete_all``, a store's or a table's, as a list;
    ``refuse(keys)`` is raised for keys that are no collection of keys: a str or bytes, whose
    characters would be taken for keys (``delete_all("ann")`` would delete "a" and "n"), or
    anything not iterable."""
    if isinstance(keys, _TEXT):
        raise refuse(keys)
    try:
        iterator = iter(keys)
    except TypeError:
        raise refuse(keys) from None
    return list(iterator)


#: Built once (``str | bytes`` written in the check would build a union at every entry).
_TEXT = (str, bytes)

__all__ = ["KeyValueIterator", "KeyValueStore", "entry_pairs", "key_list"]
