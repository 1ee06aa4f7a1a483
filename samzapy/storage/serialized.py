"""SerializedKeyValueStore: the KeyValueStore a task sees, over a bytes engine and two serdes.

It does four things on top of a StorageEngine:

1. Serdes. Keys go through ``stores.<name>.key.serde`` and values through
   ``stores.<name>.msg.serde``; a serde that fails (or returns something other than bytes)
   becomes a StoreError naming the store, the task, the key and the config key of the serde.
   ``put_all`` and ``delete_all`` serialize every entry before writing any, so a failure
   leaves the store as it was.
2. The None rules of the KeyValueStore contract: None is neither a key nor a value.
3. Iterator lifetimes. Every iterator ``range`` and ``all`` open is tracked until it is closed
   or exhausted; the container calls ``close_iterators`` when the task callback that may have
   opened them ends (one flag test when none was opened). Using an iterator after that, or
   after its ``close()``, raises StoreError naming the store and the task. A RocksDB iterator
   pins a snapshot and its files, so one left open would hold them for as long as the task
   lives.
4. ``get_all`` answers with the keys as given, each key once by its serialized bytes (the
   first of those written alike): a dict, unless the keys found cannot all be keys of one
   dict (a list key; 1 and True under ``json``), then a ``KeyedValues`` that finds a key by
   what the key serde writes of it (``samzapy.api.keys``).

``get`` and ``put`` are the per-message path: one serde call each way, one engine call, no
allocation beyond the serdes' own. The built-in byte serdes are called directly; any other
serde's output is checked to be bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

from samzapy.api.envelope import KV
from samzapy.api.errors import StoreError
from samzapy.api.keys import KeyIdentity, found_map
from samzapy.api.store import KeyValueIterator, KeyValueStore, entry_pairs, key_list
from samzapy.storage.ports import StorageEngine
from samzapy.system.serde import BytesSerde, IntegerSerde, JsonSerde, LongSerde, Serde, StringSerde

K = TypeVar("K")
V = TypeVar("V")

# Serdes whose to_bytes returns bytes or raises: their output needs no check.
_BYTES_SERDES: frozenset[type] = frozenset(
    {StringSerde, JsonSerde, BytesSerde, IntegerSerde, LongSerde}
)


def _describe(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


def to_bytes_checked(serde: Serde) -> Callable[[Any], bytes]:
    """``serde.to_bytes``, checked to return bytes unless the serde is a built-in byte serde."""
    to_bytes = serde.to_bytes
    if type(serde) in _BYTES_SERDES:
        return to_bytes

    def checked(obj: Any) -> bytes:
        data = to_bytes(obj)
        if type(data) is bytes:
            return data
        if isinstance(data, bytearray | memoryview):
            return bytes(data)
        raise TypeError(
            f"{type(serde).__name__}.to_bytes returned a {type(data).__name__}, "
            "expected bytes: a store keeps bytes"
        )

    return checked


class StoreIterator(KeyValueIterator):
    """An iterator of a SerializedKeyValueStore: decodes each engine entry into a KV."""

    def __init__(
        self, store: SerializedKeyValueStore[Any, Any], entries: Iterator[tuple[bytes, bytes]]
    ) -> None:
        self._store = store
        self._entries: Iterator[tuple[bytes, bytes]] | None = entries
        self._generation = store._generation
        self._closed_by_call_end = False

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> KV:
        store = self._store
        entries = self._entries
        if entries is None or self._generation != store._generation:
            self._misused()
        try:
            raw_key, raw_value = next(entries)
        except StopIteration:
            # Exhausted: free the engine's iterator now; later calls keep raising
            # StopIteration until the call that opened it ends.
            self._entries = iter(())
            store._open_iterators.discard(self)
            raise
        try:
            key = store._key_from_bytes(raw_key)
        except Exception as exc:
            raise StoreError(
                f"{store.description}: the key serde (stores.{store.store_name}.key.serde) "
                f"cannot deserialize the key bytes {_describe(raw_key)}: {exc}"
            ) from exc
        try:
            return KV(key, store._msg_from_bytes(raw_value))
        except Exception as exc:
            raise store._value_decode_error(key, exc) from exc

    def close(self) -> None:
        if self._entries is not None:
            self._entries = None
            self._store._open_iterators.discard(self)

    def _end_of_call(self) -> None:
        self._entries = None
        self._closed_by_call_end = True

    def _misused(self) -> NoReturn:
        store = self._store
        subject = f"iterator of {store.description}"
        if self._closed_by_call_end or self._generation != store._generation:
            raise StoreError(
                f"{subject} used after the call that opened it ended; an iterator lives "
                "within one task callback: open a new one with range() or all()"
            )
        raise StoreError(f"{subject} used after close()")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SerializedKeyValueStore(KeyValueStore[K, V]):
    """A KeyValueStore over a StorageEngine, with a key serde and a value (msg) serde."""

    def __init__(self, engine: StorageEngine, key_serde: Serde, msg_serde: Serde) -> None:
        self.engine = engine
        self.store_name = engine.store_name
        self.task_name = engine.task_name
        self.description = engine.description
        #: What tells keys apart: a table over the store reads it (``samzapy.api.keys``).
        self.key_serde = key_serde
        self.key_identity = KeyIdentity.for_serde(self.store_name, key_serde)
        self._key_to_bytes = to_bytes_checked(key_serde)
        self._key_from_bytes = key_serde.from_bytes
        self._msg_to_bytes = to_bytes_checked(msg_serde)
        self._msg_from_bytes = msg_serde.from_bytes
        self._engine_get: Callable[[bytes], bytes | None] = engine.get
        self._engine_put: Callable[[bytes, bytes], None] = engine.put
        self._engine_delete: Callable[[bytes], None] = engine.delete
        self._open_iterators: set[StoreIterator] = set()
        self._opened_since_call_end = False
        self._generation = 0
        self._closed = False

    # -- KeyValueStore --------------------------------------------------------------------------

    def get(self, key: K) -> V | None:
        if key is None:
            self._none_key("get")
        try:
            raw_key = self._key_to_bytes(key)
        except Exception as exc:
            raise self._key_encode_error(key, exc) from exc
        raw_value = self._engine_get(raw_key)
        if raw_value is None:
            return None
        try:
            return self._msg_from_bytes(raw_value)  # type: ignore[no-any-return]
        except Exception as exc:
            raise self._value_decode_error(key, exc) from exc

    def get_all(self, keys: Iterable[K]) -> Mapping[K, V]:
        self._check_open()
        keys = key_list(keys, self._not_keys("get_all"))
        raw_keys = [self._encode_key(key, "get_all") for key in keys]
        raw_values = self.engine.get_many(raw_keys)
        decode = self._msg_from_bytes
        found: list[tuple[K, V]] = []
        seen: set[bytes] = set()
        for key, raw_key, raw_value in zip(keys, raw_keys, raw_values, strict=True):
            if raw_value is None or raw_key in seen:
                continue
            seen.add(raw_key)
            try:
                found.append((key, decode(raw_value)))
            except Exception as exc:
                raise self._value_decode_error(key, exc) from exc
        return found_map(self.key_identity, found)  # step 4

    def put(self, key: K, value: V) -> None:
        if key is None:
            self._none_key("put")
        if value is None:
            self._none_value(key, "put")
        try:
            raw_key = self._key_to_bytes(key)
        except Exception as exc:
            raise self._key_encode_error(key, exc) from exc
        try:
            raw_value = self._msg_to_bytes(value)
        except Exception as exc:
            raise self._value_encode_error(key, value, exc) from exc
        self._engine_put(raw_key, raw_value)

    def put_all(self, entries: Iterable[KV | tuple[K, V]] | Mapping[K, V]) -> None:
        batch: list[tuple[bytes, bytes | None]] = []
        for key, value in entry_pairs(entries, self._not_a_pair):
            if value is None:
                self._none_value(key, "put_all")
            raw_key = self._encode_key(key, "put_all")
            try:
                raw_value = self._msg_to_bytes(value)
            except Exception as exc:
                raise self._value_encode_error(key, value, exc) from exc
            batch.append((raw_key, raw_value))
        self._check_open()
        if batch:
            self.engine.write_batch(batch)

    def _not_a_pair(self, entry: Any) -> StoreError:
        return StoreError(
            f"{self.description}: put_all expects (key, value) entries, got {_describe(entry)}"
        )

    def _not_keys(self, operation: str) -> Callable[[Any], StoreError]:
        def refuse(keys: Any) -> StoreError:
            return StoreError(
                f"{self.description}: {operation} takes keys (a list, a set...), got "
                f"{_describe(keys)}: give one key as [key]"
            )

        return refuse

    def delete(self, key: K) -> None:
        if key is None:
            self._none_key("delete")
        try:
            raw_key = self._key_to_bytes(key)
        except Exception as exc:
            raise self._key_encode_error(key, exc) from exc
        self._engine_delete(raw_key)

    def delete_all(self, keys: Iterable[K]) -> None:
        batch: list[tuple[bytes, bytes | None]] = [
            (self._encode_key(key, "delete_all"), None)
            for key in key_list(keys, self._not_keys("delete_all"))
        ]
        self._check_open()
        if batch:
            self.engine.write_batch(batch)

    def range(self, from_key: K, to_key: K) -> StoreIterator:
        raw_from = self._encode_key(from_key, "range")
        raw_to = self._encode_key(to_key, "range")
        self._check_open()
        return self._track(self.engine.iterate(raw_from, raw_to))

    def all(self) -> StoreIterator:
        self._check_open()
        return self._track(self.engine.iterate(None, None))

    def flush(self) -> None:
        self._check_open()
        self.engine.flush()

    # -- what the container calls ----------------------------------------------------------------

    def close_iterators(self) -> int:
        """Ends the iterators opened during the task callback that just ended; returns how many
        were still open. Their later use (and that of exhausted ones) raises StoreError."""
        if not self._opened_since_call_end:
            return 0
        self._opened_since_call_end = False
        self._generation += 1
        still_open = self._open_iterators
        for iterator in still_open:
            iterator._end_of_call()
        count = len(still_open)
        self._open_iterators = set()
        return count

    def close(self) -> None:
        """Ends every iterator and closes the engine; any later use raises StoreError."""
        if self._closed:
            return
        self.close_iterators()
        self._closed = True
        self._engine_get = self._closed_get
        self._engine_put = self._closed_put
        self._engine_delete = self._closed_delete
        self.engine.close()

    # -- helpers ---------------------------------------------------------------------------------

    def _track(self, entries: Iterator[tuple[bytes, bytes]]) -> StoreIterator:
        iterator = StoreIterator(self, entries)
        self._open_iterators.add(iterator)
        self._opened_since_call_end = True
        return iterator

    def _encode_key(self, key: Any, operation: str) -> bytes:
        if key is None:
            self._none_key(operation)
        try:
            return self._key_to_bytes(key)
        except Exception as exc:
            raise self._key_encode_error(key, exc) from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.description} is closed")

    def _closed_get(self, raw_key: bytes) -> bytes | None:
        self._check_open()
        return None

    def _closed_put(self, raw_key: bytes, raw_value: bytes) -> None:
        self._check_open()

    def _closed_delete(self, raw_key: bytes) -> None:
        self._check_open()

    def _none_key(self, operation: str) -> NoReturn:
        raise StoreError(f"{self.description}: {operation} with key None; a key must not be None")

    def _none_value(self, key: Any, operation: str) -> NoReturn:
        raise StoreError(
            f"{self.description}: {operation} of key {_describe(key)} with value None; "
            "use delete(key) to remove an entry"
        )

    def _key_encode_error(self, key: Any, exc: Exception) -> StoreError:
        return StoreError(
            f"{self.description}: the key serde (stores.{self.store_name}.key.serde) cannot "
            f"serialize key {_describe(key)}: {exc}"
        )

    def _value_encode_error(self, key: Any, value: Any, exc: Exception) -> StoreError:
        return StoreError(
            f"{self.description}: the msg serde (stores.{self.store_name}.msg.serde) cannot "
            f"serialize the value {_describe(value)} of key {_describe(key)}: {exc}"
        )

    def _value_decode_error(self, key: Any, exc: Exception) -> StoreError:
        return StoreError(
            f"{self.description}: the msg serde (stores.{self.store_name}.msg.serde) cannot "
            f"deserialize the stored value of key {_describe(key)}: {exc}"
        )


__all__ = ["to_bytes_checked", "SerializedKeyValueStore", "StoreIterator"]
