"""Bringing a store without changelog to its checkpoint at start-up (``restore.py`` does the
logged ones).

Such a store's only copy is its local directory, and RocksDB keeps every write that reached
it, also those the write buffer wrote back before a commit (when it overflowed) and those
after the last checkpoint. So after a crash the local store may be ahead of the checkpoint,
whose messages are then processed again: counted twice, or found late by a window whose
stored watermark passed them. With store snapshots on (``snapshots.py``), each commit
snapshots the store too (position ``local.<n>``), the checkpoint names the snapshot, and the
restore (``restore_unlogged``):

- without a checkpoint: wipes the store, since nothing it holds is covered by one; so does a
  checkpoint naming the snapshot of a store never written (``EMPTY``, which ``samzapy
  checkpoint set --reset-stores`` writes);
- after a clean close (the clean marker) matching the checkpoint: keeps the local store, as it
  is exactly the checkpoint's state (its marker holds the snapshot the checkpoint named, or
  ``local`` with snapshots off);
- else replaces it with the snapshot the checkpoint names;
- when the checkpoint names none (snapshots off, a checkpoint written before they covered
  stores without changelog) or this host lacks it: keeps the local store as it is, and logs
  ``store_kept_past_checkpoint``, a warning: it may hold writes of messages after the
  checkpoint, which are processed again (or, never written on this host, it is empty).

An engine that keeps nothing across restarts (``inmemory``) starts empty anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from samzapy.api.errors import StoreError
from samzapy.api.system import TaskName
from samzapy.storage.restore import LocalStore
from samzapy.storage.snapshots import is_empty

log = structlog.get_logger("samzapy.stores")


def restore_unlogged(
    task_name: TaskName,
    name: str,
    store: LocalStore,
    *,
    checkpointed: bool,
    snapshot: str | None,
    keep_snapshots: bool,
    reopen: Callable[[str, LocalStore], None],
) -> None:
    """Bring ``store`` (without changelog, open) to its checkpoint, as the module says.
    ``checkpointed``: the task has a checkpoint, which names ``snapshot`` for the store (or
    None); ``keep_snapshots``: snapshots are on (else every snapshot of the store goes)."""
    engine = store.engine
    assert engine is not None and store.changelog is None
    if not engine.persistent:
        return
    started = time.monotonic()
    kept, opened, reason = False, None, None
    if not checkpointed or (snapshot is not None and is_empty(snapshot)):
        store.wipe(name, reopen)
        snapshot = None
    elif store.clean_offset is not None and snapshot in (None, store.clean_offset):
        kept = True
    elif snapshot is None:
        reason = "the checkpoint names no snapshot of the store (snapshots off, or written before)"
    else:
        path = store.snapshots.find(snapshot) if engine.snapshots else None
        if path is None:
            reason = f"the snapshot {snapshot} the checkpoint names is not on this host"
        else:
            try:
                store.open_snapshot(path)
                opened = snapshot
            except StoreError as exc:
                reason = f"the snapshot {snapshot} could not be restored: {exc}"
    if reason is not None:
        kept = True
        if engine.sequence() == 0:  # never written: the task's state is on another host
            consequence = "the store is empty: it starts without the checkpoint's state"
        else:
            consequence = (
                "the store is kept as it is and may not match the checkpoint: it may hold "
                "writes of messages after it, which are processed again, or lack what the "
                "task wrote on another host: counts may be off"
            )
        log.warning(
            "store_kept_past_checkpoint",
            task=task_name,
            store=name,
            snapshot=snapshot,
            reason=reason,
            consequence=consequence,
        )
    store.snapshots.keep_only(snapshot if keep_snapshots else None)
    # As restored, the store matches the checkpoint: a close with no write since marks it clean.
    assert store.engine is not None
    store.committed = store.engine.sequence()
    log.info(
        "store_restored",
        task=task_name,
        store=name,
        changelog=None,
        kept_local=kept,
        snapshot=opened,
        records=0,
        elapsed_s=round(time.monotonic() - started, 3),
    )


__all__ = ["restore_unlogged"]
