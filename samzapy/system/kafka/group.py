"""Task assignment through Kafka's consumer-group protocol (``job.coordinator.factory:
kafka-group``).

The containers of a job join one consumer group (``samzapy.<job>.<id>``), subscribed to the
job's input topics. A samzapy assignor runs on the group leader and hands out whole tasks
(task k = partition k of every input, Samza's group-by-partition) with ``assign_tasks``:
balanced by task count, and sticky: each member keeps the tasks it reports in its metadata,
up to its fair share. The group's consumer reads nothing (every partition is paused): it
only carries membership and heartbeats; the container reads its tasks' partitions with its
own consumer.

The protocol is eager: at a rebalance every member gives up all its tasks first
(``on_revoked``, awaited before the member rejoins: the container commits and closes them
there), and only then does the new assignment start (``on_assigned``). So a task's new owner
always starts from its last owner's final checkpoint; a member that died is noticed after
``job.coordinator.session.timeout.ms`` and its tasks resume from their last checkpoint.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

from samzapy.system.kafka.connection import connect, started, stop_client
from samzapy.system.kafka.errors import KAFKA_ERRORS, stream_error
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.ports import GroupMembership

log = structlog.get_logger("samzapy.kafka")

ASSIGNOR_NAME = "samzapy-tasks"


def assign_tasks(
    tasks: Sequence[int], previous: Mapping[str, Iterable[int]]
) -> dict[str, list[int]]:
    """Tasks per member: counts differ by at most one; a member keeps the tasks it had (as
    far as its share allows), so a rebalance moves as few tasks as it can.

    ``previous`` maps every member to the tasks it reported owning (possibly none).
    """
    members = sorted(previous)
    if not members:
        return {}
    valid = set(tasks)
    n, m = len(valid), len(members)
    owned = {member: [t for t in previous[member] if t in valid] for member in members}
    # The members that held the most get the larger shares: fewer moves.
    by_holding = sorted(members, key=lambda member: (-len(owned[member]), member))
    share = {member: n // m + (1 if i < n % m else 0) for i, member in enumerate(by_holding)}
    result: dict[str, list[int]] = {member: [] for member in members}
    taken: set[int] = set()
    for member in by_holding:
        for task in sorted(owned[member]):
            if len(result[member]) < share[member] and task not in taken:
                result[member].append(task)
                taken.add(task)
    free = [t for t in sorted(valid) if t not in taken]
    for task in free:
        member = min(
            (x for x in members if len(result[x]) < share[x]),
            key=lambda x: (len(result[x]), x),
        )
        result[member].append(task)
    return {member: sorted(ts) for member, ts in result.items()}


def _assignor(owned: Callable[[], list[int]]) -> type[AbstractPartitionAssignor]:
    """An assignor class whose metadata reports this member's tasks (``owned``)."""

    class TaskAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
        name = ASSIGNOR_NAME

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            data = json.dumps({"tasks": owned()}).encode()
            return ConsumerProtocolMemberMetadata(0, sorted(topics), data)

        @classmethod
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            topics = sorted({t for meta in members.values() for t in meta.subscription})
            counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}
            task_count = max(counts.values(), default=0)
            previous = {}
            for member, meta in members.items():
                try:
                    previous[member] = [int(t) for t in json.loads(meta.user_data)["tasks"]]
                except (ValueError, KeyError, TypeError):
                    previous[member] = []
            plan = assign_tasks(range(task_count), previous)
            out = {}
            for member, tasks in plan.items():
                assignment = [(topic, [k for k in tasks if k < counts[topic]]) for topic in topics]
                out[member] = ConsumerProtocolMemberAssignment(0, assignment, b"")
            return out

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            return None

    return TaskAssignor


class KafkaGroupMembership(GroupMembership):
    """This container's membership of the job's group; tasks are partition numbers."""

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        group_id: str,
        topics: Sequence[str],
        session_timeout_ms: int,
        on_revoked: Callable[[list[int]], Awaitable[None]],
        on_assigned: Callable[[list[int]], Awaitable[None]],
    ) -> None:
        self._settings = settings
        self.group_id = group_id
        self._topics = list(topics)
        self._session_timeout_ms = session_timeout_ms
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned
        self.tasks: list[int] = []
        self._consumer: Any = None
        self._poller: asyncio.Task[None] | None = None

    async def _open(self) -> Any:
        session = self._session_timeout_ms
        kwargs = {
            **self._settings.consumer_kwargs(),
            "group_id": self.group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "latest",  # never used: every partition stays paused
            "partition_assignment_strategy": (_assignor(lambda: list(self.tasks)),),
            "session_timeout_ms": session,
            "heartbeat_interval_ms": max(100, session // 5),
            "rebalance_timeout_ms": max(session, 60000),
            "max_poll_interval_ms": max(session, 300000),
        }
        return await started(AIOKafkaConsumer(**kwargs))

    async def start(self) -> None:
        """Join the group; the first assignment arrives through ``on_assigned``."""
        settings = self._settings
        consumer = await connect(
            self._open,
            servers=",".join(settings.consumer_servers),
            timeout_ms=settings.connect_timeout_ms,
            system=settings.system_name,
            client="group member",
        )
        self._consumer = consumer
        try:
            consumer.subscribe(topics=self._topics, listener=_Listener(self))
        except KAFKA_ERRORS as exc:
            raise stream_error(f"cannot join consumer group {self.group_id!r}", exc) from exc
        self._poller = asyncio.get_running_loop().create_task(self._poll(), name="group-member")

    async def _poll(self) -> None:
        """Keep the membership alive; the group's consumer reads nothing (all paused)."""
        consumer = self._consumer
        while True:
            try:
                await consumer.getmany(timeout_ms=1000)
            except KAFKA_ERRORS as exc:
                raise stream_error(f"consumer group {self.group_id!r} failed", exc) from exc

    def failure(self) -> BaseException | None:
        """The exception that ended the membership, if it ended."""
        poller = self._poller
        if poller is None or not poller.done() or poller.cancelled():
            return None
        return poller.exception()

    def rejoin(self) -> None:
        consumer = self._consumer
        coordinator = getattr(consumer, "_coordinator", None)  # aiokafka has no public call
        if coordinator is not None:
            coordinator.request_rejoin()

    async def stop(self) -> None:
        """Leave the group (its tasks move to the other members at once)."""
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self._consumer is not None:
            await stop_client(self._consumer)
            self._consumer = None


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, membership: KafkaGroupMembership) -> None:
        self._membership = membership

    async def on_partitions_revoked(self, revoked: Any) -> None:
        membership = self._membership
        tasks, membership.tasks = membership.tasks, []
        if tasks:
            await membership._on_revoked(tasks)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        membership = self._membership
        consumer = membership._consumer
        if consumer is not None and assigned:
            consumer.pause(*assigned)
        membership.tasks = sorted({tp.partition for tp in assigned})
        await membership._on_assigned(list(membership.tasks))


__all__ = ["ASSIGNOR_NAME", "KafkaGroupMembership", "assign_tasks"]
