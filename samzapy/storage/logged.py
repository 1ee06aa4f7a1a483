"""A storage engine whose writes also go to the store's changelog.

The changelog is a stream partition of the task's own (same number as the task's partition);
a put sends (key, value), a delete sends (key, None), a tombstone. The messages go through
the container's router, so they are flushed with the task's other output before each
checkpoint, and the checkpoint records how far the changelog had got.

By default the store's write buffer (``buffered.py``) sits above this engine, so each key
written between two commits arrives here, and is sent, once per commit; with
``stores.<name>.write.buffer.max.bytes: 0`` every write is sent as it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from samzapy.storage.ports import StorageEngine

#: Sends one changelog record: key bytes and value bytes (None for a delete).
ChangelogSender = Callable[[bytes, bytes | None], None]


class LoggedStorageEngine(StorageEngine):
    """Writes through to ``inner`` and to the changelog; reads from ``inner``."""

    def __init__(self, inner: StorageEngine, send: ChangelogSender) -> None:
        super().__init__(inner.store_name, inner.task_name)
        self.inner = inner
        self._send = send
        # Reads go straight to the engine: one call less on the per-message path.
        self.get = inner.get  # type: ignore[method-assign]

    @property
    def description(self) -> str:
        return self.inner.description

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(key)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return self.inner.get_many(keys)

    def put(self, key: bytes, value: bytes) -> None:
        self.inner.put(key, value)
        self._send(key, value)

    def delete(self, key: bytes) -> None:
        self.inner.delete(key)
        self._send(key, None)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        entries = list(entries)
        self.inner.write_batch(entries)
        send = self._send
        for key, value in entries:
            send(key, value)

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.iterate(from_key, to_key)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


__all__ = ["ChangelogSender", "LoggedStorageEngine"]
