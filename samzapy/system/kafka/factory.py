"""The kafka system's factory: builds the admin, consumer and producer of one Kafka cluster.

Configuration (``systems.<name>.`` stripped) is translated once, when the factory is built,
by ``settings.kafka_settings``, so a bad key fails before any connection is tried. Kafka
carries bytes: both default serdes are ``none`` (raw bytes pass through), and streams without
a checkpoint start at the ``upcoming`` offset, as in Samza.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

from samzapy.system.kafka.admin import KafkaSystemAdmin
from samzapy.system.kafka.consumer import KafkaSystemConsumer
from samzapy.system.kafka.group import KafkaGroupMembership
from samzapy.system.kafka.group_offsets import KafkaGroupOffsets
from samzapy.system.kafka.producer import KafkaSystemProducer
from samzapy.system.kafka.settings import KafkaSettings, kafka_settings
from samzapy.system.kafka.transactional import KafkaTransactionalProducer
from samzapy.system.ports import (
    GroupMembership,
    GroupOffsetCommitter,
    OffsetDefault,
    StandbyPlacement,
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
    TransactionalProducer,
)


class KafkaSystemFactory(SystemFactory):
    """Builds the parts of one kafka system from its translated settings."""

    default_msg_serde = "none"
    default_key_serde = "none"
    default_offset = OffsetDefault.UPCOMING

    def __init__(self, system_name: str, config: Mapping[str, Any]) -> None:
        super().__init__(system_name, config)
        self.settings: KafkaSettings = kafka_settings(system_name, config)
        self.stop_wait_ms = self.settings.connect_timeout_ms

    def get_admin(self) -> SystemAdmin:
        return KafkaSystemAdmin(self.settings)

    def get_consumer(self) -> SystemConsumer:
        return KafkaSystemConsumer(self.settings)

    def get_producer(self) -> SystemProducer:
        return KafkaSystemProducer(self.settings)

    def get_committed_consumer(self) -> SystemConsumer:
        return KafkaSystemConsumer(self.settings, read_committed=True)

    def get_transactional_producer(
        self, transactional_id: str, *, timeout_ms: int
    ) -> TransactionalProducer:
        return KafkaTransactionalProducer(self.settings, transactional_id, timeout_ms=timeout_ms)

    def get_group_membership(
        self,
        *,
        group_id: str,
        streams: Sequence[str],
        session_timeout_ms: int,
        owned: Callable[[], Collection[int]],
        on_rebalance: Callable[[], Awaitable[None]],
        on_assigned: Callable[[list[int], Mapping[int, float]], Awaitable[None]],
        instance_id: str | None = None,
        on_fenced: Callable[[], None] | None = None,
        standbys: StandbyPlacement | None = None,
        job: tuple[str, str] | None = None,
    ) -> GroupMembership:
        return KafkaGroupMembership(
            self.settings,
            group_id=group_id,
            topics=streams,
            session_timeout_ms=session_timeout_ms,
            owned=owned,
            on_rebalance=on_rebalance,
            on_assigned=on_assigned,
            instance_id=instance_id,
            on_fenced=on_fenced,
            standbys=standbys,
            job=job,
        )

    def get_offset_committer(self, group_id: str) -> GroupOffsetCommitter | None:
        return KafkaGroupOffsets(self.settings, group_id)


__all__ = ["KafkaSystemFactory"]
