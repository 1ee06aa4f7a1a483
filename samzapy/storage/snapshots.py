"""The snapshots of one task's instance of one logged store, beside its directory.

A store's directory ``<store>/<task>`` has its snapshots in ``<store>/<task>.snapshots/``,
one directory each, named by the snapshot's id: ``<changelog offset>-<tag>``, the changelog
offset the snapshot matches (the store held exactly what the changelog held before it) and a
tag drawn once per container run, so that snapshots taken by different runs of a task, on
this host or another, never share a name. A checkpoint names the snapshot its commit took;
once it is written, every other snapshot of the store is removed (``keep_only``), so a store
keeps one snapshot, two for the moment between a commit's snapshot and its checkpoint.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from samzapy.storage.ports import StorageEngine

SUFFIX = ".snapshots"


def snapshot_offset(snapshot_id: str) -> str:
    """The changelog offset a snapshot matches, from its id."""
    offset, dash, tag = snapshot_id.rpartition("-")
    if not dash or not offset or not tag:
        raise ValueError(f"snapshot id {snapshot_id!r} is not '<changelog offset>-<tag>'")
    return offset


def _file_name(snapshot_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in snapshot_id)


class StoreSnapshots:
    """Takes, finds and removes the snapshots of one store directory."""

    def __init__(self, directory: Path) -> None:
        self.root = directory.with_name(directory.name + SUFFIX)
        self._tag = uuid.uuid4().hex[:8]
        #: The id of the snapshot taken last by this run, and the offset it matches.
        self._last: tuple[str, str] | None = None

    def path(self, snapshot_id: str) -> Path:
        return self.root / _file_name(snapshot_id)

    def take(self, engine: StorageEngine, offset: str) -> str:
        """A snapshot of ``engine``, which holds what its changelog held before ``offset``;
        its id. No new snapshot when the last one matches the same offset already."""
        if self._last is not None and self._last[1] == offset:
            return self._last[0]
        snapshot_id = f"{offset}-{self._tag}"
        target = self.path(snapshot_id)
        self.root.mkdir(parents=True, exist_ok=True)
        # RocksDB refuses an existing target, and leaves '<target>.tmp' behind if it dies
        # half way; either can be left by a crashed run only.
        for leftover in (target, target.with_name(target.name + ".tmp")):
            shutil.rmtree(leftover, ignore_errors=True)
        engine.snapshot(target)
        self._last = (snapshot_id, offset)
        return snapshot_id

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


__all__ = ["SUFFIX", "StoreSnapshots", "snapshot_offset"]
