"""The file system's producer: appends each message as one line to its partition file.

A message must be bytes (the container serializes with the stream's serde, ``json`` by
default) without a newline; keys are not stored. The first message to a stream that has no
partition files creates the directory and the files 0..partition, so the stream never has a
gap; a partition beyond an existing stream's count is an error. Files stay open and buffered.

A partition file whose last line has no newline (a writer stopped mid-line: killed with -9 in
the middle of a write-out, or a machine crash) gets its newline when this producer opens it, so
that line stays one line of its own and the next one is not joined to it; the cut line is left
as it is (a reader gets it as one bad message, as a batch reader already did), and its message
is written again in full when the job redoes its uncommitted input. Logged as
``partial_line_ended``.

When output is where:

1. a sent line reaches the file (the operating system's page cache, so ``tail -f`` and other
   readers see it) at most ``LINGER_S`` later, like a Kafka producer's linger: the first send
   after a write-out schedules the next one on the event loop;
2. ``flush`` (every commit) writes the buffers and fsyncs every file written since the last
   flush: only then does the output survive a machine crash (the fsyncs run in a worker
   thread so the event loop keeps going).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from samzapy.api.errors import SerdeError, StreamSystemError
from samzapy.api.system import SystemStream
from samzapy.system.file.layout import (
    create_partition_files,
    fsync_directory,
    partition_count,
    partition_path,
)
from samzapy.system.ports import SystemProducer

log = structlog.get_logger("samzapy.file")

_BUFFER_SIZE = 64 * 1024
#: The longest a sent line waits in the buffer before it is written to its file (not fsynced).
LINGER_S = 0.5


def _fsync_all(files: Iterable[tuple[int, Path]], directories: Iterable[Path]) -> None:
    for fd, path in files:
        try:
            os.fsync(fd)
        except OSError as exc:
            raise StreamSystemError(f"cannot fsync file system partition {path}: {exc}") from exc
    for directory in directories:
        try:
            fsync_directory(directory)
        except OSError as exc:
            raise StreamSystemError(f"cannot fsync directory {directory}: {exc}") from exc


def _cut_line(path: Path) -> int:
    """The length of the file's last line if it has no newline (0 if the file ends with one),
    counted over the file's last 64 KiB at most."""
    try:
        with open(path, "rb") as file:
            end = file.seek(0, os.SEEK_END)
            file.seek(max(0, end - _BUFFER_SIZE))
            tail = file.read()
    except OSError as exc:
        raise StreamSystemError(f"cannot read the end of {path}: {exc}") from exc
    if not tail or tail.endswith(b"\n"):
        return 0
    return len(tail) - tail.rfind(b"\n") - 1


class FileSystemProducer(SystemProducer):
    """Appends lines to partition files under one root directory."""

    def __init__(self, root: Path, linger_s: float = LINGER_S) -> None:
        self._root = root
        self._linger_s = linger_s
        self._linger: asyncio.TimerHandle | None = None
        self._written: set[tuple[str, int]] = set()  # sent since the last write-out
        self._files: dict[tuple[str, int], BinaryIO] = {}
        self._paths: dict[tuple[str, int], Path] = {}
        self._dirty: set[tuple[str, int]] = set()
        self._new_entries: set[Path] = set()  # directories to fsync at the next flush
        self._flushing = asyncio.Lock()

    def send(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
    ) -> None:
        target = (system_stream.stream, 0 if partition is None else partition)
        file = self._files.get(target)
        if file is None:
            file = self._open(*target)
        if type(message) is not bytes:
            message = self._as_bytes(system_stream, message)
        if b"\n" in message:
            raise SerdeError(
                f"cannot write to file system stream {system_stream}: a message must not "
                f"contain a newline (one message per line), got {message[:60]!r}"
            )
        try:
            file.write(message + b"\n")
        except (OSError, ValueError) as exc:
            raise StreamSystemError(
                f"cannot write to file system stream {system_stream} ({self._paths[target]}): {exc}"
            ) from exc
        self._dirty.add(target)
        self._written.add(target)
        if self._linger is None:
            self._schedule_write_out()

    def _schedule_write_out(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # sent outside an event loop: the next flush writes it
            return
        self._linger = loop.call_later(self._linger_s, self._write_out)

    def _write_out(self) -> None:
        """1. Hand the buffered lines to the OS, without fsync (a commit's flush does that)."""
        self._linger = None
        written, self._written = self._written, set()
        for target in written:
            file = self._files.get(target)
            if file is None:
                continue
            # A failure here is not lost: the commit's flush writes the same buffer again
            # and raises it.
            with contextlib.suppress(OSError, ValueError):
                file.flush()

    @staticmethod
    def _as_bytes(system_stream: SystemStream, message: Any) -> bytes:
        if isinstance(message, bytearray | memoryview):
            return bytes(message)
        raise SerdeError(
            f"cannot write to file system stream {system_stream}: messages must be bytes, "
            f"got {type(message).__name__}; configure a serde for the stream (the file "
            "system's default is json), or, with one set, make its to_bytes return bytes"
        )

    def _open(self, stream: str, partition: int) -> BinaryIO:
        if type(partition) is not int or partition < 0:
            raise StreamSystemError(
                f"cannot write to file system stream {stream!r}: partition must be an "
                f"int >= 0, got {partition!r}"
            )
        count = partition_count(self._root, stream)
        if count is None:
            self._new_entries.update(create_partition_files(self._root, stream, partition + 1))
        elif partition >= count:
            raise StreamSystemError(
                f"partition {partition} is out of range for file system stream {stream!r} "
                f"under {self._root}: it has partitions 0..{count - 1}"
            )
        path = partition_path(self._root, stream, partition)
        try:
            file: BinaryIO = open(path, "ab", buffering=_BUFFER_SIZE)  # noqa: SIM115 - kept open
        except OSError as exc:
            raise StreamSystemError(
                f"cannot open partition {partition} of file system stream {stream!r} "
                f"({path}) for appending: {exc}"
            ) from exc
        self._files[(stream, partition)] = file
        self._paths[(stream, partition)] = path
        cut = _cut_line(path)
        if cut:
            file.write(b"\n")
            self._dirty.add((stream, partition))
            log.warning(
                "partial_line_ended",
                stream=stream,
                partition=partition,
                path=str(path),
                partial_bytes=cut,
                detail="the file's last line had no newline (its writer stopped mid-line): "
                "ended it so the next line is not joined to it",
            )
        return file

    async def flush(self) -> None:
        # One flush at a time: a flush that finds nothing left to sync must still wait for the
        # one in progress, which may be carrying lines sent before it was called.
        async with self._flushing:
            await self._flush()

    async def _flush(self) -> None:
        # 2a. Move buffered lines into the OS (cheap, on the loop: send may run meanwhile).
        synced: list[tuple[int, Path]] = []
        for target in self._dirty:
            path = self._paths[target]
            file = self._files[target]
            try:
                file.flush()
            except OSError as exc:
                raise StreamSystemError(
                    f"cannot write file system partition {path}: {exc}"
                ) from exc
            synced.append((file.fileno(), path))
        self._dirty.clear()
        directories = list(self._new_entries)
        self._new_entries.clear()
        # 2b. Make them durable off the loop.
        if synced or directories:
            await asyncio.to_thread(_fsync_all, synced, directories)

    async def stop(self) -> None:
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        try:
            await self.flush()
        finally:
            for file in self._files.values():
                file.close()
            self._files.clear()
            self._paths.clear()


__all__ = ["FileSystemProducer"]
