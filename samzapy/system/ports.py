"""The system ports: SystemAdmin, SystemConsumer, SystemProducer and the SystemFactory.

The group ports (GroupMembership, StandbyPlacement, GroupOffsetCommitter) live in ``group.py``
and are importable from here too.

The container's promises to a consumer (each one is a contract test):

1. ``register`` is called for every partition before ``start``, and never after it.
2. ``poll`` is only called between ``start`` and ``stop``, from the event loop, one call at a
   time, with a subset of the registered partitions (those whose buffer has room).
3. ``stop`` is called once, nothing after it; an exception a consumer raises halts the container.

A consumer's promises to the container:

1. Envelopes of one partition are returned in offset order, starting at the registered offset.
2. A bounded partition ends with one end-of-stream envelope, after its last message.
3. ``poll`` returns at most ``max_messages`` envelopes per partition, and returns an empty
   mapping after ``timeout`` seconds when nothing is available.
4. Message keys and bodies are raw (bytes, or objects on the memory system); the container
   applies the serdes.

A producer receives serialized messages with their partition chosen by the container (``None``
lets the producer choose) and makes them durable by the end of ``flush``. Errors of a ``send``
may surface at the next ``flush``; either way they halt the container.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.entries import EntryBatch
from samzapy.system.fencing import WriteLease
from samzapy.system.group import GroupMembership, GroupOffsetCommitter, StandbyPlacement


class OffsetDefault:
    """Where a partition without a checkpoint starts."""

    OLDEST = "oldest"
    UPCOMING = "upcoming"


@dataclass(frozen=True, slots=True)
class OffsetBounds:
    """What a partition holds: its oldest offset (None: nothing) and its next message's."""

    oldest: str | None
    upcoming: str


@dataclass(frozen=True, slots=True)
class StreamConfigs:
    """What a system said of its streams' settings: those of each stream it described
    (``found``: setting -> value, the system's defaults included), and why it did not
    describe the others (``unread``: stream -> reason, e.g. access denied, no such stream)."""

    found: Mapping[str, Mapping[str, str]]
    unread: Mapping[str, str]


class SystemAdmin(abc.ABC):
    """Stream metadata: partition counts, offsets, stream creation."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Connect, if the system needs to."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    @abc.abstractmethod
    async def partition_counts(self, streams: Iterable[str]) -> dict[str, int]:
        """Partition count of each existing stream; a missing stream is left out."""

    async def topic_ids(self, streams: Iterable[str]) -> dict[str, str] | None:
        """The ID of each existing stream, where the system names a stream's every making
        apart (Kafka's topic IDs: a topic deleted and created again under its name gets a new
        one); a missing stream is left out. None: the system (or its server) gives none."""
        return None

    @abc.abstractmethod
    async def create_stream(
        self,
        stream: str,
        partitions: int,
        *,
        replication_factor: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create the stream if it does not exist. ``replication_factor`` (None: the system's
        default) and ``config`` (``{"cleanup.policy": "compact"}``) where the system has them."""

    @abc.abstractmethod
    async def offset_bounds(
        self, ssps: Iterable[SystemStreamPartition]
    ) -> dict[SystemStreamPartition, OffsetBounds]:
        """The oldest and upcoming offsets of each partition of an existing stream (retention
        checks, reading a stream to its end)."""

    def offset_after(self, offset: str) -> str:
        """The offset that follows ``offset`` (a checkpoint holds the last processed one)."""
        return str(int(offset) + 1)

    def offset_before(self, offset: str) -> str | None:
        """The offset whose ``offset_after`` is ``offset`` (a checkpoint of nothing processed);
        None for an offset that is no integer (its partition restarts at its default)."""
        return str(int(offset) - 1) if offset.lstrip("-").isdecimal() else None

    def compare_offsets(self, a: str, b: str) -> int:
        """Negative, zero or positive as ``a`` is before, at or after ``b``."""
        ia, ib = int(a), int(b)
        return (ia > ib) - (ia < ib)

    async def offsets_for_time(
        self, ssps: Iterable[SystemStreamPartition], timestamp_ms: int
    ) -> dict[SystemStreamPartition, str | None] | None:
        """The first offset of each partition whose message is at or after ``timestamp_ms``
        (None for a partition whose messages are all older); None when the system cannot
        look offsets up by time."""
        return None

    async def stream_configs(
        self, streams: Iterable[str], keys: Collection[str]
    ) -> StreamConfigs | None:
        """The settings ``keys`` (``cleanup.policy``, ``retention.ms``) of each of ``streams``,
        all in one request; None when the system has no such settings (memory, file): unknown.
        One attempt, not retried through an outage (a check worth no wait; the caller bounds
        it in time); raises StreamSystemError when the system refuses the whole request."""
        return None

    async def group_members(self, group_id: str) -> list[tuple[str, str, str]]:
        """The live members of consumer group ``group_id``: (member id, client id, host)
        each; empty when the group has none, or the system has no groups."""
        return []


class SystemConsumer(abc.ABC):
    """Reads partitions of a system. See the module docstring for the contract."""

    @abc.abstractmethod
    def register(self, ssp: SystemStreamPartition, offset: str | None, default: str) -> None:
        """Read ``ssp`` from ``offset`` (the next offset to read) or, when it is None, from
        the ``default`` position (an OffsetDefault)."""

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def poll(
        self,
        ssps: Sequence[SystemStreamPartition],
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - a poll deadline is part of the port
    ) -> Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]]:
        """Envelopes available for ``ssps``, waiting up to ``timeout`` seconds for any."""

    def high_watermark(self, ssp: SystemStreamPartition) -> int | None:
        """The offset the partition's next message will get, as last seen; None: unknown."""
        return None

    def start_offset(self, ssp: SystemStreamPartition) -> int | None:
        """The offset the consumer started reading ``ssp`` at; None: unknown."""
        return None

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        """The next offset it will fetch, past records skipped (a transaction's marker); None:
        unknown. These three make the lag metric (``gauges.py``)."""
        return None

    def expect_stream_ids(self, ids: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Called before ``start`` with the ID of each stream read that has one
        (``SystemAdmin.topic_ids``), as looked up at start-up and recorded by the
        checkpoints: a consumer that can tell fails once a stream's ID is another (the
        stream was deleted and made again), as for a stream deleted."""

    def keep_raw(self) -> None:  # noqa: B027 - optional hook
        """Called before ``start`` when the job has a dead-letter stream: set ``raw`` on
        every envelope, the record as read with its headers (``RawRecord``). A consumer
        that does not leaves it to the container, which keeps key and message only."""

    async def position(self, ssp: SystemStreamPartition) -> str | None:
        """The next offset the consumer will read of ``ssp``, when the system can tell: on a
        log with transactions it moves past records it skips (aborted ones, transaction
        markers), which a reader waiting for an offset needs to know."""
        return None

    def read_entries(self) -> None:  # noqa: B027 - optional hook
        """Called before ``start`` by a reader that will only call ``poll_entries`` (a
        store's restore, a standby): a consumer that builds entries from what it fetched
        may stop making envelopes."""

    async def poll_entries(
        self,
        ssp: SystemStreamPartition,
        max_messages: int,
        timeout: float,  # noqa: ASYNC109 - a poll deadline is part of the port
    ) -> EntryBatch | None:
        """The records available for ``ssp`` as store entries (``system/entries.py``),
        waiting up to ``timeout`` seconds for any; None when none came. This default makes
        them from ``poll``'s envelopes."""
        batch = (await self.poll([ssp], max_messages, timeout)).get(ssp)
        return EntryBatch.of_envelopes(batch) if batch else None


class SystemProducer(abc.ABC):
    """Writes to streams of a system."""

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Connect, if the system needs to."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Flush what is left and release resources."""

    async def abandon(self) -> int:
        """Release resources at once, delivering nothing more, even with the system out of
        reach (the container failed or lost its tasks: no checkpoint covers what it sent);
        the messages dropped. By default ``stop``: a producer whose stop cannot hang."""
        await self.stop()
        return 0

    @abc.abstractmethod
    def send(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
    ) -> None:
        """Queue one serialized message; must not block the event loop."""

    def send_with_headers(
        self,
        system_stream: SystemStream,
        partition: int | None,
        key: Any,
        message: Any,
        headers: Sequence[tuple[str, bytes]],
    ) -> None:
        """``send`` with record headers, ``(name, bytes)`` pairs (a dead letter); made
        durable by ``flush`` like any send. A system without headers refuses."""
        raise StreamSystemError(
            f"cannot send to {system_stream}: system {system_stream.system!r} does not keep "
            "record headers, which a dead letter needs (task.dead.letter.stream must be on a "
            "kafka or memory system)"
        )

    @abc.abstractmethod
    async def flush(self) -> None:
        """Return once every message sent so far is durable; raise if any failed."""

    def fence_with(self, may_write: WriteLease) -> None:  # noqa: B027 - optional hook
        """Hand nothing to the system while ``may_write`` is held, nothing more once it
        broke (the container may have lost its tasks): what is not handed over is dropped."""

    def linger(self, stream: str, linger_ms: int) -> None:  # noqa: B027 - optional hook
        """Hold the messages of ``stream`` up to ``linger_ms`` before handing them over, to
        write fewer, larger batches (a producer that does not batch ignores it)."""

    def backpressure(self) -> asyncio.Future[None] | None:
        """A future to await before sending more, while the producer holds as much unsent
        data as it may; None when it can take more. Checked once per turn of a task (the hot
        path): memory stays bounded when the destination is slower than the job."""
        return None

    def partition_count(self, stream: str) -> int | None:
        """How many partitions ``stream`` has as far as the producer knows now, without I/O
        (Kafka's: its client's metadata, refreshed every ``metadata.max.age.ms``); None when
        it does not know. The router takes a larger count up for a plain output stream at
        its next flush (``container/collector.py``)."""
        return None


class TransactionalProducer(SystemProducer):
    """A producer whose sends are atomic in transactions (exactly-once processing).

    ``start`` claims the producer's transactional id: an earlier producer with the same id is
    fenced, and its open transaction aborted. Sends are only allowed inside a transaction.
    ``commit`` flushes and commits the open transaction; a producer that was fenced raises
    ``TaskFencedError`` from ``begin``, ``flush`` or ``commit``, and must not be used again.
    """

    @property
    @abc.abstractmethod
    def pending(self) -> bool:
        """Whether anything was sent in the open transaction."""

    @abc.abstractmethod
    async def begin(self) -> None:
        """Open a transaction."""

    @abc.abstractmethod
    async def commit(self) -> None:
        """Flush, then commit the open transaction: all its sends become visible at once."""

    @abc.abstractmethod
    async def abort(self) -> None:
        """Abort the open transaction: none of its sends will ever be read committed."""

    async def send_offsets(
        self, group_id: str, offsets: Mapping[SystemStreamPartition, int]
    ) -> None:
        """Commit ``offsets`` (the next offset to read, per input partition) to the consumer
        group ``group_id`` as part of the open transaction: they count when it commits, and
        never if it aborts. Systems without consumer groups do nothing."""
        return None


class SystemFactory(abc.ABC):
    """Builds the parts of one configured system. ``config`` holds the system's own keys,
    typed, with the ``systems.<name>.`` prefix removed (``{"path": ..., "follow": False}``)."""

    #: The serdes of message bodies and keys when the job configures none ("none": objects).
    default_msg_serde: str = "none"
    default_key_serde: str = "none"
    #: Where streams of this system start without a checkpoint.
    default_offset: str = OffsetDefault.UPCOMING
    #: Whether its streams outlive the process (a new one finds ``memory`` streams empty).
    outlives_process: bool = True
    stop_wait_ms: int | None = None  # how long a clean stop's commits wait for the servers

    def __init__(self, system_name: str, config: Mapping[str, Any]) -> None:
        self.system_name = system_name
        self.config = config

    @abc.abstractmethod
    def get_admin(self) -> SystemAdmin: ...

    @abc.abstractmethod
    def get_consumer(self) -> SystemConsumer: ...

    @abc.abstractmethod
    def get_producer(self) -> SystemProducer: ...

    def get_committed_consumer(self) -> SystemConsumer:
        """A consumer that reads only what committed transactions wrote (samzapy's own
        streams: checkpoints, changelogs, intermediate streams); systems without
        transactions have nothing else to read."""
        return self.get_consumer()

    def get_transactional_producer(
        self, transactional_id: str, *, timeout_ms: int
    ) -> TransactionalProducer:
        """A producer for ``transactional_id``, whose transactions the broker aborts after
        ``timeout_ms``; systems without transactions refuse."""
        raise StreamSystemError(
            f"system {self.system_name!r} has no transactions: task.processing.guarantee "
            "exactly-once needs every output, changelog and the checkpoints on one kafka system"
        )

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
        """A membership of the job's group on this system (``job.coordinator.factory:
        kafka-group``), placing standby replicas with ``standbys``; systems without a group
        protocol refuse. ``instance_id``: a static member's id (KIP-345), kept across
        restarts; ``on_fenced`` is called, on the loop and at once, when the group no longer
        knows this static member (another process joined with its id, or its session
        expired): its tasks may run elsewhere from then on. ``job``: the job's ``job.name``
        and ``job.id``; a member of another job in the group (whose names map to the same
        group id) gets no task, and the membership's ``failure`` is JobCollisionError."""
        raise StreamSystemError(
            f"system {self.system_name!r} has no group protocol: job.coordinator.factory "
            "kafka-group needs every input on a kafka system (use static)"
        )

    def get_offset_committer(self, group_id: str) -> GroupOffsetCommitter | None:
        """Commits offsets to the group ``group_id`` without joining it (the ``static``
        coordinator); None: the system has no consumer groups."""
        return None


__all__ = [
    "GroupMembership",
    "GroupOffsetCommitter",
    "OffsetBounds",
    "OffsetDefault",
    "StandbyPlacement",
    "StreamConfigs",
    "SystemAdmin",
    "SystemConsumer",
    "SystemFactory",
    "SystemProducer",
    "TransactionalProducer",
]
