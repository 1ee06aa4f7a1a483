"""The file system: its factory, its configuration and its admin.

Configuration (``systems.<name>.`` stripped):

- ``path`` (required): the root directory; stream ``s`` is ``<path>/s/<partition>.jsonl``.
- ``follow`` (default false): tail the files forever instead of ending at their last line.
- ``poll.interval.ms`` (default 200): how often a following consumer looks for new lines.

Messages are JSON lines by default (``json`` message serde); streams without a checkpoint
start at the first line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.system.file.consumer import FileSystemConsumer
from samzapy.system.file.layout import create_partition_files, partition_count
from samzapy.system.file.producer import FileSystemProducer
from samzapy.system.ports import (
    OffsetDefault,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)

DEFAULT_POLL_INTERVAL_MS = 200


class FileSystemAdmin(SystemAdmin):
    """Partition counts and stream creation under one root directory."""

    def __init__(self, root: Path) -> None:
        self._root = root

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for stream in streams:
            count = partition_count(self._root, stream)
            if count is not None:
                counts[stream] = count
        return counts

    async def create_stream(self, stream: str, partitions: int) -> None:
        # An existing stream is left as it is, whatever its count (as a Kafka admin does).
        if partition_count(self._root, stream) is None:
            create_partition_files(self._root, stream, partitions)


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
        return FileSystemAdmin(self.root)

    def get_consumer(self) -> SystemConsumer:
        return FileSystemConsumer(
            self.root, follow=self.follow, poll_interval=self.poll_interval_ms / 1000
        )

    def get_producer(self) -> SystemProducer:
        return FileSystemProducer(self.root)


__all__ = ["DEFAULT_POLL_INTERVAL_MS", "FileSystemAdmin", "FileSystemFactory"]
