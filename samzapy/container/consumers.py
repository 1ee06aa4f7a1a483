"""Input side of the container: one coroutine per system fills bounded per-partition queues.

Each (task, partition) pair has an ``InputQueue`` with a fixed capacity. A system's consumer
coroutine polls only the partitions whose queues are at most half full, for as many messages
as the fullest of them has room for, so memory stays bounded when tasks are slower than their
input and fetches stay large; tasks wake it when they drain a queue to half. A partition is
polled no more once its end-of-stream was delivered or every task reading it has ended it.
The coroutine applies the key and message serdes, so tasks receive objects, and enforces the
deserialization policy (fail naming the partition and offset, or drop and count).

On framed streams it also splits records into user messages and control messages (the
control messages travel in-band, and the consumer side deserializes both), queued as
``ControlEnvelope``s; on streams with ``samza.watermark.lateness.ms`` it derives a watermark
from the timestamps of each batch and queues it after the batch, as if one upstream task had
sent it. With ``samza.watermark.idle.ms`` too, a partition that delivered nothing for that
long (processing time, on the container's clock, checked after each poll) with nothing
queued for its task (a backlog is no idleness) is told idle, with an idle watermark message
(at ``NO_OFFSET``: it completes no offset), and told active again, with its last watermark,
before the next batch it delivers.

On a bootstrap partition some task is behind on, it queues a ``CaughtUp`` marker where the
partition reaches its head (``bootstrap.py``): after the last message before it, or, when a
poll brings nothing, once the consumer's position has passed it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from samzapy.api.descriptors import event_time_ms
from samzapy.api.envelope import IncomingMessageEnvelope, RawRecord, raw_record
from samzapy.api.errors import SerdeError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.container.bootstrap import CaughtUp, Heads
from samzapy.container.drops import DropLog, DroppedEnvelope
from samzapy.container.inputs import NO_OFFSET, ControlEnvelope, Envelope, InputQueue
from samzapy.control.wire import (
    NO_WATERMARK,
    USER_MESSAGE,
    USER_MESSAGE_WITH_FLOOR,
    USER_MESSAGE_WITH_ORIGIN,
    FrameError,
    WatermarkMessage,
    decode_timed,
    decode_timed_fast,
)
from samzapy.system.ports import SystemConsumer
from samzapy.system.serde import Serde

log = structlog.get_logger("samzapy.consumers")


#: The upstream task name of watermarks derived from message timestamps.
EVENT_TIME_TASK = "event-time"


@dataclass(frozen=True, slots=True)
class InputSerdes:
    """How one input partition's raw records become envelopes: key and message serdes,
    whether records are framed, and the lateness of derived watermarks (None: none)."""

    key: Serde | None
    msg: Serde | None
    framed: bool = False
    lateness_ms: int | None = None
    #: ``(key, message) -> ms``: a message's event time for derived watermarks (an
    #: application's ``with_timestamp``); None: the record's timestamp.
    event_time: Any = None
    #: A partition that delivered nothing for this long is idle (None: never).
    idle_ms: int | None = None


class SystemConsumers:
    """Runs the consumer coroutine of every input system."""

    def __init__(
        self,
        consumers: Mapping[str, SystemConsumer],
        queues: Mapping[SystemStreamPartition, list[InputQueue]],
        serdes: Mapping[SystemStreamPartition, InputSerdes],
        *,
        compare_offsets: Mapping[str, Callable[[str, str], int]],
        poll_timeout: float,
        drop_deserialization_errors: bool,
        on_dropped: Callable[[SystemStreamPartition], None] = lambda ssp: None,
        dead_letters: bool = False,
        heads: Heads | None = None,
        now: Callable[[], float] = time.monotonic,
        readers: Mapping[SystemStreamPartition, Sequence[TaskName]] | None = None,
    ) -> None:
        """``dead_letters``: the job has a dead-letter stream: every envelope keeps the record
        as read (``raw``), which a message dropped here carries in its ``DroppedEnvelope``
        for its task to write (queued with or without one: the task counts it processed).
        ``heads``: the bootstrap partitions some task is behind on, each with its head.
        ``now``: monotonic seconds, which the idle timeouts read (the container's clock's).
        ``readers``: the tasks reading each partition (named by a deserialization failure)."""
        self._readers = readers or {}
        self._consumers = consumers
        self._queues = queues
        self._serdes = serdes
        self._compare = compare_offsets
        self._poll_timeout = poll_timeout
        self._drop = drop_deserialization_errors
        self._on_dropped = on_dropped
        self._dead_letters = dead_letters
        self._space_waiters: dict[str, asyncio.Future[None]] = {}
        self._drop_log = DropLog()
        self._ended: set[SystemStreamPartition] = set()
        self._derived: dict[SystemStreamPartition, int] = {}
        #: Partitions with an idle timeout: when each last delivered, and those told idle.
        self._active_at: dict[SystemStreamPartition, float] = {}
        self._idle: set[SystemStreamPartition] = set()
        #: Bootstrap partitions not marked caught up yet (None: none ever).
        self._heads = heads if heads else None
        self._now = now

    def space_freed(self) -> None:
        """Wake consumer coroutines waiting for room (called by tasks draining a queue)."""
        waiters = self._space_waiters
        if waiters:
            for fut in waiters.values():
                if not fut.done():
                    fut.set_result(None)
            waiters.clear()

    def release(self, queues: Iterable[InputQueue]) -> None:
        """A task left: fill its queues no more (a partition no task reads is not polled)."""
        for q in queues:
            shared = self._queues.get(q.ssp)
            if shared is not None and q in shared:
                shared.remove(q)
        self.space_freed()

    async def run(self, system: str) -> None:
        """Poll ``system`` until cancelled or until all its partitions ended."""
        consumer = self._consumers[system]
        ssps = [ssp for ssp in self._queues if ssp.system == system]
        loop = asyncio.get_running_loop()
        timed = [ssp for ssp in ssps if (s := self._serdes.get(ssp)) and s.idle_ms is not None]
        started = self._now()
        for ssp in timed:
            self._active_at.setdefault(ssp, started)
        while True:
            # Poll only partitions whose queues are at most half full, for as many messages as
            # the fullest of them has room for: fetches stay large, and memory bounded.
            wanted: list[SystemStreamPartition] = []
            room = 0
            for ssp in ssps:
                if self._done(ssp):
                    continue
                queues = self._queues[ssp]
                if all(len(q.queue) <= q.low_mark for q in queues):
                    wanted.append(ssp)
                    free = min(q.capacity - len(q.queue) for q in queues)
                    room = free if room == 0 else min(room, free)
            if not wanted:
                if all(self._done(ssp) for ssp in ssps):
                    return
                fut = loop.create_future()
                self._space_waiters[system] = fut
                await fut
                continue
            batch = await consumer.poll(wanted, room, self._poll_timeout)
            for ssp, envelopes in batch.items():
                if envelopes:
                    self._deliver(ssp, envelopes)
            if self._heads:
                await self._past_heads(self._heads, consumer, wanted, batch)
            if timed:
                self._find_idle(timed)

    async def _past_heads(
        self,
        heads: Heads,
        consumer: SystemConsumer,
        polled: list[SystemStreamPartition],
        batch: Mapping[SystemStreamPartition, list[IncomingMessageEnvelope]],
    ) -> None:
        """Mark caught up the bootstrap partitions the poll brought nothing for whose consumer
        has passed their head: what lay before it (transaction markers, aborted records) is
        never returned."""
        for ssp in polled:
            if (
                ssp in heads
                and not batch.get(ssp)
                and heads.passed(ssp, await consumer.position(ssp))
            ):
                self._enqueue(ssp, [CaughtUp(ssp)])

    def _find_idle(self, ssps: list[SystemStreamPartition]) -> None:
        """Tell the partitions that delivered nothing for their idle timeout that they are."""
        now = self._now()
        for ssp in ssps:
            if ssp in self._idle or self._done(ssp):
                continue
            if any(q.queue and not q.ended for q in self._queues[ssp]):
                # Behind, not idle: its task has yet to take what it delivered (a backlog
                # keeps its queue too full to be polled). The timeout runs from then on, as
                # Flink's idleness clock pauses under back-pressure.
                self._active_at[ssp] = now
                continue
            idle_ms = self._serdes[ssp].idle_ms
            assert idle_ms is not None
            if (now - self._active_at[ssp]) * 1000 < idle_ms:
                continue
            self._idle.add(ssp)
            last = self._derived.get(ssp, NO_WATERMARK)
            marker = ControlEnvelope(
                ssp, NO_OFFSET, WatermarkMessage(EVENT_TIME_TASK, 1, last, True)
            )
            for q in self._queues[ssp]:
                if q.start_offset is None:
                    q.queue.append(marker)
                    q.waker()

    def _done(self, ssp: SystemStreamPartition) -> bool:
        """Nothing more to read: its end-of-stream was delivered, or every task ended it (a
        framed partition whose end-of-stream its tasks reconciled)."""
        return ssp in self._ended or all(q.ended for q in self._queues[ssp])

    def _deliver(self, ssp: SystemStreamPartition, records: list[IncomingMessageEnvelope]) -> None:
        heads = self._heads
        reached = heads is not None and heads.reached(ssp, records[-1])
        if self._dead_letters:
            _keep_raw(records)
        envelopes: list[Envelope] = list(records)
        if records[-1].is_end_of_stream:
            self._ended.add(ssp)
            envelopes[-1] = ControlEnvelope.end_of_stream(ssp)
        serdes = self._serdes.get(ssp)
        if serdes is not None:
            if serdes.framed or serdes.key is not None or serdes.msg is not None:
                envelopes = self._deserialize(ssp, envelopes, serdes)
            if serdes.idle_ms is not None:
                self._active(ssp, envelopes)
            if serdes.lateness_ms is not None:
                self._derive_watermark(ssp, envelopes, serdes.lateness_ms, serdes.event_time)
        if reached:
            assert heads is not None
            heads.mark(ssp, envelopes)
        if envelopes:
            self._enqueue(ssp, envelopes)

    def _enqueue(self, ssp: SystemStreamPartition, envelopes: list[Envelope]) -> None:
        for q in self._queues[ssp]:
            if q.start_offset is None:
                q.queue.extend(envelopes)
            else:
                self._extend_from(q, envelopes)
            q.waker()

    def _active(self, ssp: SystemStreamPartition, envelopes: list[Envelope]) -> None:
        """``ssp`` delivered: an idle partition is told active again, before the batch."""
        self._active_at[ssp] = self._now()
        if ssp in self._idle:
            self._idle.discard(ssp)
            last = self._derived.get(ssp)
            if last is not None:  # else the batch's own watermark ends the idleness
                message = WatermarkMessage(EVENT_TIME_TASK, 1, last)
                envelopes.insert(0, ControlEnvelope(ssp, NO_OFFSET, message))

    def _extend_from(self, q: InputQueue, envelopes: list[Envelope]) -> None:
        start = q.start_offset
        assert start is not None
        compare = self._compare[q.ssp.system]
        for i, env in enumerate(envelopes):
            if env.offset == NO_OFFSET:  # a marker: the queue has not started
                if type(env) is CaughtUp:
                    # The head was reached with no message of this task's before it (its
                    # start fell among offsets the consumer passed without a message).
                    q.queue.append(env)
                continue
            if env.is_end_of_stream or compare(env.offset, start) >= 0:
                q.start_offset = None
                q.queue.extend(envelopes[i:])
                return

    def _deserialize(
        self,
        ssp: SystemStreamPartition,
        envelopes: list[Envelope],
        serdes: InputSerdes,
    ) -> list[Envelope]:
        """Apply the serdes; on a framed stream first split off the control messages."""
        key_serde, msg_serde, framed = serdes.key, serdes.msg, serdes.framed
        out: list[Envelope] = []
        for env in envelopes:
            if isinstance(env, ControlEnvelope):
                out.append(env)
                continue
            try:
                message = env.message
                if framed and message is not None:
                    kind, decoded, event_time = decode_timed_fast(message)
                    if event_time is not None:
                        env.timestamp = event_time  # the writer's message's event time
                    if kind >= USER_MESSAGE_WITH_ORIGIN:  # 3 (or 5) or 4: with its origin
                        # The task's reader drops it if applied already (origins.py).
                        env.origin = message
                    elif kind != USER_MESSAGE:
                        out.append(ControlEnvelope(ssp, env.offset, decoded))
                        continue
                    message = decoded
                if msg_serde is not None and message is not None:
                    message = msg_serde.from_bytes(message)
                env.message = message
                if key_serde is not None and env.key is not None:
                    env.key = key_serde.from_bytes(env.key)
            except Exception as exc:
                if not self._drop:
                    what = "framed record" if isinstance(exc, FrameError) else "message"
                    hint = _framing_hint(framed, env.message, msg_serde, ssp)
                    readers = self._readers.get(ssp, ())
                    raise SerdeError(
                        f"cannot deserialize the {what} at offset {env.offset} of {ssp}: {exc}"
                        f"{hint}; set task.drop.deserialization.errors: true to drop such records",
                        ssp=ssp,
                        offset=env.offset,
                        task_name=readers[0] if len(readers) == 1 else None,
                    ) from exc
                self._dropped(ssp, env, exc)
                out.append(DroppedEnvelope(ssp, env.offset, raw_record(env), exc))
                continue
            out.append(env)
        return out

    def _derive_watermark(
        self,
        ssp: SystemStreamPartition,
        envelopes: list[Envelope],
        lateness: int,
        event_time: Callable[[Any, Any], Any] | None,
    ) -> None:
        """Queue the watermark the batch's largest timestamp gives, after its last message,
        and, before a message whose time is below the watermark the messages before it give,
        that watermark: the watermark a task passes on (an intermediate stream's readers')
        then moves as if with each message, so whether a message is late downstream does not
        depend on how the input was batched (in order, no message is behind: one watermark a
        batch). With ``event_time(key, message)`` each message's time is its result, set as
        the envelope's ``timestamp`` (None when it cannot time the message: left out here,
        the application's input fails the task when it calls the function again)."""
        sent = self._derived.get(ssp)
        top: int | None = None
        last = -1
        behind: list[tuple[int, int]] = []  # (index, watermark before it) of a late message
        for i, env in enumerate(envelopes):
            if type(env) is IncomingMessageEnvelope:
                if event_time is None:
                    ts = env.timestamp
                else:  # kept on the envelope: the application reads it there
                    ts = env.timestamp = _time_of(event_time, env)
                if ts is not None:
                    if top is None or ts > top:
                        top = ts
                    elif ts < top - lateness and (sent is None or top - lateness > sent):
                        sent = top - lateness
                        behind.append((i, sent))
                last = i
        if top is None:
            return
        watermark = top - lateness
        if sent is None or watermark > sent:
            marker = WatermarkMessage(EVENT_TIME_TASK, 1, watermark)
            envelopes.insert(last + 1, ControlEnvelope(ssp, envelopes[last].offset, marker))
            sent = watermark
        self._derived[ssp] = sent
        for i, before in reversed(behind):  # from the end: the indexes stay right
            marker = WatermarkMessage(EVENT_TIME_TASK, 1, before)
            envelopes.insert(i, ControlEnvelope(ssp, envelopes[i - 1].offset, marker))

    def _dropped(self, ssp: SystemStreamPartition, env: IncomingMessageEnvelope, exc: Any) -> None:
        self._on_dropped(ssp)
        if (not_logged := self._drop_log.due(ssp)) is not None:
            log.warning(
                "message_dropped",
                ssp=str(ssp),
                offset=env.offset,
                error=str(exc),
                not_logged=not_logged,
                reason="deserialization failed and task.drop.deserialization.errors is true",
            )


def _time_of(event_time: Callable[[Any, Any], Any], env: IncomingMessageEnvelope) -> int | None:
    try:
        return event_time_ms(event_time(env.key, env.message))
    except Exception:
        return None


def _keep_raw(records: list[IncomingMessageEnvelope]) -> None:
    """Keep each record as read, before the serdes, where its system did not."""
    for env in records:
        if not hasattr(env, "raw"):
            env.raw = RawRecord(env.key, env.message)


def _framing_hint(framed: bool, record: Any, serde: Any, ssp: SystemStreamPartition) -> str:
    """What a record that failed to deserialize looks like when it would have been read the
    other way: a samzapy frame around what the serde reads on a plain stream (a topic that
    samzapy.spark's write_stream or a job's intermediate stream wrote), or a plain record
    the serde reads on a framed one. Else nothing: the remedy is the serde or the drop."""
    try:
        if not framed:
            kind, payload, _ = decode_timed(record)
            user = kind in (USER_MESSAGE, USER_MESSAGE_WITH_ORIGIN, USER_MESSAGE_WITH_FLOOR)
            if user and serde is not None:
                serde.from_bytes(payload)
            return (
                "; the record is a samzapy frame around such a message: read the stream "
                f"framed (streams.{ssp.stream}.samza.framed: true, or with_framed() on an "
                "application's input descriptor)"
            )
        if serde is None or not isinstance(record, bytes):
            return ""
        serde.from_bytes(record)
    except Exception:
        return ""
    return (
        "; the record reads as a plain message: a framed stream holds samzapy's frames "
        "only, so something other than a samzapy job wrote it, or the stream is plain"
    )


__all__ = ["EVENT_TIME_TASK", "InputSerdes", "SystemConsumers"]
