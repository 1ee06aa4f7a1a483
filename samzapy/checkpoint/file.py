"""The file checkpoint manager: one JSON document per task in a directory, written atomically.

A task's file is its name made file-safe and reversible (space becomes ``_``; ``_``, ``%``
and any other character outside ``A-Z a-z 0-9 . -`` become ``%XX`` UTF-8 escapes; a leading
``.`` too), so ``Partition 0`` is ``Partition_0.json``. The document is::

    {"version": 1, "task": "Partition 0",
     "offsets": [{"system": "kafka", "stream": "in", "partition": 0, "offset": "42"}],
     "extra": {"partition_counts": {"kafka.in": 8}}}

Writing one (each step keeps the previous checkpoint intact if the process dies):

0. refuse to write over a checkpoint of a higher epoch (a newer owner's: readers of the
   other managers keep the highest one, and this one must not undo it either);
1. write the document to a temporary file in the same directory, flush and fsync it;
2. ``os.replace`` it over the task's file;
3. fsync the directory so the rename itself is durable.

The steps run in a worker thread so the event loop is not stalled by fsync. The document is
``samzapy.checkpoint.codec``'s, shared with the memory and stream managers, so all of them
accept and return exactly the same things.

Given the job's identity, ``start`` claims the directory by its owner file (``owner_file.py``):
a directory another job claimed (the same ``job.name``, another ``job.id``, in the default
``./state/<job.name>/checkpoints``) raises ``JobCollisionError`` before any checkpoint is read
or written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import string
import tempfile
from pathlib import Path
from urllib.parse import unquote

from samzapy.api.errors import CheckpointError
from samzapy.api.system import TaskName
from samzapy.checkpoint.codec import decode_checkpoint, encode_checkpoint
from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.owner_file import CHECKPOINT_DIRECTORY, claim_directory
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager

_SAFE_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-.")


def task_file_name(task_name: str) -> str:
    """The file name of a task's checkpoint (reversible, see ``task_name_from_file``)."""
    if not task_name:
        raise CheckpointError("cannot store the checkpoint of a task with an empty name")
    parts: list[str] = []
    for position, char in enumerate(task_name):
        if char == " ":
            parts.append("_")
        elif char in _SAFE_CHARACTERS and not (position == 0 and char == "."):
            parts.append(char)
        else:
            parts.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
    return "".join(parts) + ".json"


def task_name_from_file(file_name: str) -> TaskName:
    """The task name a checkpoint file name stands for."""
    stem = file_name.removesuffix(".json")
    return TaskName(unquote(stem.replace("_", " "), errors="strict"))


def _fsync_directory(directory: Path) -> None:
    if os.name == "nt":  # Windows cannot open a directory; NTFS journals its metadata
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    directory = path.parent
    try:
        # 1. Temporary file in the same directory (a dot name: never a task's file).
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            # 2. Atomic replacement of the previous checkpoint.
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        # 3. The rename is durable once the directory is.
        _fsync_directory(directory)
    except OSError as exc:
        raise CheckpointError(f"cannot write checkpoint {path}: {exc}") from exc


def _remedy(path: Path) -> str:
    """What the operator can do about a checkpoint file that cannot be read."""
    return (
        f"restarting fails the same way until it is fixed: restore {path.name} from a backup, "
        f"or move it out of {path.parent} to start the task over (its inputs at their offset "
        "defaults, samza.offset.default; its logged stores empty)"
    )


class FileCheckpointManager(CheckpointManager):
    """Keeps each task's latest checkpoint in ``<directory>/<task file name>``."""

    def __init__(
        self, directory: str | Path, *, owner: JobIdentity | None = None, claim_owner: bool = True
    ) -> None:
        """``owner``: the job's identity, checked against the directory's owner file (None:
        not checked); ``claim_owner``: write one when the directory has none (``start``)."""
        self.directory = Path(directory)
        self.owner = owner
        self.claim_owner = claim_owner
        self._locks: dict[TaskName, asyncio.Lock] = {}

    def path_for(self, task_name: TaskName) -> Path:
        """The file holding ``task_name``'s checkpoint."""
        return self.directory / task_file_name(task_name)

    def has_directory(self) -> bool:
        """Whether the directory is there yet (``start`` makes it); CheckpointError when
        something else is in its place, which ``start`` could not replace either."""
        if self.directory.is_dir():
            return True
        if self.directory.exists():
            raise CheckpointError(
                f"checkpoint directory {self.directory} is not a directory: move it away or "
                "set task.checkpoint.dir to a directory"
            )
        return False

    async def start(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CheckpointError(
                f"cannot create checkpoint directory {self.directory}: {exc}"
            ) from exc
        if self.owner is not None:
            claim = self.claim_owner
            claim_directory(self.directory, self.owner, CHECKPOINT_DIRECTORY, claim=claim)

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        path = self.path_for(task_name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from exc
        try:
            stored_task, checkpoint = decode_checkpoint(data, str(path))
        except CheckpointError as exc:
            raise CheckpointError(f"{exc}; {_remedy(path)}") from exc
        if stored_task != task_name:
            raise CheckpointError(
                f"corrupt checkpoint {path}: it holds task {stored_task!r}, "
                f"expected {str(task_name)!r}; {_remedy(path)}"
            )
        return checkpoint

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        data = encode_checkpoint(task_name, checkpoint)
        path = self.path_for(task_name)
        # One write per task at a time, so the last write is the one left on disk.
        lock = self._locks.get(task_name)
        if lock is None:
            lock = self._locks[task_name] = asyncio.Lock()
        async with lock:
            await asyncio.to_thread(self._write_over, task_name, path, data, checkpoint.epoch)

    def _write_over(self, task_name: TaskName, path: Path, data: bytes, epoch: int | None) -> None:
        """Write, unless the file holds a checkpoint of a higher epoch: a newer owner's (a
        ``samzapy checkpoint set`` while the job ran, or another container running the
        task), which this one must not undo, as readers of the other managers keep the
        highest epoch."""
        if epoch is not None:
            try:
                _, stored = decode_checkpoint(path.read_bytes(), str(path))
            except (OSError, CheckpointError):
                stored = None  # none, or unreadable: read_last says so at the next start
            if stored is not None and stored.epoch is not None and stored.epoch > epoch:
                raise CheckpointError(
                    f"checkpoint {path} of task {str(task_name)!r} was written under epoch "
                    f"{stored.epoch}, after this container took the task under epoch {epoch}: "
                    "a samzapy checkpoint set while the job ran, or another container running "
                    "the task; this container stops without overwriting it (stop a job "
                    "before moving its checkpoints)"
                )
        _write_atomically(path, data)


__all__ = ["FileCheckpointManager", "task_file_name", "task_name_from_file"]
