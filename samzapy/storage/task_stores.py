"""A task's key-value stores: opened before ``init``, restored, flushed at commit, closed last.

Each store is assembled by ``storage.registry.open_store`` (the path the store contract tests
check). Each store with a changelog is transactional (Samza 1.x): every checkpoint records,
with the input offsets, how far each store's changelog partition had got (its *upcoming*
offset after the commit's flush). Restoring at start-up:

1. keep the local store only if the last clean shutdown left it exactly at the checkpointed
   changelog offset (a marker file written after the final commit, removed at open); else,
   since after a crash it may hold writes the checkpoint does not cover, replace it with the
   snapshot the checkpoint names when this host has it (``snapshots.py``), else wipe it;
2. replay the changelog up to the checkpointed offset (only the tail after the kept store or
   the snapshot: nothing, for a snapshot taken by the commit that wrote the checkpoint), so
   the store matches the input position exactly;
3. read the records written after the checkpointed offset, and write each key they touched
   back to the changelog with its checkpointed value (or a tombstone), so a later restore
   cannot bring them back; remove the snapshots the checkpoint does not name.

Without a checkpoint the state is empty: every changelog record is beyond it.

With ``snapshots`` on, each commit snapshots every logged store that can (RocksDB) once its
changelog offset is known (``snapshot``), the checkpoint names the snapshots, and once it is
written the older ones are removed (``snapshots_committed``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from samzapy.api.envelope import OutgoingMessageEnvelope
from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.config import StoreConfig
from samzapy.storage.cached import CachedStorageEngine
from samzapy.storage.logged import ChangelogSender, LoggedStorageEngine
from samzapy.storage.ports import StorageEngine
from samzapy.storage.registry import open_store
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.storage.snapshots import StoreSnapshots, snapshot_offset
from samzapy.system.ports import SystemAdmin, SystemFactory
from samzapy.system.reader import read_partition
from samzapy.system.serde import Serde

log = structlog.get_logger("samzapy.stores")

#: Written in a store's directory at a clean shutdown: the changelog offset it matches.
CLEAN_MARKER = "CLEAN_OFFSET"
_PROGRESS_S = 5.0


def task_directory_name(task_name: TaskName) -> str:
    """``Partition 0`` -> ``Partition_0``: a task's directory under a store's directory."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in task_name)


class _Store:
    def __init__(
        self, config: StoreConfig, directory: Path, changelog: SystemStreamPartition | None
    ) -> None:
        self.config = config
        self.directory = directory
        self.changelog = changelog
        self.snapshots = StoreSnapshots(directory)
        self.engine: StorageEngine | None = None
        self.cache: CachedStorageEngine | None = None
        self.logged: LoggedStorageEngine | None = None
        self.clean_offset: str | None = None

    @property
    def snapshotting(self) -> bool:
        """Whether commits snapshot this store: logged, on an engine that can."""
        return self.changelog is not None and self.engine is not None and self.engine.snapshots


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
        self._stores: dict[str, _Store] = {}
        for name, cfg in configs.items():
            changelog = None
            if cfg.changelog is not None:
                changelog = SystemStreamPartition(
                    cfg.changelog.system, cfg.changelog.stream, partition
                )
            directory = base_dir / name / task_directory_name(task_name)
            self._stores[name] = _Store(cfg, directory, changelog)
        #: The user-facing stores, by name (what ``context.get_store`` returns).
        self.stores: dict[str, SerializedKeyValueStore[Any, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self._stores)

    # -- opening and restoring ----------------------------------------------------------------

    def open(self) -> None:
        for name, store in self._stores.items():
            store.clean_offset = _take_marker(store.directory)
            self._open(name, store)

    def _open(self, name: str, store: _Store) -> None:
        config = store.config
        store.engine, self.stores[name], store.cache, store.logged = open_store(
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
        self, changelog_offsets: Mapping[str, str], snapshots: Mapping[str, str] | None = None
    ) -> None:
        """Bring every logged store to its checkpointed changelog offset (module docstring);
        ``changelog_offsets`` and ``snapshots`` (the checkpoint's) are empty without a
        checkpoint."""
        offsets, named = changelog_offsets, snapshots or {}
        for name, store in self._stores.items():
            if store.changelog is not None:
                await self._restore(name, store, offsets.get(name), named.get(name))

    async def _restore(
        self, name: str, store: _Store, checkpointed: str | None, snapshot: str | None
    ) -> None:
        ssp = store.changelog
        assert ssp is not None and store.engine is not None
        admin = self._admins[ssp.system]
        factory = self._factories[ssp.system]
        bounds = (await admin.offset_bounds([ssp]))[ssp]
        started = time.monotonic()
        # 1. Keep the local store only if a clean shutdown left it at the checkpoint; else
        # start from the checkpoint's snapshot, or from nothing.
        start: str | None = None
        kept = (
            store.engine.persistent
            and checkpointed is not None
            and store.clean_offset is not None
            and admin.compare_offsets(store.clean_offset, checkpointed) <= 0
        )
        opened = None
        if kept:
            start = store.clean_offset
        elif checkpointed is not None and snapshot is not None:
            opened = self._from_snapshot(name, store, admin, snapshot, checkpointed)
            start = None if opened is None else snapshot_offset(opened)
        if not kept and opened is None:
            self._wipe(name, store)
        # 2. Replay up to the checkpointed offset.
        replayed = 0
        if checkpointed is not None and bounds.oldest is not None:
            replayed = await self._replay(
                name, store, admin, factory, start or bounds.oldest, checkpointed
            )
        # 3. Write back the keys touched after it (all of them without a checkpoint).
        trim_from = checkpointed if checkpointed is not None else bounds.oldest
        dropped, rewritten = 0, 0
        if trim_from is not None and admin.compare_offsets(trim_from, bounds.upcoming) < 0:
            dropped, rewritten = await self._trim(store, admin, factory, trim_from, bounds.upcoming)
        store.snapshots.keep_only(snapshot if self._snapshots else None)
        elapsed = time.monotonic() - started
        log.info(
            "store_restored",
            task=self.task_name,
            store=name,
            changelog=str(ssp),
            kept_local=kept,
            snapshot=opened,
            records=replayed,
            elapsed_s=round(elapsed, 3),
            rate=round(replayed / elapsed, 1) if elapsed > 0 else None,
            dropped_after_checkpoint=dropped,
            keys_rewritten=rewritten,
        )

    def _from_snapshot(
        self, name: str, store: _Store, admin: SystemAdmin, snapshot: str, checkpointed: str
    ) -> str | None:
        """Replace the local store with ``snapshot`` if this host has it and it does not go
        past the checkpoint; the snapshot's id, or None when it cannot be used."""
        assert store.engine is not None
        path = store.snapshots.find(snapshot) if store.engine.snapshots else None
        reason = None
        if path is None:
            reason = "not on this host"
        elif admin.compare_offsets(snapshot_offset(snapshot), checkpointed) > 0:
            reason = f"it goes past the checkpointed changelog offset {checkpointed}"
        else:
            try:
                if store.cache is not None:
                    store.cache.drop()  # nothing cached may outlive the entries it stood for
                store.engine.restore_snapshot(path)
                return snapshot
            except StoreError as exc:
                reason = str(exc)
        log.info(
            "store_snapshot_unused",
            task=self.task_name,
            store=name,
            snapshot=snapshot,
            reason=reason,
        )
        return None

    def _wipe(self, name: str, store: _Store) -> None:
        assert store.engine is not None
        if not store.engine.persistent:
            return
        store.engine.close()
        shutil.rmtree(store.directory, ignore_errors=True)
        self._open(name, store)

    async def _replay(
        self,
        name: str,
        store: _Store,
        admin: SystemAdmin,
        factory: SystemFactory,
        start: str,
        end: str,
    ) -> int:
        assert store.changelog is not None and store.engine is not None
        engine = store.engine
        records = 0
        last_log = time.monotonic()
        began = last_log
        async for batch in read_partition(factory, admin, store.changelog, start, end):
            engine.write_batch([(_bytes(e.key), _value(e.message)) for e in batch])
            records += len(batch)
            self.restored_records += len(batch)
            now = time.monotonic()
            if now - last_log >= _PROGRESS_S:
                last_log = now
                rate = records / (now - began)
                remaining = _remaining(batch[-1].offset, end)
                log.info(
                    "store_restoring",
                    task=self.task_name,
                    store=name,
                    records=records,
                    rate=round(rate, 1),
                    eta_s=round(remaining / rate, 1) if remaining is not None and rate else None,
                )
        return records

    async def _trim(
        self,
        store: _Store,
        admin: SystemAdmin,
        factory: SystemFactory,
        start: str,
        end: str,
    ) -> tuple[int, int]:
        assert store.changelog is not None and store.engine is not None
        touched: dict[bytes, None] = {}
        dropped = 0
        async for batch in read_partition(factory, admin, store.changelog, start, end):
            dropped += len(batch)
            for envelope in batch:
                touched[_bytes(envelope.key)] = None
        send = self._changelog_sender(store.changelog)
        for key in touched:
            send(key, store.engine.get(key))
        await self._flush()
        return dropped, len(touched)

    # -- committing and closing ---------------------------------------------------------------

    async def flush(self) -> None:
        """Step 2 of a commit: make the stores' writes durable, before their changelog offsets
        are read. The write caches are written back first, then each key written since the
        last commit sends its changelog record (``logged.py``); those are flushed with the
        producers (step 1 flushed everything sent before). A logged store's
        writes are then durable; its local copy is not trusted after a crash anyway, so only
        stores without a changelog flush their engine here."""
        logged_back = False
        for store in self._stores.values():
            if store.cache is not None and store.cache.dirty:
                store.cache.write_back()
                logged_back = logged_back or store.changelog is not None
            if store.logged is not None and store.logged.send_pending():
                logged_back = True
        if logged_back:
            await self._flush()
        for store in self._stores.values():
            if store.engine is not None and store.changelog is None:
                store.engine.flush()

    async def snapshot(self, changelog_offsets: Mapping[str, str]) -> dict[str, str]:
        """Step 2 of a commit, after ``changelog_offsets``: snapshot each logged store that can
        (with snapshots on), holding the loop a few ms per store (``snapshots.py``); the
        snapshots' ids by store, for the checkpoint."""
        taken: dict[str, str] = {}
        if not self._snapshots:
            return taken
        for name, store in self._stores.items():
            offset = changelog_offsets.get(name)
            if offset is not None and store.snapshotting:
                assert store.engine is not None
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
        """Close every store; after a clean final commit, mark the ones that match it. Writes
        still in a logged store's cache (after a failure) are dropped: the checkpoint does not
        cover them; a store without changelog keeps them, as it would have without a cache."""
        for name, store in self._stores.items():
            engine = store.engine
            if engine is None:
                continue
            try:
                if store.cache is not None:
                    if store.changelog is None:
                        store.cache.write_back()
                    store.cache.drop()
                    store.cache = None
                if store.logged is not None:
                    store.logged.drop_pending()  # empty after a clean final commit
                    store.logged = None
                engine.flush()
                engine.close()
            except StoreError as exc:
                log.warning("store_close_failed", task=self.task_name, store=name, error=str(exc))
                continue
            offset = (clean_offsets or {}).get(name)
            if offset is not None and engine.persistent:
                (store.directory / CLEAN_MARKER).write_text(offset)
            store.engine = None


def _take_marker(directory: Path) -> str | None:
    """Read and remove the clean-shutdown marker: a crash from now on leaves none."""
    marker = directory / CLEAN_MARKER
    try:
        offset = marker.read_text().strip() or None
    except OSError:
        return None
    marker.unlink(missing_ok=True)
    return offset


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    raise StoreError(f"changelog records must have bytes keys, got {type(value).__name__}")


def _value(value: Any) -> bytes | None:
    return None if value is None else _bytes(value)


def _remaining(offset: str, end: str) -> int | None:
    try:
        return int(end) - int(offset)
    except ValueError:
        return None


__all__ = ["CLEAN_MARKER", "TaskStores", "task_directory_name"]
