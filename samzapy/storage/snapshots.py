"""The snapshots of one task's instance of one store, beside its directory.

A store's directory ``<store>/<task>`` has its snapshots in ``<store>/<task>.snapshots/``,
one directory each, named by the snapshot's id: ``<position>-<tag>``, where the position is,
for a store with a changelog, the changelog offset the snapshot matches (the store held
exactly what the changelog held before it), and for a store without one ``local.<n>``, ``n``
the engine's write sequence number (RocksDB's latest sequence number: it grows with every
write, so an unchanged number means an unchanged store); and the tag is drawn once per
container run, so that snapshots taken by different runs of a task, on this host or another,
never share a name. ``snapshot_offset`` reads the changelog offset back (None for a store
without changelog). A checkpoint names the snapshot its commit took;
once it is written, every other snapshot of the store is removed (``keep_only``), so a store
keeps one snapshot, two for the moment between a commit's snapshot and its checkpoint.

A commit takes its snapshots without holding the event loop for long (``take``), since every
task of the container waits while the loop is held:

1. the engine writes what it holds in memory out to its files, in a thread (RocksDB lets go
   of the interpreter while it waits for the write; this is what takes time, growing with the
   writes since the last snapshot). The task's commit is a barrier: nothing writes to the store
   until the commit returns, so what is written out is what the changelog holds up to the
   noted offset;
2. on the loop, the snapshot itself: with nothing left in memory, RocksDB only links the table
   files and copies and syncs the few small files that describe them (a few ms whatever the
   store's size, more when the disk is busy). RocksDB's checkpoint holds the interpreter, so
   a thread would not spare the loop this step; it is also what makes the snapshot
   consistent, since RocksDB keeps its compactions from removing the files it links meanwhile.

The directories a snapshot replaces or that the checkpoint no longer names are removed in a
thread too (``discard``): the last link to a large table file frees its blocks.

A thread this module starts is always waited for, even by a cancelled commit: the store is
closed after a cancelled commit, and must not be closed under a flush still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from samzapy.storage.ports import StorageEngine

_T = TypeVar("_T")
_P = ParamSpec("_P")

SUFFIX = ".snapshots"
#: How the position of a snapshot of a store without changelog starts (``local.<n>``), and
#: what such a store's clean marker holds when it has no snapshot to name.
LOCAL = "local"
#: The snapshot a checkpoint names for a store without changelog that is to start empty
#: (``samzapy checkpoint set --reset-stores``): position ``local.0``, a store never written.
EMPTY = f"{LOCAL}.0-reset"


def is_local(position: str) -> bool:
    """Whether a snapshot id, its position or a clean marker is that of a store without a
    changelog, not a changelog offset."""
    return position.startswith(LOCAL)


def is_empty(snapshot_id: str) -> bool:
    """Whether ``snapshot_id`` is that of a store without changelog never written (``EMPTY``,
    or a snapshot taken before the first write): the store starts empty, files or not."""
    return snapshot_id.rpartition("-")[0] == f"{LOCAL}.0"


def snapshot_offset(snapshot_id: str) -> str | None:
    """The changelog offset a snapshot matches, from its id; None for the snapshot of a
    store without changelog (``local.<n>-<tag>``). ValueError: not a snapshot id."""
    offset, dash, tag = snapshot_id.rpartition("-")
    if not dash or not offset or not tag:
        raise ValueError(f"snapshot id {snapshot_id!r} is not '<changelog offset>-<tag>'")
    return None if is_local(offset) else offset


def _file_name(snapshot_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in snapshot_id)


class StoreSnapshots:
    """Takes, finds and removes the snapshots of one store directory."""

    def __init__(self, directory: Path) -> None:
        self.root = directory.with_name(directory.name + SUFFIX)
        self._tag = uuid.uuid4().hex[:8]
        #: The id of the snapshot taken last by this run, and the position it matches.
        self._last: tuple[str, str] | None = None
        #: Snapshots taken by this run of a store without changelog whose engine has no
        #: sequence number (each commit then takes a new one).
        self._count = 0

    @property
    def last(self) -> str | None:
        """The id of the snapshot this run took last (None: none yet)."""
        return None if self._last is None else self._last[0]

    def path(self, snapshot_id: str) -> Path:
        return self.root / _file_name(snapshot_id)

    async def take(self, engine: StorageEngine, offset: str | None) -> str:
        """A snapshot of ``engine``, which holds what its changelog held before ``offset``
        (None: a store without changelog) and is written to by no one until this returns; its
        id. No new snapshot when the last one matches the same position already. (The steps:
        the module's docstring.)"""
        if offset is None:
            sequence = engine.sequence()
            if sequence is None:  # unknown: a new snapshot at every commit
                self._count += 1
                sequence = self._count
            position = f"{LOCAL}.{sequence}"
        else:
            position = offset
        if self._last is not None and self._last[1] == position:
            return self._last[0]
        snapshot_id = f"{position}-{self._tag}"
        target = self.path(snapshot_id)
        # RocksDB refuses an existing target, and leaves '<target>.tmp' behind if it dies
        # half way; either can be left by a crashed run only.
        await in_thread(self._prepare, target)
        # 1. The engine's memory written out, off the loop.
        await in_thread(engine.flush)
        # 2. The snapshot, on the loop: links and small copies.
        engine.snapshot(target)
        self._last = (snapshot_id, position)
        return snapshot_id

    def _prepare(self, target: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for leftover in (target, target.with_name(target.name + ".tmp")):
            shutil.rmtree(leftover, ignore_errors=True)

    def find(self, snapshot_id: str) -> Path | None:
        """The directory of snapshot ``snapshot_id``, if this host has it."""
        path = self.path(snapshot_id)
        return path if path.is_dir() else None

    def keep_only(self, snapshot_id: str | None) -> None:
        """Remove every snapshot but ``snapshot_id`` (None: every one)."""
        if not self.root.is_dir():
            return
        keep = None if snapshot_id is None else self.path(snapshot_id).name
        for entry in self.root.iterdir():
            if entry.name != keep:
                shutil.rmtree(entry, ignore_errors=True)

    async def discard(self, snapshot_id: str) -> None:
        """``keep_only(snapshot_id)`` in a thread: what a commit calls once its checkpoint,
        which names ``snapshot_id``, is written."""
        await in_thread(self.keep_only, snapshot_id)


async def in_thread(fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``fn(*args, **kwargs)`` in a thread of the loop's default executor. A cancelled caller
    still waits for the thread to end, then raises the cancellation: the thread works on a
    store that the caller's cancellation goes on to close."""
    future = asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, **kwargs)
    )
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait((future,))
        if not future.cancelled():
            future.exception()  # retrieved: the cancellation is what the caller sees
        raise


__all__ = [
    "EMPTY",
    "LOCAL",
    "SUFFIX",
    "StoreSnapshots",
    "in_thread",
    "is_empty",
    "is_local",
    "snapshot_offset",
]
