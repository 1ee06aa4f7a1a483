"""The file system: its factory, its configuration and its admin.

Configuration (``systems.<name>.`` stripped):

- ``path`` (required): the root directory; stream ``s`` is ``<path>/s/<partition>.jsonl``.
- ``follow`` (default false): tail the files forever instead of ending at their last line.
- ``poll.interval.ms`` (default 200): how often a following consumer looks for new lines.

Messages are JSON lines by default (``json`` message serde); streams without a checkpoint
start at the first line. The admin numbers lines as the consumer does: every line has an
offset, and a last line without its newline counts only in bounded mode (a following
consumer waits for the newline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from samzapy.api.errors import ConfigError, StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.file.consumer import CHUNK_SIZE, FileSystemConsumer
from samzapy.system.file.layout import create_partition_files, partition_count, partition_path
from samzapy.system.file.producer import FileSystemProducer
from samzapy.system.ports import (
    OffsetBounds,
    OffsetDefault,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)

DEFAULT_POLL_INTERVAL_MS = 200


def _line_count(ssp: SystemStreamPartition, path: Path, *, follow: bool) -> int:
    """How many lines the consumer numbers in ``path`` now: the offset of the next one."""
    newlines = 0
    last = b"\n"
    try:
        with open(path, "rb", buffering=0) as file:
            while data := file.read(CHUNK_SIZE):
                newlines += data.count(b"\n")
                last = data[-1:]
    except FileNotFoundError:
        raise StreamSystemError(
            f"cannot read the offsets of {ssp}: partition file {path} does not exist"
        ) from None
    except OSError as exc:
        raise StreamSystemError(f"cannot read the offsets of {ssp} from {path}: {exc}") from exc
    if last != b"\n" and not follow:
        return newlines + 1  # an unterminated last line is a line in bounded mode
    return newlines


def _bounds(
    root: Path, ssps: list[SystemStreamPartition], follow: bool
) -> dict[SystemStreamPartition, OffsetBounds]:
    bounds: dict[SystemStreamPartition, OffsetBounds] = {}
    for ssp in ssps:
        path = partition_path(root, ssp.stream, ssp.partition)
        count = _line_count(ssp, path, follow=follow)
        bounds[ssp] = OffsetBounds("0" if count else None, str(count))
    return bounds


class FileSystemAdmin(SystemAdmin):
    """Partition counts, offsets and stream creation under one root directory."""

    def __init__(self, root: Path, *, follow: bool = False) -> None:
        self._root = root
        self._follow = follow

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for stream in streams:
            count = partition_count(self._root, stream)
            if count is not None:
                counts[stream] = count
        return counts

    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        # An existing stream is left as it is, whatever its count (as a Kafka admin does).
        # Files have no replicas and no topic configuration: both are ignored.
        if partition_count(self._root, stream) is None:
            create_partition_files(self._root, stream, partitions)

    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        # Counting lines reads whole files: off the event loop.
        return await asyncio.to_thread(_bounds, self._root, list(ssps), self._follow)


def _bool(system_name: str, config: Mapping[str, Any], name: str, default: bool) -> bool:
    value = config.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    key = f"systems.{system_name}.{name}"
    raise ConfigError(f"{key} must be true or false, got {value!r}", key=key)


def _positive_ms(system_name: str, config: Mapping[str, Any], name: str, default: int) -> int:
    value = config.get(name, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        key = f"systems.{system_name}.{name}"
        raise ConfigError(f"{key} must be an integer number of ms >= 1, got {value!r}", key=key)
    return value


class FileSystemFactory(SystemFactory):
    """Builds the file system's parts over the root directory ``path``."""

    default_msg_serde = "json"
    default_key_serde = "none"
    default_offset = OffsetDefault.OLDEST

    def __init__(self, system_name: str, config: Mapping[str, Any]) -> None:
        super().__init__(system_name, config)
        path = config.get("path")
        if not isinstance(path, str | Path) or not str(path):
            key = f"systems.{system_name}.path"
            raise ConfigError(
                f"{key} must be set to the root directory of the file system's streams, "
                f"got {path!r}",
                key=key,
            )
        self.root = Path(path)
        self.follow = _bool(system_name, config, "follow", False)
        self.poll_interval_ms = _positive_ms(
            system_name, config, "poll.interval.ms", DEFAULT_POLL_INTERVAL_MS
        )

    def get_admin(self) -> SystemAdmin:
        return FileSystemAdmin(self.root, follow=self.follow)

    def get_consumer(self) -> SystemConsumer:
        return FileSystemConsumer(
            self.root, follow=self.follow, poll_interval=self.poll_interval_ms / 1000
        )

    def get_producer(self) -> SystemProducer:
        return FileSystemProducer(self.root)


__all__ = ["DEFAULT_POLL_INTERVAL_MS", "FileSystemAdmin", "FileSystemFactory"]
