"""Input side of the container: one coroutine per system fills bounded per-partition queues.

Each (task, partition) pair has an ``InputQueue`` with a fixed capacity. A system's consumer
coroutine polls only the partitions whose queues are at most half full, so memory stays
bounded when tasks are slower than their input and fetches stay large; tasks wake it when they
drain a queue to half. The
coroutine applies the key and message serdes, so tasks receive objects, and enforces the
deserialization policy (fail naming the partition and offset, or drop and count).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import SerdeError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.ports import SystemConsumer
from samzapy.system.serde import Serde

log = structlog.get_logger("samzapy.consumers")

# Drops of undeserializable messages are logged at most once per partition per interval.
_DROP_LOG_INTERVAL_S = 60.0


class InputQueue:
    """The bounded queue of one input partition of one task."""

    __slots__ = ("capacity", "ended", "low_mark", "queue", "ssp", "start_offset", "waker")

    def __init__(self, ssp: SystemStreamPartition, capacity: int) -> None:
        self.ssp = ssp
        self.capacity = capacity
        self.low_mark = capacity // 2
        self.queue: deque[IncomingMessageEnvelope] = deque()
        #: Set once the end-of-stream envelope was taken from the queue.
        self.ended = False
        #: For a partition shared by several tasks (broadcast): messages before this offset
        #: were already processed by this task and are skipped.
        self.start_offset: str | None = None
        #: Called when messages arrive (wakes the owning task).
        self.waker: Callable[[], None] = _noop


def _noop() -> None:
    return None


@dataclass(frozen=True, slots=True)
class InputSerdes:
    """How one input partition's raw keys and messages become objects."""

    key: Serde | None
    msg: Serde | None


class SystemConsumers:
    """Runs the consumer coroutine of every input system."""

    def __init__(
        self,
        consumers: Mapping[str, SystemConsumer],
        queues: Mapping[SystemStreamPartition, Sequence[InputQueue]],
        serdes: Mapping[SystemStreamPartition, InputSerdes],
        *,
        compare_offsets: Mapping[str, Callable[[str, str], int]],
        poll_timeout: float,
        drop_deserialization_errors: bool,
        on_dropped: Callable[[SystemStreamPartition], None] = lambda ssp: None,
    ) -> None:
        self._consumers = consumers
        self._queues = queues
        self._serdes = serdes
        self._compare = compare_offsets
        self._poll_timeout = poll_timeout
        self._drop = drop_deserialization_errors
        self._on_dropped = on_dropped
        self._space_waiters: dict[str, asyncio.Future[None]] = {}
        self._drop_logged_at: dict[SystemStreamPartition, float] = {}
        self._ended: set[SystemStreamPartition] = set()

    def space_freed(self) -> None:
        """Wake consumer coroutines waiting for room (called by tasks draining a queue)."""
        waiters = self._space_waiters
        if waiters:
            for fut in waiters.values():
                if not fut.done():
                    fut.set_result(None)
            waiters.clear()

    async def run(self, system: str) -> None:
        """Poll ``system`` until cancelled or until all its partitions ended."""
        consumer = self._consumers[system]
        ssps = [ssp for ssp in self._queues if ssp.system == system]
        loop = asyncio.get_running_loop()
        while True:
            # Poll only partitions whose queues are at most half full, for as many messages as
            # the fullest of them has room for: fetches stay large, and memory bounded.
            wanted: list[SystemStreamPartition] = []
            room = 0
            for ssp in ssps:
                if ssp in self._ended:
                    continue
                queues = self._queues[ssp]
                if all(len(q.queue) <= q.low_mark for q in queues):
                    wanted.append(ssp)
                    free = min(q.capacity - len(q.queue) for q in queues)
                    room = free if room == 0 else min(room, free)
            if not wanted:
                if all(ssp in self._ended for ssp in ssps):
                    return
                fut = loop.create_future()
                self._space_waiters[system] = fut
                await fut
                continue
            batch = await consumer.poll(wanted, room, self._poll_timeout)
            for ssp, envelopes in batch.items():
                if envelopes:
                    self._deliver(ssp, envelopes)

    def _deliver(
        self, ssp: SystemStreamPartition, envelopes: list[IncomingMessageEnvelope]
    ) -> None:
        if envelopes[-1].is_end_of_stream:
            self._ended.add(ssp)
        serdes = self._serdes.get(ssp)
        if serdes is not None and (serdes.key is not None or serdes.msg is not None):
            envelopes = self._deserialize(ssp, envelopes, serdes)
        for q in self._queues[ssp]:
            if q.start_offset is None:
                q.queue.extend(envelopes)
            else:
                self._extend_from(q, envelopes)
            q.waker()

    def _extend_from(self, q: InputQueue, envelopes: list[IncomingMessageEnvelope]) -> None:
        start = q.start_offset
        assert start is not None
        compare = self._compare[q.ssp.system]
        for i, env in enumerate(envelopes):
            if env.is_end_of_stream or compare(env.offset, start) >= 0:
                q.start_offset = None
                q.queue.extend(envelopes[i:])
                return

    def _deserialize(
        self,
        ssp: SystemStreamPartition,
        envelopes: list[IncomingMessageEnvelope],
        serdes: InputSerdes,
    ) -> list[IncomingMessageEnvelope]:
        key_serde, msg_serde = serdes.key, serdes.msg
        out: list[IncomingMessageEnvelope] = []
        for env in envelopes:
            if env.is_end_of_stream:
                out.append(env)
                continue
            try:
                if msg_serde is not None and env.message is not None:
                    env.message = msg_serde.from_bytes(env.message)
                if key_serde is not None and env.key is not None:
                    env.key = key_serde.from_bytes(env.key)
            except Exception as exc:
                if not self._drop:
                    raise SerdeError(
                        f"cannot deserialize the message at offset {env.offset} of {ssp}: {exc}; "
                        "set task.drop.deserialization.errors: true to drop such messages"
                    ) from exc
                self._dropped(ssp, env, exc)
                continue
            out.append(env)
        return out

    def _dropped(self, ssp: SystemStreamPartition, env: IncomingMessageEnvelope, exc: Any) -> None:
        self._on_dropped(ssp)
        now = asyncio.get_running_loop().time()
        last = self._drop_logged_at.get(ssp)
        if last is None or now - last >= _DROP_LOG_INTERVAL_S:
            self._drop_logged_at[ssp] = now
            log.warning(
                "message_dropped",
                ssp=str(ssp),
                offset=env.offset,
                error=str(exc),
                reason="deserialization failed and task.drop.deserialization.errors is true",
            )


__all__ = ["InputQueue", "InputSerdes", "SystemConsumers"]
