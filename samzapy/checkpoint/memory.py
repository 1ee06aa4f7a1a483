"""The in-memory checkpoint manager: process-wide checkpoints per namespace, for tests.

Checkpoints outlive the manager (and the container) that wrote them, so a test can inspect
them afterwards with ``checkpoints_for`` and ``history_for``, and a second container of the
same namespace resumes from them. Each checkpoint is stored as the same JSON document the file
manager writes: the memory manager accepts and returns exactly what the file manager does,
and what it returns is a copy the writer cannot change afterwards.
"""

from __future__ import annotations

from typing import ClassVar

from samzapy.api.system import TaskName
from samzapy.checkpoint.codec import decode_checkpoint, encode_checkpoint
from samzapy.checkpoint.ports import Checkpoint, CheckpointManager


class InMemoryCheckpointManager(CheckpointManager):
    """Keeps the latest checkpoint of each task of a namespace in this process."""

    _latest: ClassVar[dict[str, dict[TaskName, bytes]]] = {}
    _history: ClassVar[dict[str, list[tuple[TaskName, bytes]]]] = {}

    def __init__(self, namespace: str = "default") -> None:
        self.namespace = namespace

    async def read_last(self, task_name: TaskName) -> Checkpoint | None:
        document = self._latest.get(self.namespace, {}).get(task_name)
        if document is None:
            return None
        return self._decode(self.namespace, document)[1]

    async def write(self, task_name: TaskName, checkpoint: Checkpoint) -> None:
        document = encode_checkpoint(task_name, checkpoint)
        self._latest.setdefault(self.namespace, {})[TaskName(task_name)] = document
        self._history.setdefault(self.namespace, []).append((TaskName(task_name), document))

    @classmethod
    def checkpoints_for(cls, namespace: str) -> dict[TaskName, Checkpoint]:
        """The latest checkpoint of every task written in ``namespace``."""
        return {
            task: cls._decode(namespace, document)[1]
            for task, document in cls._latest.get(namespace, {}).items()
        }

    @classmethod
    def history_for(cls, namespace: str) -> list[tuple[TaskName, Checkpoint]]:
        """Every checkpoint written in ``namespace``, oldest first, with its task."""
        return [cls._decode(namespace, document) for _, document in cls._history.get(namespace, [])]

    @classmethod
    def drop_namespace(cls, namespace: str) -> None:
        """Forget every checkpoint of ``namespace``."""
        cls._latest.pop(namespace, None)
        cls._history.pop(namespace, None)

    @staticmethod
    def _decode(namespace: str, document: bytes) -> tuple[TaskName, Checkpoint]:
        return decode_checkpoint(document, f"in memory namespace {namespace!r}")


__all__ = ["InMemoryCheckpointManager"]
