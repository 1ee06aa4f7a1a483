"""Bringing one logged store to a checkpointed changelog offset: what a task's restore and a
standby replica (``coordinator/standby.py``) share.

Each store with a changelog is transactional (Samza 1.x): every checkpoint records, with the
input offsets, how far each store's changelog partition had got (its *upcoming* offset after
the commit's flush). The store's state as of a checkpoint is the changelog replayed up to that
offset, whatever came after it. Restoring (``restore_store``):

1. keep the local store only if the last clean close left it at or before the checkpointed
   changelog offset (the *clean marker*: a file written at the close, holding the changelog
   offset the store matches, removed at open); else, since after a crash it may hold writes
   the checkpoint does not cover, replace it with the snapshot the checkpoint names when this
   host has it (``snapshots.py``), else wipe it. A changelog whose end is before the
   checkpointed offset was made again and holds none of that state: the store is wiped
   whatever it kept, and gets what the changelog holds (but on a system whose streams die
   with the process, ``memory``, where the local copy is all there is); so is a store whose
   changelog was truncated past the first record it needs (``changelog_gap.py``);
2. replay the changelog up to the checkpointed offset (only the tail after the kept store or
   the snapshot: nothing, for a snapshot taken by the commit that wrote the checkpoint), so
   the store matches the input position exactly;
3. read the records written after the checkpointed offset, and write each key they touched
   back to the changelog with its checkpointed value (or a tombstone), so a later restore
   cannot bring them back; remove the snapshots the checkpoint does not name.

Without a checkpoint the state is empty: every changelog record is beyond it.

A store without changelog has only its local copy and its snapshots: ``unlogged.py``.

Replaying a changelog from an offset at or before the one a store matches, up to a later
checkpointed offset, gives the same state as replaying it from the start: the writes are the
last value per key, in order. So a marker may name any offset up to which the store holds the
changelog (a standby's is the checkpoint it last caught up to).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog

from samzapy.api.errors import StoreError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.config import StoreConfig
from samzapy.storage import changelog_gap as gap
from samzapy.storage.buffered import BufferedStorageEngine
from samzapy.storage.cached import CachedStorageEngine
from samzapy.storage.logged import ChangelogSender
from samzapy.storage.ports import StorageEngine
from samzapy.storage.snapshots import StoreSnapshots, is_local, snapshot_offset
from samzapy.system.ports import SystemAdmin, SystemFactory
from samzapy.system.reader import read_entries

log = structlog.get_logger("samzapy.stores")

#: Written in a store's directory at a clean close: the changelog offset it matches (for a
#: store without changelog, the snapshot its last checkpoint names, else ``local``).
CLEAN_MARKER = "CLEAN_OFFSET"
_PROGRESS_S = 5.0


class LocalStore:
    """One task's instance of one store on this host: its directory, changelog partition,
    snapshots and, while open, its engine (and the write buffer and the cache in front)."""

    def __init__(
        self, config: StoreConfig, directory: Path, changelog: SystemStreamPartition | None
    ) -> None:
        self.config = config
        self.directory = directory
        self.changelog = changelog
        self.snapshots = StoreSnapshots(directory)
        self.engine: StorageEngine | None = None
        self.cache: CachedStorageEngine | None = None
        self.buffer: BufferedStorageEngine | None = None
        #: The clean marker found at open (None: none, the last close was not clean).
        self.clean_offset: str | None = None
        #: A store without changelog: its engine's sequence number at this run's last commit.
        self.committed: int | None = None

    def open_snapshot(self, path: Path) -> None:
        """Replace the open store's entries with the snapshot in ``path`` (StoreError if it
        cannot): nothing cached or waiting may outlive the entries it stood for."""
        assert self.engine is not None
        if self.cache is not None:
            self.cache.drop()
        if self.buffer is not None:
            self.buffer.drop()
        self.engine.restore_snapshot(path)

    def wipe(self, name: str, reopen: Callable[[str, LocalStore], None]) -> None:
        """Empty the open store: close it, delete its directory and open it again
        (``reopen(name, store)``)."""
        assert self.engine is not None
        self.engine.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        reopen(name, self)

    @property
    def snapshotting(self) -> bool:
        """Whether commits snapshot this store (with snapshots on): its engine can, logged or
        not."""
        return self.engine is not None and self.engine.snapshots


# -- the clean marker --------------------------------------------------------------------------


def take_marker(directory: Path) -> str | None:
    """Read and remove the clean-close marker: a crash from now on leaves none."""
    offset = read_marker(directory)
    (directory / CLEAN_MARKER).unlink(missing_ok=True)
    return offset


def read_marker(directory: Path) -> str | None:
    """The clean-close marker's offset, left in place (None: no marker)."""
    try:
        return (directory / CLEAN_MARKER).read_text().strip() or None
    except OSError:
        return None


def write_marker(directory: Path, offset: str) -> None:
    """Mark a closed store as matching the changelog up to ``offset`` (exclusive)."""
    (directory / CLEAN_MARKER).write_text(offset)


def keeps_local(
    engine: StorageEngine, admin: SystemAdmin, clean_offset: str | None, checkpointed: str | None
) -> bool:
    """Step 1's test: a persistent store closed cleanly at or before the checkpoint (not
    while it had no changelog: its marker then names no changelog offset)."""
    return (
        engine.persistent
        and checkpointed is not None
        and clean_offset is not None
        and not is_local(clean_offset)
        and admin.compare_offsets(clean_offset, checkpointed) <= 0
    )


# -- the restore -------------------------------------------------------------------------------


class Restore:
    """Restores the logged stores of one task (module docstring); ``reopen(name, store)``
    opens a wiped store again, ``send`` and ``flush`` write step 3's records."""

    def __init__(
        self,
        task_name: TaskName,
        *,
        factories: dict[str, SystemFactory],
        admins: dict[str, SystemAdmin],
        reopen: Callable[[str, LocalStore], None],
        sender: Callable[[SystemStreamPartition], ChangelogSender],
        flush: Callable[[], Awaitable[None]],
        on_records: Callable[[int], None],
        keep_snapshots: bool,
    ) -> None:
        self.task_name = task_name
        self._factories = factories
        self._admins = admins
        self._reopen = reopen
        self._sender = sender
        self._flush = flush
        self._on_records = on_records
        self._keep_snapshots = keep_snapshots

    async def restore_store(
        self, name: str, store: LocalStore, checkpointed: str | None, snapshot: str | None
    ) -> None:
        ssp = store.changelog
        assert ssp is not None and store.engine is not None
        admin = self._admins[ssp.system]
        factory = self._factories[ssp.system]
        bounds = (await admin.offset_bounds([ssp]))[ssp]
        started = time.monotonic()
        # A changelog behind its checkpoint was made again (a memory stream lives as long
        # as its process; a topic deleted and created again): what the checkpoint had is
        # not in it. On a system whose streams outlive the process, a local copy kept from
        # before does not match it either, and is not kept (``changelog_gap.py``).
        behind = gap.ends_before(admin, checkpointed, bounds.upcoming)
        remade = behind and factory.outlives_process
        # 1. Keep the local store only if a clean close left it at or before the checkpoint;
        # else start from the checkpoint's snapshot, or from nothing.
        start: str | None = None
        kept = not remade and self._keeps_local(name, store, admin, checkpointed)
        opened = None
        if kept:
            start = store.clean_offset
        elif not remade and checkpointed is not None and snapshot is not None:
            opened = self._from_snapshot(name, store, admin, snapshot, checkpointed)
            start = None if opened is None else snapshot_offset(opened)
        if not kept and opened is None:
            if behind:
                assert checkpointed is not None
                gap.made_again(
                    self.task_name,
                    name,
                    ssp,
                    checkpointed,
                    bounds.upcoming,
                    store.clean_offset if remade else None,
                    snapshot if remade else None,
                )
            self._wipe(name, store)
        # A truncated changelog lacks records the store needs: the store is wiped (if it
        # kept anything) and gets what the changelog holds, as on any other host.
        held = gap.oldest_held(bounds)
        needed = start or gap.FIRST_OFFSET
        if checkpointed is not None and gap.lacks(admin, needed, held, checkpointed):
            local = "kept" if kept else "snapshot" if opened is not None else None
            gap.truncated(self.task_name, name, ssp, needed, held, checkpointed, local)
            if local is not None:
                self._wipe(name, store)
                kept, opened, start = False, None, None
        # 2. Replay up to the checkpointed offset (what the changelog holds, behind it).
        end = bounds.upcoming if behind else checkpointed
        replayed = 0
        if end is not None and bounds.oldest is not None:
            replayed = await replay(
                store.engine,
                factory,
                admin,
                ssp,
                start or bounds.oldest,
                end,
                on_records=self._on_records,
                progress=(self.task_name, name),
            )
        # 3. Write back the keys touched after it (all of them without a checkpoint).
        trim_from = checkpointed if checkpointed is not None else bounds.oldest
        if trim_from is not None and admin.compare_offsets(trim_from, held) < 0:
            trim_from = held  # what comes before is gone
        dropped, rewritten = 0, 0
        if trim_from is not None and admin.compare_offsets(trim_from, bounds.upcoming) < 0:
            dropped, rewritten = await self._trim(store, admin, factory, trim_from, bounds.upcoming)
        store.snapshots.keep_only(snapshot if self._keep_snapshots else None)
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

    def _keeps_local(
        self, name: str, store: LocalStore, admin: SystemAdmin, checkpointed: str | None
    ) -> bool:
        """Step 1's test; a clean marker that is no offset of the changelog's system (a
        damaged file) counts as none: the store is not trusted, and says so."""
        assert store.engine is not None and store.changelog is not None
        try:
            return keeps_local(store.engine, admin, store.clean_offset, checkpointed)
        except ValueError as exc:
            log.warning(
                "store_marker_unusable",
                task=self.task_name,
                store=name,
                marker=store.clean_offset,
                reason=f"not an offset of {store.changelog.system!r}: {exc}",
                consequence="the local store is not trusted: it is restored as after a crash",
            )
            store.clean_offset = None
            return False

    def _from_snapshot(
        self, name: str, store: LocalStore, admin: SystemAdmin, snapshot: str, checkpointed: str
    ) -> str | None:
        """Replace the local store with ``snapshot`` if this host has it and it does not go
        past the checkpoint; the snapshot's id, or None when it cannot be used."""
        assert store.engine is not None
        path = store.snapshots.find(snapshot) if store.engine.snapshots else None
        reason = None
        offset = _offset_of(snapshot)
        if path is None:
            reason = "not on this host"
        elif offset is None:
            reason = "not a snapshot at a changelog offset (taken while the store had none)"
        elif admin.compare_offsets(offset, checkpointed) > 0:
            reason = f"it goes past the checkpointed changelog offset {checkpointed}"
        else:
            try:
                store.open_snapshot(path)
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

    def _wipe(self, name: str, store: LocalStore) -> None:
        assert store.engine is not None
        if store.engine.persistent:
            store.wipe(name, self._reopen)

    async def _trim(
        self,
        store: LocalStore,
        admin: SystemAdmin,
        factory: SystemFactory,
        start: str,
        end: str,
    ) -> tuple[int, int]:
        assert store.changelog is not None and store.engine is not None
        touched: dict[bytes, None] = {}
        dropped = 0
        async for batch in read_entries(factory, admin, store.changelog, start, end):
            dropped += len(batch)
            for key, _ in batch.entries:
                touched[key] = None
        send = self._sender(store.changelog)
        for key in touched:
            send(key, store.engine.get(key))
        await self._flush()
        return dropped, len(touched)


async def replay(
    engine: StorageEngine,
    factory: SystemFactory,
    admin: SystemAdmin,
    changelog: SystemStreamPartition,
    start: str,
    end: str,
    *,
    on_records: Callable[[int], None] | None = None,
    progress: tuple[TaskName, str] | None = None,
) -> int:
    """Write the changelog's records from ``start`` up to ``end`` (exclusive, read committed)
    into ``engine``; how many. ``on_records`` hears each batch's count; with ``progress``
    (task, store), a long replay logs ``store_restoring`` every few seconds."""
    records = 0
    last_log = time.monotonic()
    began = last_log
    async for batch in read_entries(factory, admin, changelog, start, end):
        engine.write_batch(batch.entries)
        records += len(batch)
        if on_records is not None:
            on_records(len(batch))
        now = time.monotonic()
        if progress is not None and now - last_log >= _PROGRESS_S:
            last_log = now
            rate = records / (now - began)
            remaining = _remaining(batch.offsets[-1], end)
            log.info(
                "store_restoring",
                task=progress[0],
                store=progress[1],
                records=records,
                rate=round(rate, 1),
                eta_s=round(remaining / rate, 1) if remaining is not None and rate else None,
            )
    return records


def _offset_of(snapshot: str) -> str | None:
    try:
        return snapshot_offset(snapshot)
    except ValueError:
        return None


def _remaining(offset: str, end: str) -> int | None:
    try:
        return int(end) - int(offset)
    except ValueError:
        return None


__all__ = [
    "CLEAN_MARKER",
    "LocalStore",
    "Restore",
    "keeps_local",
    "read_marker",
    "replay",
    "take_marker",
    "write_marker",
]
