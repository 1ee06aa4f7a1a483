"""The job's store directory ``<job.logged.store.base.dir>/<job.name>``, claimed before use.

Every local store of the job lives under it: a task's store in ``<store>/<task>``, its
snapshots in ``<store>/<task>.snapshots``, a standby's copy beside it. It is named by
``job.name`` alone, so a job claims it by its owner file (``checkpoint/owner_file.py``)
before its containers or standbys open a store there, and refuses another job's
(``JobCollisionError``). A job whose stores keep nothing on disk (``inmemory``) neither
creates nor claims it.

Containers may share it (one volume under ``docker compose --scale``): its id
(``store_directory_id``), a random one the first container writes to
``.samzapy-directory-id``, is the same for every container that shares it and differs
between directories, which the group's leader compares (standby replicas are of no use on a
shared one: ``system/kafka/group_members.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from pathlib import Path

from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.owner_file import STORE_DIRECTORY, claim_directory
from samzapy.config import ResolvedConfig
from samzapy.storage.registry import store_factory_for


def job_store_directory(config: ResolvedConfig) -> Path:
    """``<job.logged.store.base.dir>/<job.name>``: where the job's stores live."""
    return Path(config.job.logged_store_base_dir) / config.job.name


def claim_store_directory(config: ResolvedConfig) -> str | None:
    """Claim the job's store directory when a store of the job keeps its entries on disk
    (created if missing); JobCollisionError when it is another job's. Its id
    (``store_directory_id``), None when it has none or the job keeps nothing on disk."""
    stores = config.stores.values()
    if not any(store_factory_for(store.name, store.factory).persistent for store in stores):
        return None
    job = JobIdentity(config.job.name, config.job.id)
    claim_directory(job_store_directory(config), job, STORE_DIRECTORY)
    return store_directory_id(job_store_directory(config))


DIRECTORY_ID_FILE = ".samzapy-directory-id"


def store_directory_id(directory: Path) -> str | None:
    """The id of the claimed store ``directory``, written by the first container to ask:
    linked into place whole (of containers asking at once, one wins and all read its id).
    None when it cannot be read, or written (a file system without hard links)."""
    path = directory / DIRECTORY_ID_FILE
    if not path.exists():
        with contextlib.suppress(OSError):  # FileExistsError: another container's was first
            fd, temporary = tempfile.mkstemp(dir=directory, prefix=f"{DIRECTORY_ID_FILE}.")
            try:
                with os.fdopen(fd, "w") as file:
                    file.write(uuid.uuid4().hex)
                os.link(temporary, path)
            finally:
                os.unlink(temporary)
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


__all__ = [
    "DIRECTORY_ID_FILE",
    "claim_store_directory",
    "job_store_directory",
    "store_directory_id",
]
