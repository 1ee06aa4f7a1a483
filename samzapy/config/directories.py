"""The directory names a job derives from its keys: each within what a file system takes.

A file system takes at most 255 bytes in one name (ext4, XFS, tmpfs, APFS). The job names:

1. ``<job.logged.store.base.dir>/<job.name>/<store>/<task>``, a directory per task store: with
   any store, ``job.name`` and each store's name (an application's window or table id, a
   join's ``<op_id>-L``) must fit;
2. the ``file`` checkpoint manager's ``task.checkpoint.dir``, by default
   ``./state/<job.name>/checkpoints``: each of its names must fit.

Without this check a name too long is found when the job starts, as an ``[Errno 36] File name
too long`` whose message for a store says to delete the directory, which does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any

#: The longest name of one directory or file, in bytes.
MAX_NAME_BYTES = 255

#: What a job started over under a new ``job.id`` (the remedies of a changed partition count,
#: of a checkpoint stream too small) also needs on the old job's host: the directories are
#: named by ``job.name`` alone, and their owner files refuse another ``job.id``
#: (``checkpoint/owner_file.py``).
OWN_DIRECTORIES = (
    "on the old job's host, also a job.logged.store.base.dir of its own when it keeps stores "
    "on disk, and a task.checkpoint.dir of its own with file checkpoints (the directories are "
    "named by job.name alone)"
)


def directory_problems(values: Mapping[str, Any], problem: Callable[[str, str], None]) -> None:
    """Report, through ``problem(key, message)``, each directory name of ``values`` (typed
    keys, before defaults) longer than a file system takes."""
    job_name = str(values.get("job.name") or "")
    stores = sorted(
        {k.split(".")[1] for k in values if k.startswith("stores.") and k.count(".") >= 2}
    )
    if stores and _too_long(job_name):
        problem(
            "job.name",
            f"job.name is {len(job_name.encode())} bytes long, and it names the directory of "
            "the job's stores (<job.logged.store.base.dir>/<job.name>/<store>/<task>), where a "
            f"file system takes at most {MAX_NAME_BYTES}: shorten job.name",
        )
    for store in stores:
        if _too_long(store):
            problem(
                f"stores.{store}.factory",
                f"store {store[:40]!r}... has a name of {len(store.encode())} bytes, and it "
                "names the store's directory (<job.logged.store.base.dir>/<job.name>/<store>), "
                f"where a file system takes at most {MAX_NAME_BYTES}: shorten it (for an "
                "application's window, join or table, its id)",
            )
    if values.get("task.checkpoint.factory") != "file":
        return
    directory = values.get("task.checkpoint.dir")
    key = "task.checkpoint.dir" if directory is not None else "job.name"
    path = str(directory) if directory is not None else f"./state/{job_name}/checkpoints"
    if any(_too_long(part) for part in PurePath(path).parts):
        problem(
            key,
            f"{key}: the file checkpoints' directory {path!r} has a name longer than the "
            f"{MAX_NAME_BYTES} bytes a file system takes: shorten "
            + ("it" if directory is not None else "job.name, or set task.checkpoint.dir"),
        )


def _too_long(name: str) -> bool:
    return len(name.encode()) > MAX_NAME_BYTES


__all__ = ["OWN_DIRECTORIES", "MAX_NAME_BYTES", "directory_problems"]
