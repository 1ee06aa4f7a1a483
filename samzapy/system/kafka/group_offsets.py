"""Input offsets committed to the job's Kafka consumer group, where Kafka's tools read them.

``kafka-consumer-groups --describe``, kafka-lag-exporter, Burrow and the Kafka UIs show a
group's lag from the offsets committed to it. samzapy's checkpoints stay the truth for
restarts (they hold changelog offsets and snapshots too), and these commits copy their input
offsets, as Kafka Streams commits its offsets to its group:

- under ``kafka-group`` the container commits as the member it is: the broker checks the
  member's generation, so a container the group has moved on from cannot commit;
- under ``static`` no container joins the group; the commits carry no generation, which the
  broker accepts while the group has no members;
- under exactly-once the offsets go into each task's transaction instead
  (``KafkaTransactionalProducer.send_offsets``), as Kafka Streams does.

aiokafka commits only partitions assigned to its consumer (a task being handed over has left
the member's assignment when it makes its final commit), and its coordinator answers a commit
refused for a stale generation by dropping the member's id, or by rejoining: a copy of the
offsets must never cost the group a rebalance. So the request is sent here, through the
consumer's coordinator connection with its current generation and member id, and any refusal
is only raised.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import (
    GroupCoordinatorNotAvailableError,
    NoError,
    NotCoordinatorForGroupError,
    RequestTimedOutError,
    for_code,
)
from aiokafka.protocol.commit import OffsetCommitRequest
from aiokafka.structs import OffsetAndMetadata

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.kafka.connection import connect, started, stop_client
from samzapy.system.kafka.errors import KAFKA_ERRORS, stream_error, where
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.ports import GroupOffsetCommitter


def kafka_offsets(
    offsets: Mapping[SystemStreamPartition, int],
) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(s.stream, s.partition): OffsetAndMetadata(o, "") for s, o in offsets.items()
    }


#: Answers that mean the group's coordinator is elsewhere now.
_COORDINATOR_MOVED = (
    GroupCoordinatorNotAvailableError,
    NotCoordinatorForGroupError,
    RequestTimedOutError,
)


async def _commit(coordinator: Any, offsets: Mapping[SystemStreamPartition, int]) -> None:
    """One OffsetCommit request as the coordinator's member (generation -1 and no member id
    for a consumer that never joined); raises the first partition's error, if any, naming
    the partition (a deleted input's are refused, the others' committed)."""
    await coordinator.ensure_coordinator_known()
    by_topic: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for ssp, offset in offsets.items():
        by_topic[ssp.stream].append((ssp.partition, offset, ""))
    request = OffsetCommitRequest(
        coordinator.group_id,
        coordinator.generation,
        coordinator.member_id,
        OffsetCommitRequest.DEFAULT_RETENTION_TIME,
        list(by_topic.items()),
    )
    send: Callable[[Any], Awaitable[Any]] = coordinator._send_req
    response = await send(request)
    for topic, partitions in response.topics:
        for partition, code in partitions:
            error = for_code(code)
            if error is NoError:
                continue
            if error in _COORDINATOR_MOVED:
                # Find it again next time (a consumer that never joined has no heartbeat
                # to notice it for us).
                coordinator.coordinator_dead()
            said = getattr(error, "description", "")
            raise error(f"{where(topic, partition)}: {said}" if said else where(topic, partition))


class KafkaGroupOffsets(GroupOffsetCommitter):
    """Commits through the group coordinator of an aiokafka consumer with the group's id:
    the member's own (``member``), or, without one, a consumer of its own that never joins."""

    def __init__(
        self,
        settings: KafkaSettings,
        group_id: str,
        *,
        member: Callable[[], Any] | None = None,
    ) -> None:
        self._settings = settings
        self.group_id = group_id
        self._member = member
        self._own: Any = None

    async def _consumer(self) -> Any:
        if self._member is not None:
            consumer = self._member()
            if consumer is None:
                raise StreamSystemError(f"not a member of consumer group {self.group_id!r} now")
            return consumer
        if self._own is None:
            settings = self._settings
            self._own = await connect(
                self._open,
                servers=",".join(settings.consumer_servers),
                timeout_ms=settings.connect_timeout_ms,
                system=settings.system_name,
                client="group offsets",
            )
        return self._own

    async def _open(self) -> Any:
        kwargs = {
            **self._settings.consumer_kwargs(),
            "group_id": self.group_id,
            "enable_auto_commit": False,
        }
        return await started(AIOKafkaConsumer(**kwargs))

    async def commit(self, offsets: Mapping[SystemStreamPartition, int]) -> None:
        if not offsets:
            return
        consumer = await self._consumer()
        try:
            await _commit(consumer._coordinator, offsets)
        except KAFKA_ERRORS as exc:
            raise stream_error(
                f"cannot commit offsets to consumer group {self.group_id!r}", exc
            ) from exc

    async def stop(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            await stop_client(own)


__all__ = ["KafkaGroupOffsets", "kafka_offsets"]
