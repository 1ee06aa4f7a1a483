"""One standby replica of one task's logged store: its own directory, kept at a checkpoint.

A standby keeps a copy of the task's store in ``<store>/<task>.standby``, beside the directory
the active task uses on this host (``<store>/<task>``). Its own directory, so that no
container's standby ever holds the RocksDB lock of a store an active task needs, even when
several containers share one state directory; a promotion moves it into place.

The copy only ever holds the changelog replayed up to a checkpointed changelog offset (the
task's state as of a checkpoint: an active task's records after its last checkpoint may be
redone by its next owner), never past it. ``applied`` is the last such offset reached; a
catch-up cut short (a promotion) leaves the copy between it and the checkpoint it was heading
to, which ``applied`` still describes, since replaying from an earlier offset gives the same
state (``storage/restore.py``). Closing writes ``applied`` as the clean marker, which the
active task's restore reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from samzapy.api.errors import StoreError, StreamSystemError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.config import StoreConfig
from samzapy.storage.ports import StorageEngine, StoreLockedError
from samzapy.storage.registry import store_factory_for
from samzapy.storage.restore import read_marker, take_marker, write_marker
from samzapy.storage.snapshots import is_local
from samzapy.system.entries import EntryBatch
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemConsumer, SystemFactory

log = structlog.get_logger("samzapy.standby")

#: The suffix of a standby's directory, beside the active task's.
SUFFIX = ".standby"
_BATCH = 10_000
#: How long a catch-up may receive nothing before it gives up (the next tick tries again).
_SILENCE_S = 60.0
#: Nothing read ahead.
_NOTHING = EntryBatch([], [])
#: While a copy's directory stays locked, ``standby_waiting`` is repeated at most this often.
_WAITING_LOG_S = 60.0


def standby_directory(active: Path) -> Path:
    return active.with_name(active.name + SUFFIX)


class StandbyStore:
    """The standby copy of one store of one task."""

    def __init__(
        self,
        task_name: TaskName,
        name: str,
        config: StoreConfig,
        active_directory: Path,
        changelog: SystemStreamPartition,
    ) -> None:
        self.task_name = task_name
        self.name = name
        self.config = config
        self.active_directory = active_directory
        self.directory = standby_directory(active_directory)
        self.changelog = changelog
        self.engine: StorageEngine | None = None
        #: The changelog offset (exclusive) the copy matches; None: it holds nothing yet.
        self.applied: str | None = None
        #: The latest checkpoint's changelog offset, and the changelog's head, as last seen.
        self.checkpointed: str | None = None
        self.head: str | None = None
        self.records_applied = 0
        #: Whether it has reached its task's checkpoint since it started.
        self.caught_up = False
        #: Set to cut a catch-up short (a promotion or a drop is waiting).
        self.closing = False
        #: The changelog's reader, kept between catch-ups, and what it read past the
        #: checkpoint it was reading up to.
        self._reader: SystemConsumer | None = None
        self._ahead = _NOTHING
        #: The offset after the last record the reader returned.
        self._read_to: str | None = None
        #: While ``open`` fails: since when (monotonic), tries, when it was last logged.
        self._waiting: tuple[float, int, float] | None = None

    # -- opening and closing ------------------------------------------------------------------

    def open(self) -> bool:
        """Open the copy (False: not possible now, say another process holds it). A copy a
        clean close left keeps its offset; any other is wiped."""
        try:
            # Opening takes the directory's lock first: nothing is touched while another
            # process (a standby of the same task, sharing this state directory) holds it.
            engine = self._create(self.directory)
            clean = take_marker(self.directory)
            if clean is None and engine.persistent:  # not closed cleanly: start over
                engine.close()
                shutil.rmtree(self.directory, ignore_errors=True)
                engine = self._create(self.directory)
            self.engine = engine
        except (StoreError, OSError) as exc:
            self._still_waiting(exc)
            return False
        self._waiting = None
        self.applied = clean
        return True

    def _still_waiting(self, exc: Exception) -> None:
        """``open`` failed again: ``standby_waiting`` at the first try, then at most once a
        minute (each catch-up, every second, tries again: two standbys of one task on a
        state directory containers share wait for as long as both run)."""
        now = time.monotonic()
        since, tries, logged = self._waiting or (now, 0, now - _WAITING_LOG_S)
        tries += 1
        if now - logged >= _WAITING_LOG_S:
            logged = now
            log.warning(
                "standby_waiting",
                task=self.task_name,
                store=self.name,
                directory=str(self.directory),
                reason=str(exc),
                waiting_s=round(now - since, 1),
                tries=tries,
            )
        self._waiting = (since, tries, logged)

    def _create(self, directory: Path) -> StorageEngine:
        factory = store_factory_for(self.name, self.config.options.get("factory"))
        return factory.create(
            self.name, self.task_name, directory, self.config.options, logged=True
        )

    @property
    def persistent(self) -> bool:
        return self.engine is not None and self.engine.persistent

    def close(self) -> None:
        """Close the copy, marked clean at the offset it matches (when it knows one)."""
        engine, self.engine = self.engine, None
        if engine is None:
            return
        try:
            engine.flush()
            engine.close()
        except StoreError as exc:
            log.warning(
                "standby_close_failed", task=self.task_name, store=self.name, error=str(exc)
            )
            return
        if self.applied is not None:
            write_marker(self.directory, self.applied)

    async def wipe(self) -> None:
        """Start the copy over (the checkpoint went back, or dropped its changelog offset)."""
        await self.stop_reading()
        if self.engine is not None:
            with contextlib.suppress(StoreError):
                self.engine.close()
        self.engine = None
        self.applied = None
        shutil.rmtree(self.directory, ignore_errors=True)
        self.open()

    # -- catching up --------------------------------------------------------------------------

    def lag(self, admin: SystemAdmin, end: str | None) -> int | None:
        """Records between ``applied`` and ``end`` (offsets as integers), None if unknown."""
        if end is None:
            return None
        try:
            return max(0, int(end) - int(self.applied)) if self.applied is not None else None
        except ValueError:
            return None

    async def catch_up(
        self, factory: SystemFactory, admin: SystemAdmin, oldest: str | None, checkpointed: str
    ) -> int:
        """Replay the changelog from ``applied`` (or ``oldest``) up to ``checkpointed``, the
        latest checkpoint's offset, read committed; how many records. Cut short by
        ``closing``, in which case ``applied`` stays where it was.

        The reader stays open from one catch-up to the next (starting one costs more than
        a second's records); what it reads at or past ``checkpointed`` waits in ``ahead``
        for a later checkpoint (at most what the active task wrote since its last one)."""
        if self.engine is None:
            return 0
        if self.applied is not None and _went_back(admin, self.applied, checkpointed):
            # The checkpoint went back (samzapy checkpoint set), or the marker the copy
            # was opened with is no offset (a damaged file): start over.
            await self.wipe()
            if self.engine is None:
                return 0
        start = self.applied if self.applied is not None else oldest
        if start is None or admin.compare_offsets(start, checkpointed) >= 0:
            if self.applied is None:  # nothing to read before it: the state is empty
                self.applied = checkpointed
            return 0
        try:
            records = self._apply_ahead(admin, checkpointed)
            read_to = self._read_to
            done = bool(self._ahead) or (
                read_to is not None and admin.compare_offsets(read_to, checkpointed) >= 0
            )
            if not done:
                records += await self._read_on(factory, admin, start, checkpointed)
        except BaseException:
            await self.stop_reading()  # the next catch-up starts over from ``applied``
            raise
        if not self.closing:
            self.applied = checkpointed
        return records

    def _apply_ahead(self, admin: SystemAdmin, end: str) -> int:
        """Apply what was read ahead before ``end``; keep the rest."""
        ahead = self._ahead
        cut = ahead.count_before(admin.compare_offsets, end)
        if cut == 0:
            return 0
        applied, self._ahead = ahead.split(cut) if cut < len(ahead) else (ahead, _NOTHING)
        return self._write(applied)

    async def _read_on(
        self, factory: SystemFactory, admin: SystemAdmin, start: str, end: str
    ) -> int:
        reader = self._reader
        ssp = self.changelog
        if reader is None:
            reader = factory.get_committed_consumer()
            reader.register(ssp, start, OffsetDefault.OLDEST)
            reader.read_entries()
            await reader.start()
            self._reader = reader
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        records = 0
        while not self.closing:
            batch = await reader.poll_entries(ssp, _BATCH, 0.05)
            if batch is not None and batch.ended and not batch:
                return records  # a changelog has no end-of-stream; an ended one is read
            if not batch:
                position = await reader.position(ssp)
                if position is not None and admin.compare_offsets(position, end) >= 0:
                    return records  # what is left before the end is not to be read
                if loop.time() - last_progress >= _SILENCE_S:
                    raise StreamSystemError(
                        f"standby of {self.task_name!r}: reading {ssp} received nothing for "
                        f"{_SILENCE_S:g} s; expected records up to offset {end} (exclusive)"
                    )
                continue
            last_progress = loop.time()
            self._ahead = batch
            self._read_to = read_to = admin.offset_after(batch.offsets[-1])
            records += self._apply_ahead(admin, end)
            if batch.ended or self._ahead or admin.compare_offsets(read_to, end) >= 0:
                return records
        return records

    def _write(self, batch: EntryBatch) -> int:
        if batch:
            assert self.engine is not None
            self.engine.write_batch(batch.entries)
            self.records_applied += len(batch)
        return len(batch)

    async def stop_reading(self) -> None:
        """Stop the reader, forgetting what it read ahead."""
        reader, self._reader = self._reader, None
        self._ahead = _NOTHING
        self._read_to = None
        if reader is not None:
            with contextlib.suppress(Exception):
                await reader.stop()

    # -- promotion ----------------------------------------------------------------------------

    async def move_when_unlocked(
        self, compare: Callable[[str, str], int], retry_s: float = 1.0
    ) -> bool:
        """``move_into_place``, waiting while another process holds the active directory
        open (the task's old owner paused rather than dead, whose session ran out: it lets go
        once woken and fenced, or killed), tried again every ``retry_s``; logs
        ``standby_not_moved`` once meanwhile. The caller's stop cuts the wait short."""
        waiting = False
        while True:
            try:
                return self.move_into_place(compare)
            except StoreLockedError as exc:
                if not waiting:
                    log.warning(
                        "standby_not_moved",
                        task=self.task_name,
                        store=self.name,
                        error=str(exc),
                        retry_s=retry_s,
                        reason="another process (an old owner of the task, paused) holds the "
                        "store open: the copy moves in, and the task starts, once it lets go",
                    )
                    waiting = True
            await asyncio.sleep(retry_s)

    def move_into_place(self, compare: Callable[[str, str], int]) -> bool:
        """Put the (closed) copy where the active task opens its store, unless that one is
        at least as far along (both marked clean); whether it moved. StoreLockedError:
        another process holds the active directory open, and nothing moved."""
        mine = read_marker(self.directory)
        if mine is None:
            return False
        theirs = read_marker(self.active_directory)
        # A marker naming no changelog offset (the store had no changelog then) is no match.
        if theirs is not None and not is_local(theirs) and _at_least(compare, theirs, mine):
            return False
        if self.active_directory.exists():
            # Opened (and closed) first, which takes its lock: a process still holding the
            # store open there (the task's old owner, paused rather than dead, on a state
            # directory containers share) writes into the directory by name when it wakes,
            # and would ruin a copy moved in. StoreLockedError: both stay as they are. One
            # that does not open for another reason (corrupt) is replaced as any other.
            try:
                self._create(self.active_directory).close()
            except StoreLockedError:
                raise
            except StoreError:
                pass
        shutil.rmtree(self.active_directory, ignore_errors=True)
        self.directory.rename(self.active_directory)
        return True


def _went_back(admin: SystemAdmin, applied: str, checkpointed: str) -> bool:
    """Whether ``applied`` is past ``checkpointed``, or no offset at all."""
    try:
        return admin.compare_offsets(applied, checkpointed) > 0
    except ValueError:
        return True


def _at_least(compare: Callable[[str, str], int], theirs: str, mine: str) -> bool:
    """Whether the active store's marker ``theirs`` is at least ``mine`` (False when it is
    no offset: a damaged file is no match)."""
    try:
        return compare(theirs, mine) >= 0
    except ValueError:
        return False


__all__ = ["SUFFIX", "StandbyStore", "standby_directory"]
