"""A storage engine whose writes also go to the store's changelog, each key once per commit.

The changelog is a stream partition of the task's own (same number as the task's partition);
a put sends (key, value), a delete sends (key, None), a tombstone. The messages go through
the container's router, so they are flushed with the task's other output before each
checkpoint, and the checkpoint records how far the changelog had got.

Every write reaches the engine at once (reads need nothing else), but its changelog record
waits, in a buffer that keeps the latest value of each key, until the commit sends them
(``send_pending``, step 2 of the commit, before the changelog's offset is read): a key written
many times between two commits is sent once, as Kafka Streams' record cache and Quix Streams'
per-checkpoint transaction do. When the buffer holds more than ``dedup_bytes`` of keys and
values (``stores.<name>.changelog.dedup.max.bytes``), everything in it is sent at once and it
starts again: a working set larger than the buffer costs at most what sending every write
costs, never more. ``dedup_bytes`` 0 sends every write as it happens.

The changelog then holds the store's state at each commit rather than every intermediate
value, which is all a restore needs: it applies the last record of each key up to the
checkpointed offset. Between two commits the engine is ahead of the changelog; that is never
seen after a crash, since the local store is only trusted at a clean marker or a snapshot,
both written after a commit sent the buffer. After a failure the buffer is dropped with the
rest of the uncommitted work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from samzapy.storage.ports import StorageEngine

#: Sends one changelog record: key bytes and value bytes (None for a delete).
ChangelogSender = Callable[[bytes, bytes | None], None]

#: The default of ``stores.<name>.changelog.dedup.max.bytes``, per task's store.
DEFAULT_DEDUP_BYTES = 1 << 20

_MISSING = object()


class LoggedStorageEngine(StorageEngine):
    """Writes through to ``inner``, and to the changelog through a buffer of up to
    ``dedup_bytes`` that keeps each key's latest value; reads from ``inner``."""

    def __init__(
        self, inner: StorageEngine, send: ChangelogSender, *, dedup_bytes: int = 0
    ) -> None:
        super().__init__(inner.store_name, inner.task_name)
        self.inner = inner
        self._send = send
        self._dedup_bytes = dedup_bytes
        self._pending: dict[bytes, bytes | None] = {}
        self._pending_bytes = 0

    @property
    def description(self) -> str:
        return self.inner.description

    @property
    def pending(self) -> int:
        """Keys whose changelog record waits for the next commit."""
        return len(self._pending)

    def get(self, key: bytes) -> bytes | None:
        return self.inner.get(key)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return self.inner.get_many(keys)

    def put(self, key: bytes, value: bytes) -> None:
        self.inner.put(key, value)
        self._log(key, value)

    def delete(self, key: bytes) -> None:
        self.inner.delete(key)
        self._log(key, None)

    def write_batch(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        entries = list(entries)
        self.inner.write_batch(entries)
        for key, value in entries:
            self._log(key, value)

    def _log(self, key: bytes, value: bytes | None) -> None:
        if not self._dedup_bytes:
            self._send(key, value)
            return
        pending = self._pending
        old = pending.get(key, _MISSING)
        size = 0 if value is None else len(value)
        if old is _MISSING:
            self._pending_bytes += len(key) + size
        else:
            self._pending_bytes += size - (0 if old is None else len(old))  # type: ignore[arg-type]
        pending[key] = value
        if self._pending_bytes > self._dedup_bytes:
            self.send_pending()

    def send_pending(self) -> int:
        """Send the changelog record of every key written since the last call (its latest
        value), in the order first written; how many were sent."""
        pending = self._pending
        if not pending:
            return 0
        self._pending, self._pending_bytes = {}, 0
        send = self._send
        for key, value in pending.items():
            send(key, value)
        return len(pending)

    def drop_pending(self) -> None:
        """Forget the records waiting (after a failure: no checkpoint covers them)."""
        self._pending, self._pending_bytes = {}, 0

    def iterate(
        self, from_key: bytes | None = None, to_key: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return self.inner.iterate(from_key, to_key)

    def flush(self) -> None:
        self.send_pending()
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


__all__ = ["DEFAULT_DEDUP_BYTES", "ChangelogSender", "LoggedStorageEngine"]
