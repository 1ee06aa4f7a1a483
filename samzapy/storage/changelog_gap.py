"""A changelog that no longer holds what a store's restore needs, and what the restore says.

A logged store's state as of a checkpoint is its changelog replayed up to the checkpointed
offset (``restore.py``). Two changes under a job take that state away for good:

- the changelog was *made again* (deleted and created; a ``memory`` stream in a new process):
  its end is before the checkpointed offset (``made_again``);
- the changelog was *truncated* (retention or kafka-delete-records, on a changelog that is not
  compact-only): its oldest offset is past the first record the restore needs, the one after
  the local copy it keeps, or the partition's first (``lacks``, ``truncated``).

Either way the restore rebuilds the store from what the changelog holds, the state a restore
on any other host gives too, and logs a warning naming the store, the task and the offsets;
the task goes on (deploy.md, "When a changelog no longer holds a store's state").
"""

from __future__ import annotations

import structlog

from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.system.ports import OffsetBounds, SystemAdmin

log = structlog.get_logger("samzapy.stores")

#: The offset of a partition's first record, on every system (a partition whose oldest offset
#: is past it lost records).
FIRST_OFFSET = "0"


def ends_before(admin: SystemAdmin, checkpointed: str | None, upcoming: str | None) -> bool:
    """Whether the changelog, whose next record gets ``upcoming`` (None: not read yet), ends
    before the ``checkpointed`` offset: it was made again."""
    return (
        checkpointed is not None
        and upcoming is not None
        and admin.compare_offsets(checkpointed, upcoming) > 0
    )


def oldest_held(bounds: OffsetBounds) -> str:
    """The first offset the changelog still holds (its next one when it holds nothing)."""
    return bounds.oldest if bounds.oldest is not None else bounds.upcoming


def lacks(admin: SystemAdmin, needed: str, held: str, checkpointed: str) -> bool:
    """Whether a restore that needs the changelog from ``needed`` up to ``checkpointed``
    finds records gone, the changelog holding only from ``held`` on (False for offsets the
    system cannot compare)."""
    try:
        compare = admin.compare_offsets
        return compare(needed, held) < 0 and compare(needed, checkpointed) < 0
    except ValueError:
        return False


def made_again(
    task: TaskName,
    store: str,
    changelog: SystemStreamPartition,
    checkpointed: str,
    upcoming: str,
    local_offset: str | None,
    snapshot: str | None,
    *,
    consequence: str | None = None,
) -> None:
    """The changelog ends before the checkpointed offset; ``local_offset`` and ``snapshot``:
    the local copy the restore did not keep, since it no longer matches the changelog."""
    dropped = local_offset is not None or snapshot is not None
    if consequence is None:
        consequence = "the store is wiped and restored from what the changelog holds" + (
            ", not from its local copy, which no longer matches it" if dropped else ""
        )
    log.warning(
        "changelog_behind_checkpoint",
        task=task,
        store=store,
        changelog=str(changelog),
        checkpointed=checkpointed,
        upcoming=upcoming,
        local_offset=local_offset,
        snapshot=snapshot,
        reason="the changelog was made again (deleted and created, or a memory stream in a "
        "new process): the store's state as of its checkpoint is not in it",
        consequence=consequence
        + "; keep changelogs on a durable system (kafka) and never delete one under a job",
    )


def truncated(
    task: TaskName,
    store: str,
    changelog: SystemStreamPartition,
    needed: str,
    held: str,
    checkpointed: str,
    local: str | None,
) -> None:
    """The changelog's records from ``needed`` to ``held`` are gone; ``local``: the local
    copy wiped for it (``kept``, ``snapshot``, a ``standby``'s), None when there was none."""
    log.warning(
        "changelog_truncated",
        task=task,
        store=store,
        changelog=str(changelog),
        needed_from=needed,
        oldest=held,
        checkpointed=checkpointed,
        local=local,
        reason=f"the changelog's records from offset {needed} to {held} were deleted "
        "(retention or kafka-delete-records on a changelog that is not compact-only)",
        consequence="the store's state as of its checkpoint cannot be restored: it lacks what "
        "those records held (keys last written in them, and their deletes); "
        + ("its local copy is wiped, and " if local else "")
        + "it is restored from what the changelog holds, and the task goes on",
    )


__all__ = ["FIRST_OFFSET", "ends_before", "lacks", "made_again", "oldest_held", "truncated"]
