"""A store's write buffer: each key written between two commits reaches the engine and the
changelog once (``stores.<name>.write.buffer.max.bytes``, on by default).

Kafka Streams' record cache and Quix Streams' per-checkpoint transaction do the same. A write
stays in a dict that keeps the latest value of each key (None: deleted), and reads see it
first. The buffer is written to the engine below as one batch (for a logged store
``LoggedStorageEngine``, which also sends each entry's changelog record):

1. at ``write_back``, which a commit calls before it reads how far the changelogs got (step 2
   of ``TaskInstance.commit``, through ``TaskStores.flush``);
2. when the keys and values waiting exceed ``max_bytes``, or ``max_entries`` keys wait
   (``write.batch.size``): everything is written back and the buffer starts again;
3. before ``iterate``, so the engine's order and snapshot cover every write.

A working set larger than the buffer therefore costs what writing every key once per
write-back costs, at most one engine write and one changelog record per write: never more than
no buffer, and the engine takes them as one batch.

The changelog then holds the store's state at each commit rather than every intermediate
value, which is all a restore needs. Between two commits the engine is behind the buffer;
after a failure the buffer is dropped with the rest of the uncommitted work
(``TaskStores.close``), and a store without a changelog writes it back on close, as it would
have written without a buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from samzapy.storage.ports import StorageEngine

#: The default of ``stores.<name>.write.buffer.max.bytes``, per task's store.
DEFAULT_BUFFER_BYTES = 1 << 20

_MISSING = object()


class BufferedStorageEngine(StorageEngine):
    """Holds writes to ``inner`` until ``write_back``: up to ``max_bytes`` of keys and values,
    and up to ``max_entries`` keys (0: no bound on keys)."""

    def __init__(self, inner: StorageEngine, max_bytes: int, max_entries: int = 0) -> None:
        super().__init__(inner.store_name, inner.task_name)
        if max_bytes < 1 or max_entries < 0:
            raise ValueError(
                f"a write buffer needs max_bytes >= 1 and max_entries >= 0, got {max_bytes} "
                f"and {max_entries}"
            )
        self.inner = inner
        self.max_bytes = max_bytes
        self.max_entries = max_entries or (1 << 62)
        self._read = inner.get
        self._pending: dict[bytes, bytes | None] = {}
        self._bytes = 0

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def pending(self) -> int:
        """Keys written since the last write-back."""
        return len(self._pending)

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        value = self._pending.get(key, _MISSING)
        if value is _MISSING:
            return self._read(key)
        return value  # type: ignore[return-value]

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        pending = self._pending
        missing = [key for key in keys if key not in pending]
        fetched = dict(zip(missing, self.inner.get_many(missing), strict=True)) if missing else {}
        return [pending[key] if key in pending else fetched[key] for key in keys]

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self.write_back()
        return self.inner.iterate(from_key, to_key)

    # -- writes ---------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        pending = self._pending
        old = pending.get(key)
        pending[key] = value
        if old is None:  # a new key (or a deleted one: its key counted twice, at most)
            self._bytes += len(key) + len(value)
            if len(pending) >= self.max_entries:
                self.write_back()
                return
        else:
            self._bytes += len(value) - len(old)
        if self._bytes > self.max_bytes:
            self.write_back()

    def delete(self, key: bytes) -> None:
        pending = self._pending
        old = pending.get(key, _MISSING)
        pending[key] = None
        if old is _MISSING:
            self._bytes += len(key)
            if len(pending) >= self.max_entries:
                self.write_back()
        elif old is not None:
            self._bytes -= len(old)  # type: ignore[arg-type]

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            if value is None:
                self.delete(key)
            else:
                self.put(key, value)

    def write_back(self) -> int:
        """Write every key waiting to the engine below (its latest value, in the order first
        written), as one batch; how many."""
        pending = self._pending
        if not pending:
            return 0
        self._pending, self._bytes = {}, 0
        self.inner.write_batch(list(pending.items()))
        return len(pending)

    def drop(self) -> None:
        """Forget the writes waiting (after a failure: no checkpoint covers them)."""
        self._pending, self._bytes = {}, 0

    # -- durability and life cycle --------------------------------------------------------------

    def flush(self) -> None:
        self.write_back()
        self.inner.flush()

    def close(self) -> None:
        """Write the keys waiting back, then close the engine."""
        self.write_back()
        self.inner.close()


__all__ = ["DEFAULT_BUFFER_BYTES", "BufferedStorageEngine"]
