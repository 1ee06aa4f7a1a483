"""One contract test class over every store engine (see samzapy/api/store.py and
samzapy/storage/ports.py).

Stores are built through ``open_store``, the assembly the container runs them through: the
engine named by ``factory``, behind a ``string`` key serde and a ``json`` value serde, and for
the ``+changelog`` variants logged (the engine told so, which makes RocksDB skip its own
write-ahead log) with every write that reaches the engine sent to a changelog, here a list.
Every variant has the default write buffer (each key written between two flushes reaches the
engine and the changelog once) except the ``+perwrite`` ones
(``write.buffer.max.bytes: 0``); the ``+cache`` variants put a read cache of 100 entries
below the buffer (``object.cache.size``, small so that the tests fill it). A "reopen" builds
a new store over the same directory, as a restarted task would.
``persistent`` is the engine's capability flag: a persistent store keeps its entries across a
reopen, the others start empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samzapy.api.envelope import KV
from samzapy.api.errors import StoreError
from samzapy.api.store import KeyValueIterator, KeyValueStore
from samzapy.api.system import TaskName
from samzapy.storage.cached import PASSING_WINDOWS
from samzapy.storage.registry import OpenStore, open_store, store_factory_for
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import SerdeRegistry

TASK = TaskName.for_partition(0)
STORE = "counts"
WHO = r"store 'counts' \(task 'Partition 0'\)"
SERDES = SerdeRegistry()


class StoreSource:
    """Opens stores of one engine over one directory, and closes them all at the end."""

    def __init__(self, variant: str, tmp_path: Path) -> None:
        self.factory, *extras = variant.split("+")
        self.logged = "changelog" in extras
        self.cached = "cache" in extras
        self.per_write = "perwrite" in extras
        self.directory = tmp_path / "stores" / STORE / "Partition_0"
        self.opened: list[SerializedKeyValueStore[Any, Any]] = []
        #: What the logged variants sent to their changelog: (key bytes, value bytes or None).
        self.changelog: list[tuple[bytes, bytes | None]] = []

    @property
    def persistent(self) -> bool:
        return store_factory_for(STORE, self.factory).persistent

    def open(
        self, key_serde: str = "string", msg_serde: str = "json", directory: str = ""
    ) -> SerializedKeyValueStore[Any, Any]:
        return self.open_engine(key_serde, msg_serde, directory).store

    def open_engine(
        self, key_serde: str = "string", msg_serde: str = "json", directory: str = ""
    ) -> OpenStore:
        """The engine the factory built (what a restore writes to), the store over it, and
        the layers between them."""
        options: dict[str, Any] = {
            "factory": self.factory,
            "key.serde": key_serde,
            "msg.serde": msg_serde,
        }
        if self.cached:
            options["object.cache.size"] = 100
        if self.per_write:
            options["write.buffer.max.bytes"] = 0
        opened = open_store(
            STORE,
            TASK,
            self.directory.parent / directory if directory else self.directory,
            options,
            SERDES.get(key_serde),
            SERDES.get(msg_serde),
            changelog=self._log if self.logged else None,
        )
        self.opened.append(opened.store)
        return opened

    def _log(self, key: bytes, value: bytes | None) -> None:
        self.changelog.append((key, value))

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(
    params=[
        "inmemory",
        "rocksdb",
        "inmemory+changelog",
        "rocksdb+changelog",
        "rocksdb+changelog+perwrite",
        "inmemory+cache",
        "rocksdb+changelog+cache",
    ]
)
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSource]:
    source = StoreSource(request.param, tmp_path)
    yield source
    source.close_all()


@pytest.fixture
def store(source: StoreSource) -> SerializedKeyValueStore[Any, Any]:
    return source.open()


def keys_of(iterator: KeyValueIterator) -> list[Any]:
    with iterator:
        return [entry.key for entry in iterator]


class TestKeyValueStoreContract:
    def test_is_a_key_value_store(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        typed: KeyValueStore[str, Any] = store
        assert typed.get("missing") is None

    def test_put_get_overwrite_delete(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        assert store.get("a") is None
        store.put("a", {"n": 1})
        assert store.get("a") == {"n": 1}
        store.put("a", [1, "two"])
        assert store.get("a") == [1, "two"]
        store.delete("a")
        assert store.get("a") is None
        store.delete("a")  # deleting a missing key does nothing
        store.delete("never-there")
        assert store.get("a") is None

    def test_falsy_values_are_values(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        for key, value in [("zero", 0), ("empty", ""), ("false", False), ("list", [])]:
            store.put(key, value)
            assert store.get(key) == value
        store.put("", "empty key")
        assert store.get("") == "empty key"

    def test_put_none_is_an_error(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        store.put("a", 1)
        with pytest.raises(
            StoreError, match=rf"^{WHO}: put of key 'a' with value None; use delete\(key\)"
        ):
            store.put("a", None)
        assert store.get("a") == 1

    @pytest.mark.parametrize("operation", ["get", "delete", "put"])
    def test_none_key_is_an_error(
        self, store: SerializedKeyValueStore[Any, Any], operation: str
    ) -> None:
        arguments: tuple[Any, ...] = (None, 1) if operation == "put" else (None,)
        with pytest.raises(StoreError, match=rf"^{WHO}: {operation} with key None"):
            getattr(store, operation)(*arguments)

    def test_get_all_leaves_missing_keys_out(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put("a", 1)
        store.put("c", 3)
        assert store.get_all(["a", "b", "c"]) == {"a": 1, "c": 3}
        assert store.get_all(k for k in ["b", "a", "a"]) == {"a": 1}
        assert store.get_all([]) == {}

    def test_get_all_keeps_keys_apart_as_their_serialized_bytes_do(
        self, source: StoreSource
    ) -> None:
        store = source.open(key_serde="json")
        written = [(1, "one"), (True, "true"), (1.0, "float"), (["x", 1], "list")]
        store.put_all([*written, ({"k": 1}, "dict")])
        asked = [1, True, 1.0, ["x", 1], ("x", 1), {"k": 1}, ["absent"], True]
        for _ in range(2):  # from the write buffer, then from the engine (through its cache)
            found = store.get_all(asked)
            assert list(found.items()) == [*written, ({"k": 1}, "dict")]
            assert (found[("x", 1)], found[{"k": 1}], ["absent"] in found) == (
                "list",
                "dict",
                False,
            )
            store.flush()
        assert list(store.get_all([1, True]).values()) == ["one", "true"]
        assert type(store.get_all([1, 2, "1"])) is dict  # keys of one dict: a dict

    def test_put_all_takes_kv_and_tuples_in_order(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put_all([KV("a", 1), ("b", 2), KV("a", 10)])
        assert store.get_all(["a", "b"]) == {"a": 10, "b": 2}
        store.put_all([])
        assert store.get("a") == 10

    def test_put_all_takes_a_mapping_and_no_string_is_a_pair(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        # A dict's items, not its keys: iterating {"ab": 1} gives "ab", which unpacked into
        # the key "a" with the value "b".
        store.put_all({"ab": 1, "cd": {"n": 2}})
        assert dict(store.all()) == {"ab": 1, "cd": {"n": 2}}
        with pytest.raises(StoreError, match=rf"^{WHO}: put_all expects \(key, value\) entries"):
            store.put_all(["xy"])  # type: ignore[list-item]
        with pytest.raises(StoreError, match=rf"^{WHO}: put_all expects \(key, value\) entries"):
            store.put_all([b"xy"])  # type: ignore[list-item]
        assert store.get("x") is None

    def test_get_all_and_delete_all_take_keys_and_no_string_is_a_list_of_keys(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        # A str is iterable: delete_all("ab") would delete the keys "a" and "b".
        store.put_all([("a", 1), ("b", 2), ("ab", 3)])
        for keys in ("ab", b"ab", 5):
            for call in (store.get_all, store.delete_all):
                with pytest.raises(StoreError, match=rf"^{WHO}: {call.__name__} takes keys"):
                    call(keys)  # type: ignore[arg-type]
        assert dict(store.all()) == {"a": 1, "ab": 3, "b": 2}
        store.delete_all(key for key in ("a", "b"))  # any iterable of keys
        assert dict(store.all()) == {"ab": 3}

    def test_put_all_writes_nothing_when_an_entry_is_rejected(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put("a", 1)
        with pytest.raises(StoreError, match=rf"^{WHO}: put_all of key 'c' with value None"):
            store.put_all([("a", 2), ("b", 2), ("c", None)])
        with pytest.raises(StoreError, match=rf"^{WHO}: the msg serde .* of key 'd'"):
            store.put_all([("a", 3), ("d", {1, 2})])
        with pytest.raises(StoreError, match=rf"^{WHO}: put_all expects \(key, value\) entries"):
            store.put_all([("a", 4), "not-a-pair"])  # type: ignore[list-item]
        assert store.get_all(["a", "b", "c", "d"]) == {"a": 1}

    def test_delete_all(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        store.put_all([("a", 1), ("b", 2), ("c", 3)])
        store.delete_all(["a", "c", "missing"])
        assert keys_of(store.all()) == ["b"]
        with pytest.raises(StoreError, match=rf"^{WHO}: delete_all with key None"):
            store.delete_all(["b", None])
        assert store.get("b") == 2

    def test_range_includes_from_and_excludes_to(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put_all((key, key.upper()) for key in ["d", "a", "c", "b", "e"])
        with store.range("b", "d") as iterator:
            assert list(iterator) == [KV("b", "B"), KV("c", "C")]
        assert keys_of(store.range("a", "e")) == ["a", "b", "c", "d"]
        assert keys_of(store.range("bb", "dd")) == ["c", "d"]
        assert keys_of(store.range("0", "z")) == ["a", "b", "c", "d", "e"]
        assert keys_of(store.range("c", "c")) == []
        assert keys_of(store.range("d", "b")) == []
        assert keys_of(store.range("f", "z")) == []
        with pytest.raises(StoreError, match=rf"^{WHO}: range with key None"):
            store.range("a", None)

    def test_order_is_the_serialized_keys_byte_order(self, source: StoreSource) -> None:
        text = source.open()
        # UTF-8 bytes: 'Z' (0x5A) < 'a' (0x61) < 'z' < 'é' (0xC3 0xA9); a prefix sorts first.
        text.put_all((key, 1) for key in ["é", "z", "a", "ab", "Z"])
        assert keys_of(text.all()) == ["Z", "a", "ab", "z", "é"]
        assert keys_of(text.range("b", "\uffff")) == ["z", "é"]
        numbers = source.open(key_serde="long", directory="numbers")
        # Big-endian two's complement: negative numbers sort after every positive one.
        numbers.put_all((n, n) for n in [256, -1, 0, 1, -256])
        assert keys_of(numbers.all()) == [0, 1, 256, -256, -1]
        assert keys_of(numbers.range(1, -256)) == [1, 256]
        assert keys_of(numbers.range(-256, 0)) == []

    def test_all_returns_every_entry_in_order(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        assert keys_of(store.all()) == []
        store.put_all((f"k{i:03d}", i) for i in reversed(range(50)))
        store.delete("k010")
        store.put("k010x", "added")
        with store.all() as iterator:
            entries = list(iterator)
        assert [entry.key for entry in entries] == sorted(
            [f"k{i:03d}" for i in range(50) if i != 10] + ["k010x"]
        )
        assert entries[0] == KV("k000", 0)
        assert all(isinstance(entry, KV) for entry in entries)

    def test_writes_while_iterating_neither_fail_nor_repeat_keys(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        original = {f"k{i:03d}" for i in range(100)}
        store.put_all((key, 0) for key in original)
        deleted = {f"k{i:03d}" for i in range(0, 100, 3)}
        added = {f"k{i:03d}x" for i in range(100)}
        seen = []
        with store.all() as iterator:
            for position, entry in enumerate(iterator):
                seen.append(entry.key)
                if position == 5:
                    store.delete_all(deleted)
                    store.put_all((key, 1) for key in added)
                    store.put("k099", 2)
        assert seen == sorted(seen)
        assert len(seen) == len(set(seen))
        assert set(seen) <= original | added
        assert original - deleted <= set(seen)
        # After the iterator, reads see every write.
        assert keys_of(store.all()) == sorted((original - deleted) | added | {"k099"})

    def test_iterator_used_after_close_names_store_and_task(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put_all([("a", 1), ("b", 2)])
        iterator = store.range("a", "z")
        assert next(iterator) == KV("a", 1)
        iterator.close()
        iterator.close()  # closing twice does nothing
        with pytest.raises(StoreError, match=rf"^iterator of {WHO} used after close\(\)"):
            next(iterator)
        with store.all() as in_block:
            assert next(in_block) == KV("a", 1)
        with pytest.raises(StoreError, match=rf"^iterator of {WHO} used after close\(\)"):
            list(in_block)

    def test_close_iterators_ends_the_iterators_of_the_call(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put_all([("a", 1), ("b", 2), ("c", 3)])
        assert store.close_iterators() == 0
        open_one = store.all()
        assert next(open_one) == KV("a", 1)
        exhausted = store.range("a", "b")
        assert list(exhausted) == [KV("a", 1)]
        closed = store.all()
        closed.close()
        assert store.close_iterators() == 1  # only open_one was still open
        ended = rf"^iterator of {WHO} used after the call that opened it ended"
        with pytest.raises(StoreError, match=ended):
            next(open_one)
        with pytest.raises(StoreError, match=ended):
            next(exhausted)
        # A later call opens new iterators, which work until that call ends.
        assert keys_of(store.all()) == ["a", "b", "c"]
        fresh = store.all()
        assert store.close_iterators() == 1
        with pytest.raises(StoreError, match=ended):
            next(fresh)
        with pytest.raises(StoreError, match=ended):
            next(open_one)
        assert store.close_iterators() == 0

    def test_flush_then_reopen(self, source: StoreSource) -> None:
        store = source.open()
        store.put_all((f"k{i}", {"i": i}) for i in range(1000))
        store.delete("k5")
        store.flush()
        store.put("unflushed", "but closed cleanly")
        store.close()
        reopened = source.open()
        if source.persistent:
            assert reopened.get("k7") == {"i": 7}
            assert reopened.get("k5") is None
            assert reopened.get("unflushed") == "but closed cleanly"
            assert len(keys_of(reopened.all())) == 1000
        else:
            assert keys_of(reopened.all()) == []

    def test_closed_store_rejects_every_call(
        self, store: SerializedKeyValueStore[Any, Any]
    ) -> None:
        store.put("a", 1)
        iterator = store.all()
        store.close()
        store.close()  # closing twice does nothing
        with pytest.raises(StoreError, match="used after the call that opened it ended"):
            next(iterator)
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("get", ("a",)),
            ("put", ("a", 2)),
            ("delete", ("a",)),
            ("get_all", (["a"],)),
            ("put_all", ([("a", 2)],)),
            ("delete_all", (["a"],)),
            ("range", ("a", "b")),
            ("all", ()),
            ("flush", ()),
        ]
        for name, arguments in calls:
            with pytest.raises(StoreError, match=rf"^{WHO} is closed"):
                getattr(store, name)(*arguments)

    def test_large_keys_and_values(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        big_value = "v" * (8 * 1024 * 1024)
        big_key = "k" * (64 * 1024)
        store.put(big_key, big_value)
        store.put("small", [big_value[:1000]] * 100)
        assert store.get(big_key) == big_value
        assert store.get("small") == [big_value[:1000]] * 100
        with store.all() as iterator:
            assert [(entry.key, len(entry.value)) for entry in iterator] == [
                (big_key, len(big_value)),
                ("small", 100),
            ]

    def test_one_hundred_thousand_puts(self, store: SerializedKeyValueStore[Any, Any]) -> None:
        count = 100_000
        for i in range(count):
            store.put(f"key-{i:06d}", i)
        assert store.get("key-000000") == 0
        assert store.get("key-099999") == 99_999
        assert store.get("key-100000") is None
        with store.all() as iterator:
            total = 0
            for position, entry in enumerate(iterator):
                assert entry.key == f"key-{position:06d}"
                total += entry.value
        assert position == count - 1
        assert total == sum(range(count))
        assert keys_of(store.range("key-050000", "key-050005")) == [
            f"key-{i:06d}" for i in range(50_000, 50_005)
        ]


class TestLoggedStoreContract:
    """What a store with a changelog adds, without a write buffer: every write reaches the
    changelog, in order."""

    @pytest.fixture(params=["inmemory+changelog+perwrite", "rocksdb+changelog+perwrite"])
    def logged(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSource]:
        source = StoreSource(request.param, tmp_path)
        yield source
        source.close_all()

    def test_every_write_is_sent_to_the_changelog_in_order(self, logged: StoreSource) -> None:
        store = logged.open()
        store.put("a", 1)
        store.put_all([("b", 2), KV("a", 3)])
        store.delete("b")
        store.delete_all(["a", "never"])
        assert logged.changelog == [
            (b"a", b"1"),
            (b"b", b"2"),
            (b"a", b"3"),
            (b"b", None),
            (b"a", None),
            (b"never", None),
        ]
        assert store.get("a") is None

    def test_a_rejected_write_sends_nothing(self, logged: StoreSource) -> None:
        store = logged.open()
        with pytest.raises(StoreError):
            store.put_all([("a", 1), (None, 2)])
        assert logged.changelog == []


class TestWriteBufferContract:
    """With the default write buffer, reads see every write at once, and each key's latest
    write reaches the engine and the changelog once, at ``flush`` (the commit), before an
    iteration, or when the buffer is full; a read cache in front changes none of it."""

    @pytest.fixture(
        params=[
            "inmemory+changelog",
            "rocksdb+changelog",
            "inmemory+changelog+cache",
            "rocksdb+changelog+cache",
        ]
    )
    def buffered(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSource]:
        source = StoreSource(request.param, tmp_path)
        yield source
        source.close_all()

    def test_each_key_s_latest_write_is_written_once_at_flush(self, buffered: StoreSource) -> None:
        opened = buffered.open_engine()
        store = opened.store
        for n in range(50):
            store.put("a", n)
            store.put("b", -n)
        store.delete("b")
        store.put_all([("c", 1), KV("c", 2)])
        assert buffered.changelog == [] and opened.engine.get(b"a") is None
        assert (store.get("a"), store.get("b"), store.get("c")) == (49, None, 2)
        assert store.get_all(["a", "b", "c", "d"]) == {"a": 49, "c": 2}
        store.flush()
        assert buffered.changelog == [(b"a", b"49"), (b"b", None), (b"c", b"2")]
        assert opened.engine.get(b"a") == b"49" and opened.engine.get(b"b") is None
        store.put("a", 50)
        store.flush()
        store.flush()
        assert buffered.changelog[3:] == [(b"a", b"50")]

    def test_iteration_sees_the_writes_waiting(self, buffered: StoreSource) -> None:
        store = buffered.open()
        store.put("b", 2)
        store.put("a", 1)
        store.delete("a")
        store.put("c", 3)
        assert keys_of(store.all()) == ["b", "c"]
        assert buffered.changelog == [(b"b", b"2"), (b"a", None), (b"c", b"3")]

    def test_a_full_buffer_writes_everything_back_and_starts_again(
        self, buffered: StoreSource
    ) -> None:
        opened = buffered.open_engine()
        assert opened.buffer is not None
        opened.buffer.max_bytes = 100
        for i in range(30):
            opened.store.put(f"k{i % 10}", i)  # 10 keys, each 2 + 2 bytes at the end: 40
        assert buffered.changelog == []
        for i in range(10, 30):
            opened.store.put(f"k{i:02d}", i)  # 3 + 2 bytes each: the 13th passes 100
        assert len(buffered.changelog) == 10 + 13 and opened.buffer.pending == 7
        assert buffered.changelog[0] == (b"k0", b"20")
        assert opened.store.get("k29") == 29 and opened.store.get("k9") == 29


class TestReadCacheContract:
    """What a read cache adds: reads that the write buffer above cannot answer are served
    from it when it has the key, and it never holds a write of its own, so evicting writes
    nothing back."""

    @pytest.fixture(params=["inmemory+changelog+cache", "rocksdb+changelog+cache"])
    def cached(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSource]:
        source = StoreSource(request.param, tmp_path)
        yield source
        source.close_all()

    def test_reads_are_served_from_the_cache_and_evictions_write_nothing(
        self, cached: StoreSource
    ) -> None:
        opened = cached.open_engine()
        store, cache = opened.store, opened.cache
        assert cache is not None
        for i in range(300):
            store.put(f"k{i:03d}", i)
        assert store.get("k000") == 0, "read from the buffer"
        assert cache.size == 0 and cached.changelog == []
        store.flush()
        assert len(cached.changelog) == 300 and cache.size == 100  # the last 100 written
        assert [store.get(f"k{i:03d}") for i in range(200, 300)] == list(range(200, 300))
        assert (cache.hits, cache.misses) == (100, 0)
        assert store.get("k000") == 0 and store.get("missing") is None
        assert store.get("missing") is None
        assert (cache.hits, cache.misses) == (101, 2)
        cache.drop()
        assert store.get("k299") == 299 and cache.misses == 3

    def test_a_cache_far_smaller_than_the_working_set_lets_reads_pass_then_tries_again(
        self, cached: StoreSource
    ) -> None:
        opened = cached.open_engine()
        store, cache, buffer = opened.store, opened.cache, opened.buffer
        assert cache is not None and buffer is not None and cache.window == 1024
        store.put_all((f"k{i:04d}", i) for i in range(5000))
        store.flush()

        def read_all_once() -> None:
            for i in range(5000):
                assert store.get(f"k{i:04d}") == i

        read_all_once()  # 5,000 keys through a cache of 100: every read misses
        assert not cache.admitting and cache.size == 0, "it lets reads pass after 1,024"
        store.put("k0001", -1)
        store.flush()
        assert cache.size == 0 and store.get("k0001") == -1, "writes pass too"
        store.put("k0001", 1)
        store.flush()
        reads = 5000 - 1024 + 1
        while not cache.admitting:
            assert store.get(f"k{reads % 5000:04d}") == reads % 5000
            reads += 1
        assert reads == PASSING_WINDOWS * 1024, "fifty windows later it tries again"
        assert (cache.hits, cache.misses) == (0, 1024)

    def test_a_cache_that_holds_the_working_set_keeps_admitting(self, cached: StoreSource) -> None:
        opened = cached.open_engine()
        store, cache = opened.store, opened.cache
        assert cache is not None
        store.put_all((f"k{i:02d}", i) for i in range(90))
        store.flush()
        for _ in range(50):
            for i in range(90):
                assert store.get(f"k{i:02d}") == i
        assert cache.admitting and cache.hits == 50 * 90


class TestSnapshotContract:
    """Engines that say ``snapshots`` copy every entry, flushed or not, into a snapshot that
    later writes leave alone, and restore it exactly, as often as asked; the others refuse."""

    def test_a_snapshot_is_restored_exactly_and_stays_as_it_was(
        self, source: StoreSource, tmp_path: Path
    ) -> None:
        engine, store, cache, _, buffer = source.open_engine()
        store.put_all((f"k{i}", i) for i in range(1000))
        store.flush()
        store.put("unflushed", "kept")  # a logged RocksDB store has no write-ahead log
        if buffer is not None:
            buffer.write_back()  # as a commit does before its snapshot
        snapshot = tmp_path / "snapshot"
        if not engine.snapshots:
            with pytest.raises(StoreError, match=rf"^{WHO} cannot take snapshots"):
                engine.snapshot(snapshot)
            with pytest.raises(StoreError, match=rf"^{WHO} cannot restore snapshots"):
                engine.restore_snapshot(snapshot)
            return
        engine.snapshot(snapshot)
        for attempt in range(2):
            store.put("after", attempt)
            store.delete("k1")
            store.put("k2", "changed")
            # As a restore does before it restores a snapshot.
            if cache is not None:
                cache.drop()
            if buffer is not None:
                buffer.drop()
            engine.restore_snapshot(snapshot)
            assert store.get("after") is None
            assert store.get("k1") == 1 and store.get("k2") == 2
            assert store.get("unflushed") == "kept"
            assert len(keys_of(store.all())) == 1001
        # The snapshot outlives its store, and restores into another directory.
        store.close()
        engine, store, *_ = source.open_engine(directory="elsewhere")
        engine.restore_snapshot(snapshot)
        assert len(keys_of(store.all())) == 1001

    def test_a_sequence_number_grows_with_writes_and_only_then(self, source: StoreSource) -> None:
        """What tells a commit that a store without changelog is unchanged since its last
        snapshot (``storage/snapshots.py``); None for an engine without one."""
        engine, store, _, _, buffer = source.open_engine()
        before = engine.sequence()
        if before is None:
            return
        store.put("k", 1)
        if buffer is not None:
            buffer.write_back()
        after = engine.sequence()
        assert after is not None and after > before
        store.get("k")
        list(store.all())
        engine.flush()
        assert engine.sequence() == after
