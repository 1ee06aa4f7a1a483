"""Bootstrap inputs (``streams.<id>.samza.bootstrap``): which partitions a task must read up
to their head before any message of its other inputs, and when it has. Pure: no I/O.

The head of a partition is its upcoming offset when the container starts (read once, with
the checkpoints, before the consumers start); what arrives later is not waited for. Per task:

1. at start-up ``lagging`` decides which of the task's bootstrap partitions are behind their
   head; one that is empty, or whose resume offset is at or past the head (a checkpoint
   already there, or a start at ``upcoming``), is caught up at once;
2. the consumer puts a ``CaughtUp`` marker in the partition's queues right after the last
   message before the head, or as soon as the consumer's position has passed the head when
   no such message comes (Kafka's transaction markers, a file's empty lines, take the last
   offsets); an end-of-stream counts as caught up too. ``Heads`` decides, the consumer
   queues;
3. the task takes the marker in order with its messages, so everything before the head has
   been taken; ``TaskBootstrap.caught_up`` says when the last lagging partition has, and the
   task then releases its other inputs at a barrier, once nothing is in flight: every
   message before the heads has been processed before the first other message is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from samzapy.api.system import SystemStreamPartition
from samzapy.container.inputs import NO_OFFSET, ControlEnvelope, Envelope, TaskInputs
from samzapy.system.ports import OffsetBounds, OffsetDefault, SystemAdmin

Compare = Callable[[str, str], int]


class CaughtUp(ControlEnvelope):
    """The marker the consumer queues where a bootstrap partition reaches its head."""

    __slots__ = ()

    def __init__(self, ssp: SystemStreamPartition) -> None:
        super().__init__(ssp, NO_OFFSET, None)

    @property
    def is_end_of_stream(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CaughtUp({self.system_stream_partition})"


def lagging(
    resume: Mapping[SystemStreamPartition, str | None],
    defaults: Mapping[SystemStreamPartition, str],
    heads: Mapping[SystemStreamPartition, OffsetBounds],
    compare: Mapping[str, Compare],
) -> dict[SystemStreamPartition, str]:
    """Step 1, for one task: its bootstrap partitions still behind their head, each with the
    head (the upcoming offset at start-up). ``resume``: the task's bootstrap partitions, each
    with the offset it resumes at (None: its offset default, ``defaults``); ``heads``: what
    each held at start-up; ``compare``: each system's offset order."""
    behind: dict[SystemStreamPartition, str] = {}
    for ssp, offset in resume.items():
        bounds = heads[ssp]
        if bounds.oldest is None:
            continue  # empty: nothing to read
        if offset is None:
            if defaults[ssp] == OffsetDefault.UPCOMING:
                continue  # starts at the head
        elif compare[ssp.system](offset, bounds.upcoming) >= 0:
            continue  # resumes at or past the head
        behind[ssp] = bounds.upcoming
    return behind


class Heads:
    """Step 2, for the consumers: the bootstrap partitions not marked caught up yet, each
    with its head, and where a marker goes. Of ``admins`` only the offset arithmetic is used
    (``offset_after``, ``compare_offsets``)."""

    __slots__ = ("_admins", "_heads")

    def __init__(
        self, heads: Mapping[SystemStreamPartition, str], admins: Mapping[str, SystemAdmin]
    ) -> None:
        self._heads = dict(heads)
        self._admins = admins

    def __len__(self) -> int:
        return len(self._heads)

    def __contains__(self, ssp: object) -> bool:
        return ssp in self._heads

    def reached(self, ssp: SystemStreamPartition, last: Envelope) -> bool:
        """Whether a batch of ``ssp`` whose last record (as read, before the serdes) is
        ``last`` reaches the head: it ends the partition, or the offset after it is at or past
        the head. False once ``ssp`` is marked (or for a partition that is not waited on)."""
        head = self._heads.get(ssp)
        if head is None:
            return False
        if last.is_end_of_stream:
            return True
        admin = self._admins[ssp.system]
        return admin.compare_offsets(admin.offset_after(last.offset), head) >= 0

    def mark(self, ssp: SystemStreamPartition, envelopes: list[Envelope]) -> None:
        """Put the marker into a batch that reached the head (``reached``), and forget
        ``ssp``: before the first envelope at or past the head, or before an end-of-stream;
        else after the last (the serdes may have dropped the message just before the head)."""
        head = self._heads.pop(ssp)
        compare = self._admins[ssp.system].compare_offsets
        at = len(envelopes)
        for i, env in enumerate(envelopes):
            if env.is_end_of_stream or (env.offset != NO_OFFSET and compare(env.offset, head) >= 0):
                at = i
                break
        envelopes.insert(at, CaughtUp(ssp))

    def passed(self, ssp: SystemStreamPartition, position: str | None) -> bool:
        """Whether the consumer's ``position`` in ``ssp`` (None: unknown) has passed the head,
        when a poll brought nothing; if so ``ssp`` is forgotten, and the caller queues a
        marker alone."""
        head = self._heads.get(ssp)
        if head is None or position is None:
            return False
        if self._admins[ssp.system].compare_offsets(position, head) < 0:
            return False
        del self._heads[ssp]
        return True


class TaskBootstrap:
    """Step 3: one task's bootstrap partitions, and those still behind their head; its other
    inputs are held meanwhile."""

    __slots__ = ("lagging", "partitions", "since")

    def __init__(
        self,
        partitions: Collection[SystemStreamPartition],
        lagging: Collection[SystemStreamPartition],
    ) -> None:
        """``partitions``: every partition of the task's bootstrap streams; ``lagging``: those
        behind their head (a subset)."""
        self.partitions = frozenset(partitions)
        self.lagging = set(lagging) & self.partitions
        self.since = 0.0

    def start(self, inputs: TaskInputs, now: float) -> bool:
        """Hold the task's other inputs while it is behind; True when it is not (its
        bootstrap is done at once). ``now``: when it starts, on the container's clock."""
        self.since = now
        if self.lagging:
            inputs.hold_all_but(self.partitions)
        return not self.lagging

    @property
    def done(self) -> bool:
        return not self.lagging

    def caught_up(self, ssp: SystemStreamPartition) -> bool:
        """``ssp`` reached its head (or ended); True when this made the task's bootstrap done
        (False for a partition that was not behind, or when others still are)."""
        if ssp not in self.lagging:
            return False
        self.lagging.discard(ssp)
        return not self.lagging

    def release(self, inputs: TaskInputs, processed: int, now: float) -> dict[str, int]:
        """Done, with nothing in flight: take messages from every input again. What to log:
        the messages the task processed until now, and how long it took in ms."""
        inputs.release()
        return {"messages": processed, "elapsed_ms": round((now - self.since) * 1000)}


__all__ = ["CaughtUp", "Heads", "TaskBootstrap", "lagging"]
