"""The file system's consumer: reads partition files line by line.

A message is one line's bytes without its newline; key and timestamp are None. Every line,
empty ones included, has an offset (its line number from 0, as a string), but empty lines
are not delivered: they only advance the offset.

Bounded mode (the default) reads each file to its end as found while reading, then returns
one end-of-stream envelope; a final line without a newline counts as a line. Follow mode
(``follow: true``) tails the files and never ends: only complete lines are returned, a
partial last line waits for its newline, and a file that does not exist yet is read once it
appears. Truncated or replaced files are not detected.

Files are read in binary chunks, so starting at line N of a big file counts newlines rather
than splitting lines, and a poll reads only as many chunks as it needs for ``max_messages``
lines per partition. The reads are blocking: fine for local files.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.file.layout import partition_path
from samzapy.system.offsets import integer_offset
from samzapy.system.ports import OffsetDefault, SystemConsumer

CHUNK_SIZE = 256 * 1024
#: How offsets of the file system are named in errors.
_OFFSETS = "file offsets are line numbers"


class _PartitionReader:
    """Reads one partition file from a line offset, a chunk at a time."""

    __slots__ = (
        "eos_sent",
        "exhausted",
        "file",
        "first",
        "follow",
        "index",
        "lines",
        "next_offset",
        "path",
        "skip",
        "ssp",
        "tail",
    )

    def __init__(self, ssp: SystemStreamPartition, path: Path, follow: bool, skip: int) -> None:
        self.ssp = ssp
        self.path = path
        self.follow = follow
        self.file: io.FileIO | None = None
        self.lines: list[bytes] = []  # complete lines of the last chunk
        self.index = 0  # next line of ``lines`` to deliver
        self.next_offset = 0  # offset of lines[index], or of the next line to read
        self.skip = skip  # lines still to pass over before the first one delivered
        self.tail: list[bytes] = []  # pieces of a line whose newline has not been read yet
        self.exhausted = False  # bounded mode: the end of the file was reached
        self.eos_sent = False
        self.first = skip  # the offset the reader started at (for the lag before any)

    def open(self) -> bool:
        """Open the file; in follow mode a missing file is not an error (yet)."""
        try:
            self.file = io.FileIO(self.path, "r")
        except FileNotFoundError:
            if self.follow:
                return False
            raise StreamSystemError(
                f"cannot read {self.ssp}: partition file {self.path} does not exist"
            ) from None
        except OSError as exc:
            raise StreamSystemError(f"cannot read {self.ssp} from {self.path}: {exc}") from exc
        return True

    def skip_to_end(self) -> None:
        """Start after the file's current last line (the "upcoming" position)."""
        if self.file is None and not self.open():
            return
        assert self.file is not None
        read = self.file.read
        count = 0
        tail = self.tail
        while data := read(CHUNK_SIZE):
            cut = data.rfind(b"\n")
            if cut < 0:
                tail.append(data)
                continue
            count += data.count(b"\n")
            tail.clear()
            if cut + 1 < len(data):
                tail.append(data[cut + 1 :])
        if tail and not self.follow:
            count += 1  # a final unterminated line is a line in bounded mode
            tail.clear()
        self.next_offset = count
        self.skip = 0

    def take(self, max_messages: int) -> list[IncomingMessageEnvelope]:
        """Up to ``max_messages`` envelopes, end-of-stream included when it is reached."""
        out: list[IncomingMessageEnvelope] = []
        ssp = self.ssp
        envelope = IncomingMessageEnvelope
        while True:
            need = max_messages - len(out)
            if need <= 0:
                return out
            lines = self.lines
            start = self.index
            if start < len(lines):
                end = min(len(lines), start + need)
                base = self.next_offset - start  # the offset of lines[0]
                out.extend(
                    [
                        envelope(ssp, str(base + i), None, line, None, len(line))
                        for i, line in enumerate(lines[start:end], start)
                        if line
                    ]
                )
                self.index = end
                self.next_offset = base + end
                continue
            if not self._read():
                break
        if self.exhausted and not self.follow:
            out.append(envelope.end_of_stream(ssp))
            self.eos_sent = True
        return out

    def _read(self) -> bool:
        """Read one chunk into ``lines``; False when there is nothing more to read now."""
        if self.file is None:
            if self.exhausted or not self.open():
                return False
            assert self.file is not None
        try:
            data = self.file.read(CHUNK_SIZE)
        except OSError as exc:
            raise StreamSystemError(f"cannot read {self.ssp} from {self.path}: {exc}") from exc
        tail = self.tail
        if not data:
            if self.follow:
                return False
            if not tail:
                self.exhausted = True
                return False
            last = b"".join(tail)
            tail.clear()
            self._set_lines([last])
            return True
        if tail:
            tail.append(data)
            data = b"".join(tail)
            tail.clear()
        if self.skip:
            newlines = data.count(b"\n")
            if newlines <= self.skip:
                # Every complete line of the chunk is skipped: count them, keep the rest.
                self.skip -= newlines
                self.next_offset += newlines
                cut = data.rfind(b"\n") + 1
                if cut < len(data):
                    tail.append(data[cut:])
                return True
        cut = data.rfind(b"\n")
        if cut < 0:
            tail.append(data)
            return True
        if cut + 1 < len(data):
            tail.append(data[cut + 1 :])
        self._set_lines(data[:cut].split(b"\n"))
        return True

    def _set_lines(self, lines: list[bytes]) -> None:
        skipped = min(self.skip, len(lines))
        self.lines = lines
        self.index = skipped
        self.skip -= skipped
        self.next_offset += skipped

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


class FileSystemConsumer(SystemConsumer):
    """Reads registered partitions of streams under one root directory."""

    def __init__(self, root: Path, *, follow: bool = False, poll_interval: float = 0.2) -> None:
        self._root = root
        self._follow = follow
        self._poll_interval = poll_interval
        self._requested: dict[SystemStreamPartition, tuple[str | None, str]] = {}
        self._readers: dict[SystemStreamPartition, _PartitionReader] = {}
        self._started = False

    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        if self._started:
            raise StreamSystemError(f"cannot register {ssp}: the file consumer has already started")
        if offset is not None:
            integer_offset(ssp, offset, _OFFSETS)
        elif default not in (OffsetDefault.OLDEST, OffsetDefault.UPCOMING):
            raise StreamSystemError(
                f"cannot register {ssp}: default offset must be 'oldest' or 'upcoming', "
                f"got {default!r}"
            )
        self._requested[ssp] = (offset, default)

    async def start(self) -> None:
        # "upcoming" means after the last line when the consumer starts.
        try:
            for ssp, (offset, default) in self._requested.items():
                path = partition_path(self._root, ssp.stream, ssp.partition)
                skip = 0 if offset is None else integer_offset(ssp, offset, _OFFSETS)
                reader = _PartitionReader(ssp, path, self._follow, skip)
                self._readers[ssp] = reader
                if offset is None and default == OffsetDefault.UPCOMING:
                    reader.skip_to_end()
                else:
                    reader.open()
                reader.first = reader.next_offset + reader.skip
        except BaseException:
            self._close_all()
            raise
        self._started = True

    async def stop(self) -> None:
        self._close_all()

    def high_watermark(self, ssp: SystemStreamPartition) -> int | None:
        """The offset after the last line read from the file so far (it is read a chunk at
        a time as the job takes its lines: the lag counts what the job has taken and not
        processed, and the rest of the chunk, not the lines of the file beyond it)."""
        reader = self._readers.get(ssp)
        if reader is None:
            return None
        return reader.next_offset - reader.index + len(reader.lines)

    async def position(self, ssp: SystemStreamPartition) -> str | None:
        """The offset of the next line to deliver: past the empty lines read, which are never
        delivered, so that a reader waiting for an offset (a bootstrap head) sees them passed."""
        offset = self.fetch_offset(ssp)
        return None if offset is None else str(offset)

    def start_offset(self, ssp: SystemStreamPartition) -> int | None:
        reader = self._readers.get(ssp)
        return None if reader is None else reader.first

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        """``position``'s offset: past the empty lines read (the lag leaves them out)."""
        reader = self._readers.get(ssp)
        return None if reader is None else reader.next_offset + reader.skip

    def _close_all(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()

    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - the port's signature
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        if max_messages < 1:
            raise StreamSystemError(f"poll needs max_messages >= 1, got {max_messages}")
        result = self._collect(ssps, max_messages)
        if result or timeout <= 0:
            return result
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return result
            await asyncio.sleep(min(self._poll_interval, remaining))
            result = self._collect(ssps, max_messages)
            if result:
                return result

    def _collect(
        self, ssps: Sequence[SystemStreamPartition], max_messages: int
    ) -> dict[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        result: dict[SystemStreamPartition, list[IncomingMessageEnvelope]] = {}
        readers = self._readers
        for ssp in ssps:
            try:
                reader = readers[ssp]
            except KeyError:
                raise StreamSystemError(
                    f"cannot poll {ssp}: it was not registered with the file consumer before start"
                ) from None
            if reader.eos_sent:
                continue
            batch = reader.take(max_messages)
            if batch:
                result[ssp] = batch
        return result


__all__ = ["CHUNK_SIZE", "FileSystemConsumer"]
