"""A task's inputs: one bounded queue per input partition, and the round-robin choice of the
next message among them (Samza's chooser, per task).

The consumers (``consumers.py``) fill the queues; the task's ``TaskInputs`` is the only other
party that changes them: it takes messages in turn, wakes the consumers once it drained a
queue to half, and ends a partition. Besides user messages the queues carry the container's
own ``ControlEnvelope``s, in offset order with the messages around them: a bounded
partition's end-of-stream, and the control messages read from framed streams.

While a task reads its bootstrap inputs to their head, its other queues are *held*: filled
by the consumers as usual, but left out of the choice until ``release`` (``bootstrap.py``).
The choice itself is unchanged, over fewer queues.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable

from samzapy.api.envelope import END_OF_STREAM_OFFSET, IncomingMessageEnvelope
from samzapy.api.system import SystemStreamPartition
from samzapy.control.wire import ControlMessage

#: The offset of a control envelope that stands at no offset of its partition.
NO_OFFSET = ""


class ControlEnvelope:
    """A control message in a task's input queue, at its offset (``NO_OFFSET``: it completes
    none, as the idle watermark messages of ``consumers.py``). ``message`` is None for a bounded
    partition's end-of-stream. Tasks never receive one: the task instance acts on it."""

    __slots__ = ("message", "offset", "system_stream_partition")

    def __init__(
        self, ssp: SystemStreamPartition, offset: str, message: ControlMessage | None
    ) -> None:
        self.system_stream_partition = ssp
        self.offset = offset
        self.message = message

    @classmethod
    def end_of_stream(cls, ssp: SystemStreamPartition) -> ControlEnvelope:
        return cls(ssp, END_OF_STREAM_OFFSET, None)

    @property
    def is_end_of_stream(self) -> bool:
        """A bounded partition's end (a framed stream's reconciled end is decided later)."""
        return self.message is None

    def __repr__(self) -> str:
        return f"ControlEnvelope({self.system_stream_partition}, {self.offset!r}, {self.message})"


#: What an input queue holds.
Envelope = IncomingMessageEnvelope | ControlEnvelope


def _noop() -> None:
    return None


class InputQueue:
    """The bounded queue of one input partition of one task."""

    __slots__ = ("capacity", "ended", "low_mark", "queue", "ssp", "start_offset", "waker")

    def __init__(
        self, ssp: SystemStreamPartition, capacity: int, start_offset: str | None = None
    ) -> None:
        self.ssp = ssp
        self.capacity = capacity
        self.low_mark = capacity // 2
        self.queue: deque[Envelope] = deque()
        #: Set once the partition ended for its task (nothing more is read from it).
        self.ended = False
        #: For a partition shared by several tasks (broadcast): messages before this offset
        #: were already processed by this task and are skipped.
        self.start_offset = start_offset
        #: Called when messages arrive (wakes the owning task).
        self.waker: Callable[[], None] = _noop


class TaskInputs:
    """The queues of one task and the choice among them."""

    __slots__ = ("_active", "_held", "_rr", "_space_freed", "queues")

    def __init__(
        self,
        queues: Iterable[InputQueue],
        *,
        space_freed: Callable[[], None],
        ended: Collection[SystemStreamPartition] = (),
    ) -> None:
        """``space_freed`` wakes the consumers; ``ended``: partitions that had ended before
        (a restored checkpoint says so), which are not read again."""
        self.queues = tuple(queues)
        self._space_freed = space_freed
        for q in self.queues:
            if q.ssp in ended:
                q.ended = True
        self._active = [q for q in self.queues if not q.ended]
        #: Queues left out of the choice until ``release``.
        self._held: list[InputQueue] = []
        self._rr = 0

    def hold_all_but(self, ssps: Collection[SystemStreamPartition]) -> None:
        """Take messages only from ``ssps`` until ``release`` (a queue held before included)."""
        every = [*self._active, *self._held]
        self._held = [q for q in every if q.ssp not in ssps]
        self._active = [q for q in every if q.ssp in ssps]

    def release(self) -> None:
        """Take messages from every partition again, the held ones included."""
        if self._held:
            self._active.extend(self._held)
            self._held = []

    def wake_with(self, waker: Callable[[], None]) -> None:
        """Call ``waker`` whenever messages arrive."""
        for q in self.queues:
            q.waker = waker

    @property
    def all_ended(self) -> bool:
        return not self._active and not self._held

    @property
    def buffered(self) -> int:
        """How many envelopes are waiting."""
        return sum(len(q.queue) for q in self.queues)

    def head(self) -> tuple[SystemStreamPartition, str] | None:
        """The partition and offset of the first message waiting, if any (in a partition
        the choice takes from, before a held one)."""
        for q in (*self._active, *self._held):
            if q.queue:
                return q.ssp, q.queue[0].offset
        return None

    def only(self) -> InputQueue | None:
        """The queue of the one partition still read, when there is exactly one: the
        round-robin choice among one queue is its order, so a slot may take its messages from
        the queue itself (and call ``space_freed`` once it drained it to half)."""
        active = self._active
        return active[0] if len(active) == 1 else None

    def space_freed(self) -> None:
        """Wake the consumers: a queue was drained to half."""
        self._space_freed()

    def choose(self) -> Envelope | None:
        """The next envelope, round-robin over the partitions that have one."""
        active = self._active
        n = len(active)
        if n == 1:
            q = active[0]
            queue = q.queue
            if not queue:
                return None
            env = queue.popleft()
            if len(queue) == q.low_mark:
                self._space_freed()
            return env
        if n == 0:
            return None
        rr = self._rr if self._rr < n else 0
        q = active[rr]
        if not q.queue:  # not the usual case: the partition whose turn it is has none
            for i in range(1, n):
                idx = (rr + i) % n
                if active[idx].queue:
                    rr, q = idx, active[idx]
                    break
            else:
                return None
        self._rr = rr + 1
        env = q.queue.popleft()
        if len(q.queue) == q.low_mark:
            self._space_freed()
        return env

    def end(self, ssp: SystemStreamPartition) -> None:
        """``ssp`` ended for this task: drop what is queued after the end (an upstream's
        duplicates after a reconciled end) and read it no more."""
        for queues in (self._active, self._held):
            for q in queues:
                if q.ssp == ssp:
                    q.ended = True
                    q.queue.clear()
                    queues.remove(q)
                    self._space_freed()  # its consumer may stop polling it
                    return


__all__ = ["ControlEnvelope", "Envelope", "InputQueue", "TaskInputs"]
