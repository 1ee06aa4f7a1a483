"""A local directory's owner file: which job (``job.name``, ``job.id``) a directory is.

A job's local directories are named by ``job.name`` alone: the ``file`` checkpoints' default
``./state/<job.name>/checkpoints`` and the stores' ``<job.logged.store.base.dir>/<job.name>``
(its stores, their snapshots and its standby copies). Two jobs of one name and different ids
on one host would share them, and renaming them would lose every running job's checkpoints
and stores. So each directory says whose it is, as the checkpoint stream does
(``owner.py``), and a job refuses another's.

The owner file is ``<directory>/.samzapy-owner``, a JSON document ``{"job.id": ...,
"job.name": ..., "version": 1}``. Its name is never a task's checkpoint file (``*.json``, so
a reader that takes every ``*.json`` file for a task's sees no other) nor a store's
directory. The rule (``claim_directory``):

1. read the owner file: if there is one, the job it names owns the directory;
2. if there is none (a new directory, or one an older samzapy wrote: adopted with what it
   holds) and the caller claims, write the job's document to a temporary file in the
   directory, fsync it and link it to the owner file's name. A link never replaces a file,
   so of two processes claiming at once exactly one wins; the other reads the winner's file
   (step 1 again). Then fsync the directory, so that the claim survives a crash. On a file
   system without hard links, the owner file is created exclusively instead;
3. the owner must be the job (every container of it shares the directory), else
   ``JobCollisionError``, before anything in the directory is read or written.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import structlog

from samzapy.api.errors import CheckpointError, JobCollisionError, SamzapyError, StoreError
from samzapy.checkpoint.owner import OWNER_VERSION, JobIdentity, read_owner_document
from samzapy.system.file.layout import fsync_directory

log = structlog.get_logger("samzapy.checkpoint")

OWNER_FILE = ".samzapy-owner"
#: What ``os.link`` raises on a file system without hard links (FAT, some network ones).
_NO_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK})


@dataclass(frozen=True, slots=True)
class DirectoryKind:
    """What a claimed directory holds, for the messages: the key that places it, what it
    is, what sharing it would do, and the error of a damaged owner file."""

    key: str
    what: str
    holds: str
    shared: str
    error: type[SamzapyError]


CHECKPOINT_DIRECTORY = DirectoryKind(
    key="task.checkpoint.dir",
    what="checkpoint directory",
    holds="checkpoints",
    shared="would resume from that job's checkpoints and write over them",
    error=CheckpointError,
)
STORE_DIRECTORY = DirectoryKind(
    key="job.logged.store.base.dir",
    what="store directory",
    holds="stores",
    shared="would open that job's stores and write over them",
    error=StoreError,
)


def claim_directory(
    directory: Path, job: JobIdentity, kind: DirectoryKind, *, claim: bool = True
) -> JobIdentity | None:
    """The module docstring's rule for ``directory`` (created when ``claim``): its owner,
    the job itself; None when it has no owner file and ``claim`` is False (a reader that
    must not write, ``samzapy checkpoint show``). JobCollisionError: another job's."""
    owner = read_owner_file(directory, kind)
    if owner is None and claim:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            won = _link_owner_file(directory, job)
        except OSError as exc:
            raise kind.error(f"cannot claim {kind.what} {directory}: {exc}") from exc
        if won:
            log.info("directory_claimed", directory=str(directory), owner=str(job))
        owner = read_owner_file(directory, kind)
    if owner is not None and owner != job:
        raise JobCollisionError(
            f"{kind.key}: {kind.what} {directory} belongs to another job ({owner}), as its "
            f"owner file {OWNER_FILE} says; this job ({job}) {kind.shared}: set {kind.key} to "
            f"a directory of its own, or change job.name (the other job's {kind.holds} are "
            "untouched)"
        )
    return owner


def read_owner_file(directory: Path, kind: DirectoryKind) -> JobIdentity | None:
    """The job ``directory``'s owner file names; None when it has none. ``kind.error`` for a
    file that cannot be read or is not an owner document."""
    path = directory / OWNER_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise kind.error(f"cannot read owner file {path}: {exc}") from exc
    try:
        return read_owner_document(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise kind.error(
            f"corrupt owner file {path}: {exc}; it says which job the {kind.what} is: if it "
            "is this job's, remove the file and the job claims the directory again at its start"
        ) from exc


def owner_document(job: JobIdentity) -> bytes:
    """The owner file's content naming ``job``."""
    document = {"version": OWNER_VERSION, "job.name": job.name, "job.id": job.id}
    return json.dumps(document, sort_keys=True).encode()


def _link_owner_file(directory: Path, job: JobIdentity) -> bool:
    """Step 2: whether this process's owner file is the one in place (False: another
    process's was there first)."""
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f"{OWNER_FILE}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(owner_document(job))
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, directory / OWNER_FILE)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            return _create_owner_file(directory, job)  # a file system without hard links
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    fsync_directory(directory)
    return True


def _create_owner_file(directory: Path, job: JobIdentity) -> bool:
    """Step 2 where hard links are refused: created exclusively (one process wins as well),
    written and fsynced; a reader racing the write may see it short, and stops on a
    damaged owner file, where a link would have shown it whole."""
    try:
        fd = os.open(directory / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as file:
        file.write(owner_document(job))
        file.flush()
        os.fsync(file.fileno())
    return True


__all__ = [
    "CHECKPOINT_DIRECTORY",
    "OWNER_FILE",
    "STORE_DIRECTORY",
    "DirectoryKind",
    "claim_directory",
    "owner_document",
    "read_owner_file",
]
