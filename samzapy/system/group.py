"""The group ports: a container's membership of its job's group (GroupMembership), the
placement of standby replicas in it (StandbyPlacement), and committing input offsets to a
consumer group (GroupOffsetCommitter). A system that has a group protocol (kafka) implements
them; ``SystemFactory`` (``ports.py``) hands them out.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence

from samzapy.api.system import SystemStreamPartition

#: The reason of a ``rejoin`` that gives none.
REJOIN_ASKED = "this member asked for a new assignment"


class GroupOffsetCommitter(abc.ABC):
    """Commits a job's input offsets to its consumer group on the system, where the system's
    own tools look for them (for Kafka: ``kafka-consumer-groups --describe``, lag exporters,
    Kafka UIs). The offsets are the next offset to read of each partition (Kafka's
    convention). samzapy never reads them back: its checkpoints stay the truth for restarts."""

    @abc.abstractmethod
    async def commit(self, offsets: Mapping[SystemStreamPartition, int]) -> None:
        """Commit ``offsets``; raises StreamSystemError when the group refuses them (a
        rebalance under way) or the system cannot be reached."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release what the commits opened."""


class StandbyPlacement(abc.ABC):
    """Standby replicas in the group protocol (``job.standbytasks.replication.factor``): what
    a member reports in its metadata, the placement rule the leader applies, and where the
    member hears its standby tasks. Tasks are partition numbers."""

    #: The id of the store directory this member's standbys live in, the same for every
    #: container that shares it (``container/store_directory.py``); None: unknown.
    state_directory: str | None = None

    @abc.abstractmethod
    def report(self) -> Mapping[int, int | None]:
        """This member's standbys: task -> how far behind the task's latest checkpoint it is
        (changelog records), None while it does not know."""

    @abc.abstractmethod
    def place(
        self,
        tasks: Sequence[int],
        previous: Mapping[str, Iterable[int]],
        standbys: Mapping[str, Mapping[int, int | None]],
    ) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
        """The leader's plan: active, standby and *warmup* tasks per member (a warmup is a
        standby a planned move waits for: its member rejoins once it has caught up), from the
        tasks each member runs (``previous``) and the standbys it reported."""

    @abc.abstractmethod
    def assigned(self, standbys: Sequence[int], warmups: Sequence[int] = ()) -> None:
        """The standby and warmup tasks of this member's new assignment (before
        ``on_assigned``)."""


class GroupMembership(abc.ABC):
    """A container's membership of its job's group. Tasks are partition numbers.

    The protocol is incremental (KIP-429's two phases): a member reports the tasks it runs
    (``owned``, read at every join); a rebalance never hands a task to a member while another
    reports it, but first takes it from its owner's assignment, and the owner, once it has
    released it, calls ``rejoin`` so that the next rebalance can give it out. ``on_rebalance``
    is awaited before the member rejoins (the container finishes releasing tasks there), and
    ``on_assigned(tasks, released)`` delivers each assignment, with the wall-clock time (s)
    at which the previous owner of each newly assigned task stopped it, when it said so
    (``released``)."""

    #: What started the rebalance under way, as far as this member can tell (its own
    #: ``rejoin``'s reason, or what the group let it see), set before ``on_rebalance`` is
    #: awaited; None: the membership does not say.
    rebalance_reason: str | None = None

    @abc.abstractmethod
    async def start(self) -> None:
        """Join the group."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Leave the group."""

    @abc.abstractmethod
    def failure(self) -> BaseException | None:
        """Why the membership ended, once it has."""

    def rejoin(self, reason: str = REJOIN_ASKED) -> None:  # noqa: B027 - optional hook
        """Ask the group for a new assignment soon, for ``reason`` (this container released
        tasks, had one fenced, or warmed a standby up): the next ``rebalance_reason``."""

    def released(self, tasks: Iterable[int], at: float) -> None:  # noqa: B027 - optional hook
        """This member stopped ``tasks`` at wall-clock time ``at`` (s): tell their next owner."""

    @property
    def heartbeat_interval_s(self) -> float:
        """How often the member tells the group it is alive."""
        return 1.0

    @property
    def member_id(self) -> str | None:
        """This member's id in the group's current generation, once it has joined."""
        return None

    @property
    def heard_at(self) -> float | None:
        """When (monotonic) the last heartbeat the group acknowledged was sent; None: unknown."""
        return None

    def offset_committer(self) -> GroupOffsetCommitter | None:
        """Commits offsets to the group as this member (the broker checks its generation, so
        a member the group has moved on from cannot commit); None: the group keeps none."""
        return None


__all__ = ["REJOIN_ASKED", "GroupMembership", "GroupOffsetCommitter", "StandbyPlacement"]
