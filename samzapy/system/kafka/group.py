"""Task assignment through Kafka's consumer-group protocol (``job.coordinator.factory:
kafka-group``).

The containers of a job join one consumer group (``samzapy.<job>.<id>``), subscribed to the
job's input topics. A samzapy assignor runs on the group leader and hands out whole tasks
(task k = partition k of every input, Samza's group-by-partition) with ``assign_tasks``:
balanced by task count, and sticky: each member keeps the tasks it reports in its metadata,
up to its fair share. The group's consumer reads nothing (every partition is paused): it
only carries membership and heartbeats; the container reads its tasks' partitions with its
own consumer.

The handover is incremental, in KIP-429's two phases, on Kafka's plain (eager) protocol: a
member's metadata says which tasks it runs, and the assignor never gives a task to a member
while another one reports it (``withhold_moving``): the first rebalance only takes it out of
its owner's assignment. The owner keeps every other task running, drains, commits and closes
that one, reports when it stopped it, and rejoins; the next rebalance finds the task owned by
no one and gives it to its new member, with the time its previous owner stopped it. So a task
never runs in two containers at once, and tasks that do not move never stop. A member that
died is noticed after ``job.coordinator.session.timeout.ms``, and one that left has committed
and closed its tasks first: either way no one reports their tasks, which go out at once.

Static membership (KIP-345): a member with an ``instance_id`` (``job.container.id``) keeps
its place across restarts. It leaves no group when it stops, and the same id joining again
gets the previous assignment back with no rebalance of the others. A later join with its
id fences the earlier member, which the broker then no longer knows (aiokafka's heartbeat
reads UNKNOWN_MEMBER_ID and would rejoin, fencing the newcomer in turn): such a member calls
``on_fenced`` and never rejoins under that id (``MemberFencedError``).

Each member's metadata also names its job (``job.name``, ``job.id``): the group's name is
the same for job ``a.b`` id ``1`` and job ``a`` id ``b.1``, and the leader gives the members
of any job but the one that held the group first (its own, or not) no task and a refusal
they fail with (``JobCollisionError``; ``group_wire.py``).

Heartbeats go every ``HEARTBEAT_MAX_MS`` at most: the other members learn of a rebalance
(a released task waiting for its new owner) at their next heartbeat.

With standby replicas (a ``StandbyPlacement``), the metadata also reports the member's
standbys and how far behind each is (``"standbys": {"3": 120}``), the placement's rule
replaces ``assign_tasks`` (a free task goes to a warm standby first), each assignment's
user data names the member's standby tasks (``"standbys": [...]``) and those that warm up
for a move (``"warmups": [...]``), and a task held back from its new owner stays a standby
there meanwhile, if it was one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.errors import InvalidSessionTimeoutError

from samzapy.api.errors import JobCollisionError, StreamSystemError
from samzapy.system.assignment import plan_tasks
from samzapy.system.kafka.connection import connect, started, stop_client
from samzapy.system.kafka.errors import KAFKA_ERRORS, stream_error
from samzapy.system.kafka.group_members import GroupMembers, handover
from samzapy.system.kafka.group_offsets import KafkaGroupOffsets
from samzapy.system.kafka.group_triggers import REJOIN_ASKED, RebalanceTriggers
from samzapy.system.kafka.group_wire import (
    Job,
    decode,
    first_job,
    job_of,
    refusals,
    released_times,
    since_of,
    standby_report,
    strangers,
    task_list,
)
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.ports import GroupMembership, GroupOffsetCommitter, StandbyPlacement

log = structlog.get_logger("samzapy.kafka")

ASSIGNOR_NAME = "samzapy-tasks"

#: The longest heartbeat interval: a rebalance under way reaches each member this soon.
HEARTBEAT_MAX_MS = 250

_UNKNOWN_MEMBER = ""  # aiokafka's JoinGroupRequest.UNKNOWN_MEMBER_ID


class MemberFencedError(StreamSystemError):
    """The group no longer knows this static member: another process joined with its
    ``job.container.id``, or its session expired. Its tasks may run elsewhere now."""


def heartbeat_interval_ms(session_timeout_ms: int) -> int:
    """A fifth of the session, as Kafka's default ratio, but at most ``HEARTBEAT_MAX_MS``."""
    return max(100, min(session_timeout_ms // 5, HEARTBEAT_MAX_MS))


def _assignor(membership: KafkaGroupMembership) -> type[AbstractPartitionAssignor]:
    """An assignor class whose metadata reports this member's tasks and the times it
    released tasks since the last rebalance."""

    class TaskAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
        name = ASSIGNOR_NAME

        @classmethod
        def metadata(cls, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
            membership._reported = dict(membership._released)
            report: dict[str, Any] = {
                "tasks": sorted(membership._owned()),
                "released": {str(t): at for t, at in membership._reported.items()},
                **membership._members.identity,  # container, host, directory: group_members.py
            }
            if membership._standbys is not None:
                standbys = membership._standbys.report()
                report["standbys"] = {str(t): lag for t, lag in sorted(standbys.items())}
            if membership.job is not None:
                report["job"] = list(membership.job)
                report["since"] = membership._created_at
            data = json.dumps(report).encode()
            return ConsumerProtocolMemberMetadata(0, sorted(topics), data)

        @classmethod
        def assign(
            cls, cluster: Any, members: Mapping[str, ConsumerProtocolMemberMetadata]
        ) -> dict[str, ConsumerProtocolMemberAssignment]:
            metadata = {member: decode(meta.user_data) for member, meta in members.items()}
            membership._members.assigned(membership.group_id, metadata, membership._consumer)
            # Another job's members in the group (its name maps to this one): refused, the
            # job that held the group first keeps it (``first_job``), this one's or not.
            jobs = {m: job_of(d) for m, d in metadata.items()}
            holder = first_job(membership.job, jobs, {m: since_of(d) for m, d in metadata.items()})
            refused = strangers(holder, jobs)
            ours = {m: meta for m, meta in members.items() if m not in refused}
            topics = sorted({t for meta in ours.values() for t in meta.subscription})
            counts = {t: len(cluster.partitions_for_topic(t) or ()) for t in topics}
            task_count = max(counts.values(), default=0)
            previous: dict[str, list[int]] = {}
            released: dict[int, float] = {}
            released_by: dict[int, str] = {}
            reports: dict[str, dict[int, int | None]] = {}
            for member in ours:
                data = metadata[member]
                try:
                    previous[member] = [int(t) for t in data["tasks"]]
                except (ValueError, KeyError, TypeError):
                    previous[member] = []
                released.update(stopped := released_times(data.get("released")))
                released_by.update(dict.fromkeys(stopped, member))
                reports[member] = standby_report(data.get("standbys"))
            placement = membership._standbys
            plan, standbys, warmups, planned = plan_tasks(task_count, previous, reports, placement)
            moves = membership._members.moves(plan, planned, previous, released_by)
            out = {}
            for member, tasks in plan.items():
                assignment = [(topic, [k for k in tasks if k < counts[topic]]) for topic in topics]
                handed = {str(t): released[t] for t in tasks if t in released}
                given: dict[str, Any] = {"released": handed, **moves[member]}
                if membership._standbys is not None:
                    given["standbys"] = standbys.get(member, [])
                    given["warmups"] = warmups.get(member, [])
                user_data = json.dumps(given).encode()
                out[member] = ConsumerProtocolMemberAssignment(0, assignment, user_data)
            if holder is not None:
                for member, why in refusals(membership.group_id, holder, refused):
                    out[member] = ConsumerProtocolMemberAssignment(0, [], why)
            return out

        @classmethod
        def on_assignment(cls, assignment: ConsumerProtocolMemberAssignment) -> None:
            data = decode(assignment.user_data)
            handover(data)  # task_owners_changed: where its moving tasks come from, go to
            membership._handed = released_times(data.get("released"))
            membership._standby_tasks = task_list(data.get("standbys"))
            membership._warmup_tasks = task_list(data.get("warmups"))
            if isinstance(refused := data.get("refused"), str) and membership._refused is None:
                membership._refused = JobCollisionError(refused)

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
        owned: Callable[[], Collection[int]],
        on_rebalance: Callable[[], Awaitable[None]],
        on_assigned: Callable[[list[int], Mapping[int, float]], Awaitable[None]],
        instance_id: str | None = None,
        on_fenced: Callable[[], None] | None = None,
        standbys: StandbyPlacement | None = None,
        job: Job | None = None,
    ) -> None:
        self._settings = settings
        #: This member's job (``job.name``, ``job.id``), told to the group's leader; the
        #: refusal the leader sent if the group is another job's.
        self.job = job
        self._refused: JobCollisionError | None = None
        self.instance_id = instance_id
        self._on_fenced = on_fenced
        directory = standbys.state_directory if standbys is not None else None
        self._members = GroupMembers(instance_id, directory)  # group_members_changed
        #: Wall-clock time this process created the membership: release times before it
        #: (a static member's stored assignment from its previous run) are not this run's.
        self._created_at = time.time()
        self._joined = False
        self._fenced: MemberFencedError | None = None
        self.group_id = group_id
        self._topics = list(topics)
        self._session_timeout_ms = session_timeout_ms
        self._owned = owned
        self._on_rebalance = on_rebalance
        self._triggers = RebalanceTriggers()  # the cause of each rebalance (rebalance_reason)
        self._on_assigned = on_assigned
        #: When this member stopped tasks it gave up (wall clock, s), until a rebalance has
        #: carried them to the leader; those the last metadata reported; those the
        #: last assignment handed over with this member's new tasks.
        self._released: dict[int, float] = {}
        self._reported: dict[int, float] = {}
        self._handed: dict[int, float] = {}
        #: Standby replicas (None: none), and this member's standby tasks of the last
        #: assignment.
        self._standbys = standbys
        self._standby_tasks: list[int] = []
        self._warmup_tasks: list[int] = []
        self._consumer: Any = None
        self._poller: asyncio.Task[None] | None = None
        #: When the last heartbeat the coordinator acknowledged was sent (``heard_at``),
        #: and the last one before a rebalance this member has not rejoined yet.
        self._heard_at: float | None = None
        self._rebalance_since: float | None = None
        self._rebalance_timeout_ms = max(session_timeout_ms, 60000)

    async def _open(self) -> Any:
        session = self._session_timeout_ms
        kwargs = {
            **self._settings.consumer_kwargs(),
            "group_id": self.group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "latest",  # never used: every partition stays paused
            "partition_assignment_strategy": (_assignor(self),),
            "group_instance_id": self.instance_id,
            "session_timeout_ms": session,
            "heartbeat_interval_ms": heartbeat_interval_ms(session),
            "rebalance_timeout_ms": self._rebalance_timeout_ms,
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
        self._watch_heartbeats(consumer)
        self._triggers.watch(consumer)  # after: its heartbeat wraps the one watched
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
                what = f"consumer group {self.group_id!r} failed"
                if isinstance(exc, InvalidSessionTimeoutError):
                    what += (
                        f": the broker refuses job.coordinator.session.timeout.ms "
                        f"{self._session_timeout_ms}; set it within the broker's "
                        "group.min.session.timeout.ms and group.max.session.timeout.ms "
                        "(6000 and 1800000 by default)"
                    )
                raise stream_error(what, exc) from exc

    def _watch_heartbeats(self, consumer: Any) -> None:
        """Note when each heartbeat the coordinator acknowledged was sent: aiokafka keeps
        its own count to itself (a local of its heartbeat routine). Its heartbeat call says
        True when the broker took the heartbeat, during a rebalance too; but the broker
        removes a member that has not rejoined by the rebalance timeout, counted from the
        rebalance's start, which came after the last heartbeat acknowledged before it."""
        coordinator: Any = getattr(consumer, "_coordinator", None)
        beat = getattr(coordinator, "_do_heartbeat", None)
        if beat is None:  # another aiokafka: the lease watches the event loop only
            log.warning("heartbeats_unwatched", reason="aiokafka has no _do_heartbeat")
            return

        self._heard_at = time.monotonic()  # from now on: none acknowledged yet

        async def heartbeat() -> bool:
            sent = time.monotonic()
            acknowledged = bool(await beat())
            if acknowledged:
                rebalancing = coordinator._rejoin_needed_fut.done()  # a rejoin is due
                if not rebalancing:
                    self._rebalance_since = None
                elif self._rebalance_since is None:
                    self._rebalance_since = self._heard_at
                self._heard_at = sent
            return acknowledged

        coordinator._do_heartbeat = heartbeat

    @property
    def heard_at(self) -> float | None:
        since, heard = self._rebalance_since, self._heard_at
        if since is None or heard is None:
            return heard
        # Heard at most a session before the rebalance timeout, for the lease's count.
        removal = since + self._rebalance_timeout_ms / 1000
        return min(heard, removal - self._session_timeout_ms / 1000)

    def failure(self) -> BaseException | None:
        """The exception that ended the membership, if it ended."""
        if self._fenced is not None:
            return self._fenced
        if self._refused is not None:
            return self._refused
        poller = self._poller
        if poller is None or not poller.done() or poller.cancelled():
            return None
        return poller.exception()

    @property
    def heartbeat_interval_s(self) -> float:
        return heartbeat_interval_ms(self._session_timeout_ms) / 1000

    @property
    def member_id(self) -> str | None:
        coordinator = getattr(self._consumer, "_coordinator", None)
        member = getattr(coordinator, "member_id", None)
        return member if self._joined and member else None

    def _check_fenced(self) -> bool:
        """Whether the group has dropped this static member (see the module docstring)."""
        if self.instance_id is None or not self._joined or self._fenced is not None:
            return self._fenced is not None
        coordinator = getattr(self._consumer, "_coordinator", None)
        if getattr(coordinator, "member_id", None) != _UNKNOWN_MEMBER:
            return False
        self._fenced = MemberFencedError(
            f"the group {self.group_id!r} no longer knows member job.container.id="
            f"{self.instance_id!r}: another container joined with the same id, or this "
            "one's session expired; its tasks stopped without committing"
        )
        if self._on_fenced is not None:
            self._on_fenced()
        return True

    def rejoin(self, reason: str = REJOIN_ASKED) -> None:
        self._triggers.rejoin(getattr(self._consumer, "_coordinator", None), reason)

    def released(self, tasks: Iterable[int], at: float) -> None:
        for task in tasks:
            self._released[task] = at

    def offset_committer(self) -> GroupOffsetCommitter:
        return KafkaGroupOffsets(self._settings, self.group_id, member=lambda: self._consumer)

    async def stop(self) -> None:
        """Leave the group (its tasks move to the other members at once); a static member
        only disconnects: its place waits for it for a session."""
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self._fenced is not None and self._consumer is not None:
            # The coordination routine waits in the listener, before a rejoin that would
            # fence the newcomer: end it there.
            routine = getattr(self._consumer._coordinator, "_coordination_task", None)
            if routine is not None:
                routine.cancel()
                await asyncio.gather(routine, return_exceptions=True)
        if self._consumer is not None:
            await stop_client(self._consumer)
            self._consumer = None


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, membership: KafkaGroupMembership) -> None:
        self._membership = membership

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Kafka's eager protocol revokes everything; samzapy's tasks keep running (the
        # assignor never moves a task its owner still reports) until the next assignment.
        if self._membership._check_fenced():
            await asyncio.Event().wait()  # never rejoin: stop() ends the routine here
        self._membership.rebalance_reason = self._membership._triggers.take()
        await self._membership._on_rebalance()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        membership = self._membership
        consumer = membership._consumer
        if consumer is not None and assigned:
            consumer.pause(*assigned)
        for task, at in membership._reported.items():
            if membership._released.get(task) == at:
                del membership._released[task]  # the leader has it now
        membership._reported = {}
        membership._joined = True
        tasks = sorted({tp.partition for tp in assigned})
        handed, membership._handed = membership._handed, {}
        if membership._standbys is not None:
            membership._standbys.assigned(membership._standby_tasks, membership._warmup_tasks)
        # A static member that restarted gets its stored assignment, and with it the
        # release times of the rebalance that made it: not this run's.
        since = membership._created_at if membership.instance_id is not None else 0.0
        await membership._on_assigned(
            tasks, {t: at for t, at in handed.items() if t in tasks and at >= since}
        )


__all__ = [
    "ASSIGNOR_NAME",
    "HEARTBEAT_MAX_MS",
    "KafkaGroupMembership",
    "MemberFencedError",
    "heartbeat_interval_ms",
]
