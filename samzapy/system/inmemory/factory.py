"""The in-memory system: its factory, and the admin and producer over an InMemoryBroker.

A partition's offsets are its list indexes: the oldest is "0" once it holds a record (nothing
is ever removed) and the upcoming one is its record count.

Configuration (``systems.<name>.`` stripped): ``namespace`` picks the broker namespace and
defaults to the system's name, so two systems (or a job and its test) share streams by
naming the same namespace. Messages are objects: the default serdes are ``none`` and streams
without a checkpoint start at the oldest record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.inmemory.broker import InMemoryBroker
from samzapy.system.inmemory.consumer import InMemorySystemConsumer
from samzapy.system.ports import (
    OffsetBounds,
    OffsetDefault,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)


class InMemorySystemAdmin(SystemAdmin):
    """Partition counts and stream creation on a broker namespace."""

    def __init__(self, broker: InMemoryBroker) -> None:
        self._broker = broker

    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for stream in streams:
            count = self._broker.partition_count(stream)
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
        # Like a Kafka admin, an existing stream is left as it is, whatever its count.
        # Replication and topic configuration mean nothing in memory.
        if self._broker.partition_count(stream) is None:
            self._broker.create_stream(stream, partitions)

    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        bounds: dict[SystemStreamPartition, OffsetBounds] = {}
        for ssp in ssps:
            count = len(self._broker.partition(ssp.stream, ssp.partition).records)
            bounds[ssp] = OffsetBounds("0" if count else None, str(count))
        return bounds


class InMemorySystemProducer(SystemProducer):
    """Appends each message to the broker at once; ``flush`` has nothing left to do. It knows
    each stream's partition count as the broker has it (a Kafka producer whose metadata is
    always fresh)."""

    def __init__(self, broker: InMemoryBroker) -> None:
        self._append = broker.append
        self.partition_count = broker.partition_count  # type: ignore[method-assign]

    def send(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
    ) -> None:
        self._append(system_stream.stream, 0 if partition is None else partition, key, message)

    def send_with_headers(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        self._append(system_stream.stream, partition or 0, key, message, headers=tuple(headers))

    async def flush(self) -> None:
        return None


class InMemorySystemFactory(SystemFactory):
    """Builds the memory system's parts over the broker of its namespace."""

    default_msg_serde = "none"
    default_key_serde = "none"
    default_offset = OffsetDefault.OLDEST
    #: A new process finds its streams empty (tests share a namespace across runs).
    outlives_process = False

    def __init__(self, system_name: str, config: Mapping[str, Any]) -> None:
        super().__init__(system_name, config)
        namespace = config.get("namespace", system_name)
        if not isinstance(namespace, str) or not namespace:
            raise ConfigError(
                f"systems.{system_name}.namespace must be a non-empty string, got {namespace!r}",
                key=f"systems.{system_name}.namespace",
            )
        self.namespace = namespace

    @property
    def broker(self) -> InMemoryBroker:
        """The broker namespace this system reads and writes."""
        return InMemoryBroker.for_namespace(self.namespace)

    def get_admin(self) -> SystemAdmin:
        return InMemorySystemAdmin(self.broker)

    def get_consumer(self) -> SystemConsumer:
        return InMemorySystemConsumer(self.broker)

    def get_producer(self) -> SystemProducer:
        return InMemorySystemProducer(self.broker)


__all__ = [
    "InMemorySystemAdmin",
    "InMemorySystemFactory",
    "InMemorySystemProducer",
]
