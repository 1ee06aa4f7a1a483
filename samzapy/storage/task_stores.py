"""A task's key-value stores: opened before ``init``, restored, flushed at commit, closed last.

Each store is assembled by ``storage.registry.open_store`` (the path the store contract tests
check). Each store with a changelog is transactional (Samza 1.x): every checkpoint records,
with the input offsets, how far each store's changelog partition had got, and a restore at
start-up brings the store to exactly that offset (``restore.py``: keep a clean local copy,
else the checkpoint's snapshot, else nothing; replay the changelog's tail; write back what
came after). Without a checkpoint the state is empty.

With ``snapshots`` on, each commit snapshots every store that can (RocksDB), a logged one
once its changelog offset is known (``snapshot``), the checkpoint names the snapshots, and
once it is written the older ones are removed (``snapshots_committed``). A store without
changelog is brought back to its checkpoint from the snapshot alone (``unlogged.py``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from samzapy.api.envelope import OutgoingMessageEnvelope
from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.config import StoreConfig
from samzapy.storage.logged import ChangelogSender
from samzapy.storage.ports import StoreLockedError
from samzapy.storage.registry import open_store
from samzapy.storage.restore import CLEAN_MARKER, LocalStore, Restore, take_marker, write_marker
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.storage.snapshots import LOCAL
from samzapy.storage.unlogged import restore_unlogged
from samzapy.system.ports import SystemAdmin, SystemFactory
from samzapy.system.serde import Serde

log = structlog.get_logger("samzapy.stores")


def task_directory_name(task_name: TaskName) -> str:
    """``Partition 0`` -> ``Partition_0``: a task's directory under a store's directory."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in task_name)


class TaskStores:
    """The stores of one task."""

    def __init__(
        self,
        *,
        task_name: TaskName,
        partition: int,
        configs: Mapping[str, StoreConfig],
        base_dir: Path,
        serde: Callable[[str | None], Serde],
        send: Callable[[OutgoingMessageEnvelope], None],
        flush: Callable[[], Awaitable[None]],
        factories: Mapping[str, SystemFactory],
        admins: Mapping[str, SystemAdmin],
        snapshots: bool = False,
    ) -> None:
        """``send`` sends a changelog record with the task's output (safe from a pooled task's
        thread); ``flush`` returns once everything sent so far is durable; ``snapshots``:
        snapshot the logged stores at each commit."""
        self.task_name = task_name
        self.partition = partition
        #: Changelog records replayed by the restore so far (a metric), and whether the
        #: restore has finished.
        self.restored_records = 0
        self.restored = False
        self._serde = serde
        self._send = send
        self._flush = flush
        self._factories = factories
        self._admins = admins
        self._snapshots = snapshots
        #: Called at each commit before the stores flush: writes of what a task keeps in
        #: memory (a window's watermark), so the checkpoint's stores hold them.
        self.before_flush: list[Callable[[], None]] = []
        self._stores: dict[str, LocalStore] = {}
        for name, cfg in configs.items():
            changelog = None
            if cfg.changelog is not None:
                changelog = SystemStreamPartition(
                    cfg.changelog.system, cfg.changelog.stream, partition
                )
            directory = base_dir / name / task_directory_name(task_name)
            self._stores[name] = LocalStore(cfg, directory, changelog)
        #: The user-facing stores, by name (what ``context.get_store`` returns).
        self.stores: dict[str, SerializedKeyValueStore[Any, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self._stores)

    # -- opening and restoring ----------------------------------------------------------------

    def open(self) -> None:
        """Open every store not open yet. StoreLockedError: a directory another process holds
        open; the stores opened stay open, and a later call opens the rest."""
        for name, store in self._stores.items():
            if store.engine is None:
                store.clean_offset = take_marker(store.directory)
                self._open(name, store)

    async def open_waiting(
        self, sleep: Callable[[float], Awaitable[None]] | None, retry_s: float = 1.0
    ) -> None:
        """``open``, waiting while another process holds a store's directory open: under the
        group, a task's old owner paused rather than dead (SIGSTOP, a frozen VM) whose session
        ran out, so the task is this container's now; it lets go once woken (and fenced) or
        killed. Tried again every ``retry_s``; logs ``store_locked`` once, then
        ``store_unlocked`` with the time waited. A stop cuts the wait short (the caller's).
        ``sleep`` None: no waiting (``open``; outside the group a lock is a misconfiguration)."""
        if sleep is None:
            self.open()
            return
        began: float | None = None
        while True:
            try:
                self.open()
            except StoreLockedError as exc:
                if began is None:
                    began = time.monotonic()
                    log.warning(
                        "store_locked",
                        task=self.task_name,
                        error=str(exc),
                        retry_s=retry_s,
                        reason="another process (an old owner of the task, paused) holds the "
                        "store open: the task starts once it lets go (woken and fenced, or "
                        "killed); the container's other tasks go on",
                    )
                await sleep(retry_s)
                continue
            if began is not None:
                log.info(
                    "store_unlocked",
                    task=self.task_name,
                    waited_s=round(time.monotonic() - began, 3),
                )
            return

    def _open(self, name: str, store: LocalStore) -> None:
        config = store.config
        store.engine, self.stores[name], store.cache, _, store.buffer = open_store(
            name,
            self.task_name,
            store.directory,
            config.options,
            self._serde(config.key_serde or "bytes"),
            self._serde(config.msg_serde or "bytes"),
            changelog=None if store.changelog is None else self._changelog_sender(store.changelog),
        )

    def _changelog_sender(self, ssp: SystemStreamPartition) -> ChangelogSender:
        stream = ssp.system_stream
        send = self._send  # the task's collector: safe from a pooled task's thread
        partition = ssp.partition

        def sender(key: bytes, value: bytes | None) -> None:
            send(OutgoingMessageEnvelope(stream, value, key=key, partition=partition))

        return sender

    async def restore(
        self,
        changelog_offsets: Mapping[str, str] | None,
        snapshots: Mapping[str, str] | None = None,
    ) -> None:
        """Bring every store to the checkpoint: a logged one to its checkpointed changelog
        offset (``restore.py``), one without changelog to the snapshot the checkpoint names
        (``unlogged.py``). ``changelog_offsets`` and ``snapshots`` are the checkpoint's;
        ``changelog_offsets`` None: the task has no checkpoint."""
        offsets, named = changelog_offsets or {}, snapshots or {}
        restore = Restore(
            self.task_name,
            factories=dict(self._factories),
            admins=dict(self._admins),
            reopen=self._open,
            sender=self._changelog_sender,
            flush=self._flush,
            on_records=self._restored,
            keep_snapshots=self._snapshots,
        )
        for name, store in self._stores.items():
            if store.changelog is not None:
                await restore.restore_store(name, store, offsets.get(name), named.get(name))
            else:
                restore_unlogged(
                    self.task_name,
                    name,
                    store,
                    checkpointed=changelog_offsets is not None,
                    snapshot=named.get(name),
                    keep_snapshots=self._snapshots,
                    reopen=self._open,
                )

    def _restored(self, records: int) -> None:
        self.restored_records += records

    # -- committing and closing ---------------------------------------------------------------

    async def flush(self) -> None:
        """Step 2 of a commit: make the stores' writes durable, before their changelog offsets
        are read. Each write buffer is written back: each key written since the last commit
        reaches the engine and sends its changelog record (``buffered.py``); those are
        flushed with the producers (step 1 flushed everything sent before). A logged store's
        writes are then durable; its local copy is not trusted after a crash anyway, so only
        stores without a changelog flush their engine here."""
        for write in self.before_flush:
            write()
        logged_back = False
        for store in self._stores.values():
            if store.buffer is not None and store.buffer.write_back():
                logged_back = logged_back or store.changelog is not None
        if logged_back:
            await self._flush()
        for store in self._stores.values():
            if store.engine is not None and store.changelog is None:
                store.engine.flush()
                store.committed = store.engine.sequence()

    async def snapshot(self, changelog_offsets: Mapping[str, str]) -> dict[str, str]:
        """Step 2 of a commit, after ``changelog_offsets``: snapshot each store that can (with
        snapshots on), a logged one at its changelog offset, holding the loop a few ms per
        store (``snapshots.py``); the snapshots' ids by store, for the checkpoint."""
        taken: dict[str, str] = {}
        if not self._snapshots:
            return taken
        for name, store in self._stores.items():
            if not store.snapshotting:
                continue
            assert store.engine is not None
            if store.changelog is None:
                taken[name] = await store.snapshots.take(store.engine, None)
            elif (offset := changelog_offsets.get(name)) is not None:
                taken[name] = await store.snapshots.take(store.engine, offset)
        return taken

    async def snapshots_committed(self, snapshots: Mapping[str, str]) -> None:
        """A checkpoint naming ``snapshots`` is written: the older ones can go."""
        for name, snapshot in snapshots.items():
            await self._stores[name].snapshots.discard(snapshot)

    async def changelog_offsets(self) -> dict[str, str]:
        """Each logged store's changelog offset after the commit's flush (upcoming)."""
        by_system: dict[str, list[SystemStreamPartition]] = {}
        names: dict[SystemStreamPartition, str] = {}
        for name, store in self._stores.items():
            if store.changelog is not None:
                by_system.setdefault(store.changelog.system, []).append(store.changelog)
                names[store.changelog] = name
        offsets: dict[str, str] = {}
        for system, ssps in by_system.items():
            for ssp, bounds in (await self._admins[system].offset_bounds(ssps)).items():
                offsets[names[ssp]] = bounds.upcoming
        return offsets

    def close_iterators(self) -> None:
        for kv in self.stores.values():
            kv.close_iterators()

    def close(self, clean_offsets: Mapping[str, str] | None = None) -> None:
        """Close every store; after a clean final commit (``clean_offsets``, the changelog
        offsets, given), mark the ones that match it: a store without changelog with the
        snapshot that commit took (``local`` without one), unless written since (the commit
        was skipped: ``committable``). Writes still in a logged store's
        buffer (after a failure) are dropped: the checkpoint does not cover them; a store
        without changelog keeps them, as it would have without a buffer (its restore goes
        back to the checkpoint's snapshot, when there is one)."""
        for name, store in self._stores.items():
            engine = store.engine
            if engine is None:
                continue
            try:
                if store.cache is not None:
                    store.cache.drop()
                    store.cache = None
                if store.buffer is not None:
                    if store.changelog is None:
                        store.buffer.write_back()
                    store.buffer.drop()  # empty after a clean final commit
                    store.buffer = None
                offset = (clean_offsets or {}).get(name)
                if store.changelog is None and clean_offsets is not None:
                    # Written since the last commit (the final one skipped): no marker.
                    same = engine.sequence() == store.committed
                    offset = (store.snapshots.last or LOCAL) if same else None
                engine.flush()
                engine.close()
            except StoreError as exc:
                log.warning("store_close_failed", task=self.task_name, store=name, error=str(exc))
                continue
            if offset is not None and engine.persistent:
                write_marker(store.directory, offset)
            store.engine = None


__all__ = ["CLEAN_MARKER", "TaskStores", "task_directory_name"]
