"""Output side of the container: the router behind the tasks' collectors
(``task_collector.py``).

The router picks each message's partition (explicit, else by ``partition_key``, else by key,
with Kafka's murmur2 partitioner, so a key lands on the same partition whichever engine
routed it), serializes key and message, and hands them to the system's producer. The first
message to a stream looks its partition count up (creating the stream when it is missing);
messages sent meanwhile wait in order behind it. The streams a job declares are looked up at
start-up (``prepare``), so a send to one that cannot be routed fails in the task's own call,
naming the task, the input partition and offset. Under exactly-once, a stream of a system
without the task's transaction is never looked up: its first send fails the job, named
(``send_errors.py``). A key or message its serde refuses fails the send with a SerdeError
naming the stream and which part was refused. ``flush`` returns once everything sent so far
is durable, which is what a commit needs before it writes a checkpoint. Each ``flush`` first
lets the plain output streams take up the partitions added to them, once their producer knows
of them (``route.py``: framed streams keep their count), logging ``output_partitions_added``;
a job without periodic commits has them taken up at the partition-count monitor's checks
instead (``partition_monitor.py``), or it would hash its keys over the old count until it
stopped.

Messages to a framed stream (``samza.intermediate`` or ``samza.framed``) are framed after
serialization, with their origin when the sender gives one (``samzapy.control.origins``);
``broadcast_control`` sends a control record to every partition of a stream,
in order with the messages sent before it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping

import structlog

from samzapy.api.envelope import IncomingMessageEnvelope, OutgoingMessageEnvelope
from samzapy.api.errors import (
    SamzapyError,
    SendFailedError,
    StreamSystemError,
    TaskFencedError,
)
from samzapy.api.system import SystemStream, TaskName
from samzapy.container.route import ControlRecord, Route, Waiting
from samzapy.container.send_errors import (
    RefusingProducer,
    framable,
    out_of_range,
    refused,
    send_failed,
    sent_after_end,
)
from samzapy.control.origins import WriterOrigins, spread
from samzapy.control.wire import frame, with_event_time
from samzapy.system.partitioner import key_bytes, partition_for
from samzapy.system.ports import SystemAdmin, SystemProducer
from samzapy.system.serde import Serde

log = structlog.get_logger("samzapy.collector")

_thread = threading.get_ident


class OutputRouter:
    """Sends outgoing envelopes to the producers of their systems."""

    def __init__(
        self,
        producers: Mapping[str, SystemProducer],
        admins: Mapping[str, SystemAdmin],
        serdes_for: Callable[[SystemStream], tuple[Serde | None, Serde | None]],
        partitions_for_new: Callable[[SystemStream], int],
        on_error: Callable[[BaseException], None],
        *,
        replication_for_new: Callable[[SystemStream], int | None] = lambda ss: None,
        stream_id: Callable[[SystemStream], str] = lambda ss: ss.stream,
        framed: Callable[[SystemStream], bool] = lambda ss: False,
        drop_errors: bool = False,
        on_dropped: Callable[[int], None] = lambda n: None,
        linger_ms: Callable[[SystemStream], int | None] = lambda ss: None,
        origins: Callable[[SystemStream], bool] = lambda ss: True,
        connect: Callable[[str], Awaitable[SystemProducer]] | None = None,
        connectable: Collection[str] = (),
        held: Callable[[], asyncio.Future[None] | None] = lambda: None,
    ) -> None:
        """``connect``: the producer of a system in ``connectable`` that ``producers`` does
        not have yet, connected (``systems.py``): the first send to it waits for that.
        ``held``: while the container's lease is held, what the tasks wait for."""
        self._producers = producers
        self._connect = connect
        self._connectable = connectable
        self._admins = admins
        self._serdes_for = serdes_for
        self._partitions_for_new = partitions_for_new
        self._replication_for_new = replication_for_new
        self._stream_id = stream_id
        self._framed = framed
        self._drop_errors = drop_errors
        self._on_dropped = on_dropped
        self._linger_ms = linger_ms
        self._origins = origins
        self._on_error = on_error
        self._routes: dict[SystemStream, Route] = {}
        self._resolving: set[asyncio.Task[None]] = set()
        self._connecting: set[asyncio.Future[None]] = set()
        self._held = held
        self._error: BaseException | None = None

    async def prepare(self, streams: list[SystemStream]) -> None:
        """Look up (or create) ``streams`` now, so sends to them are routed at once."""
        for stream in streams:
            if stream not in self._routes:
                self._open_route(stream)
        await self.flush()

    def send(
        self,
        envelope: OutgoingMessageEnvelope,
        task: TaskName | None = None,
        writer: WriterOrigins | None = None,
        origin: IncomingMessageEnvelope | None = None,
        ordinal: int = 0,
        floor: str | None = None,
    ) -> None:
        """Route ``envelope``; ``task``, the sender, and ``origin``, the input message whose
        call sent it, are named if it cannot be routed later. ``writer``: the sender's
        origins, ``ordinal``: which send of ``origin``'s this is, ``floor``: the sender's
        oldest message in flight (with a writer, a framed stream's record carries them)."""
        route = self._routes.get(envelope.system_stream)
        if route is None:
            route = self._open_route(envelope.system_stream)
        if route.ended is not None and task in route.ended:
            raise sent_after_end(route.stream, task)
        if route.backlog is not None:
            if route.framed and route.msg_serde is None and envelope.message is not None:
                framable(route.stream, envelope.message)  # fail in the task's call, not later
            route.backlog.append(Waiting(envelope, task, writer, origin, ordinal, floor))
            return
        # The route is ready: partition, serialize and hand over (the hot path, one call).
        partition = envelope.partition
        key = envelope.key
        serialized = False
        if partition is None:
            pkey = envelope.partition_key
            if pkey is None and key is not None and route.key_serde is not None:
                try:  # free unless it raises (one per serde call: the error says which)
                    key = pkey = route.key_serde.to_bytes(key)  # serialized once, for both
                except Exception as exc:
                    raise refused(route.stream, "key", exc) from exc
                serialized = True
            elif pkey is None:
                pkey = key
            if pkey is not None and route.partitions > 1:
                if not serialized:
                    try:
                        pkey = key_bytes(pkey, route.key_serde)
                    except Exception as exc:
                        what = "key" if pkey is key else "partition key"
                        raise refused(route.stream, what, exc) from exc
                if type(pkey) is bytes:
                    partition = route.partition_cache.get(pkey)
                    if partition is None:
                        partition = route.partition_of(pkey)
                else:
                    partition = partition_for(pkey, route.partitions)
            elif pkey is not None:
                partition = 0
            elif writer is not None and origin is not None and route.origins:
                # No key: a replay must still send the record where it went the first time.
                partition = spread(origin.offset, ordinal, route.partitions)
        elif not 0 <= partition < route.partitions:
            raise out_of_range(partition, route.stream, route.partitions, self._stream_id)
        if key is not None and route.key_serde is not None and not serialized:
            try:
                key = route.key_serde.to_bytes(key)
            except Exception as exc:
                raise refused(route.stream, "key", exc) from exc
        message = envelope.message
        if route.msg_serde is not None and message is not None:
            try:
                message = route.msg_serde.to_bytes(message)
            except Exception as exc:
                raise refused(route.stream, "message", exc) from exc
        if route.framed and message is not None:
            if type(message) is not bytes:
                message = framable(route.stream, message)
            if writer is not None and origin is not None and route.origins:
                message = writer.tagger(
                    origin.system_stream_partition, origin.offset, ordinal, message, floor
                )
            else:
                message = frame(message)
            if envelope.timestamp is not None:  # the message's event time, in the frame
                message = with_event_time(message, envelope.timestamp)
        route.producer.send(route.stream, partition, key, message)

    def send_from_thread(
        self,
        envelope: OutgoingMessageEnvelope,
        task: TaskName | None,
        writer: WriterOrigins | None = None,
        origin: IncomingMessageEnvelope | None = None,
        ordinal: int = 0,
        floor: str | None = None,
    ) -> None:
        """A send made on another thread, now on the loop: its error fails the container."""
        try:
            self.send(envelope, task, writer, origin, ordinal, floor)
        except Exception as exc:
            if task is None or isinstance(exc, TaskFencedError):
                self._on_error(exc)
                return
            error = send_failed(exc, task, origin)
            error.__cause__ = exc
            self._on_error(error)

    def broadcast_control(
        self, stream: SystemStream, record: bytes, ended_by: TaskName | None = None
    ) -> None:
        """Send a framed control record to every partition of ``stream``, after everything
        sent to it so far; ``ended_by``: the task whose end-of-stream it is (its later sends
        to ``stream`` fail: its readers may have finished, so no one would read them)."""
        route = self._routes.get(stream)
        if route is None:
            route = self._open_route(stream)
        if ended_by is not None:
            route.ended = (route.ended or set()) | {ended_by}
        if route.backlog is not None:
            route.backlog.append(ControlRecord(record))
            return
        self._broadcast(route, record)

    def forget_ends(self, task: TaskName) -> None:
        """``task``'s instance closed: a later one sends its end-of-stream again."""
        for route in self._routes.values():
            if route.ended is not None:
                route.ended.discard(task)

    def _broadcast(self, route: Route, record: bytes) -> None:
        for partition in range(route.partitions):
            route.producer.send(route.stream, partition, None, record)

    def _open_route(self, stream: SystemStream) -> Route:
        producer = self._producers.get(stream.system)
        if producer is None and stream.system not in self._connectable:
            raise StreamSystemError(
                f"cannot send to {stream}: no system named {stream.system!r} is configured "
                f"(expected systems.{stream.system}.samza.factory)"
            )
        key_serde, msg_serde = self._serdes_for(stream)
        route = Route(
            stream, producer, key_serde, msg_serde, self._framed(stream), self._origins(stream)
        )
        self._routes[stream] = route
        task = asyncio.get_running_loop().create_task(self._resolve(route))
        self._resolving.add(task)
        task.add_done_callback(self._resolving.discard)
        return route

    async def _resolve(self, route: Route) -> None:
        system = route.stream.system
        try:
            if isinstance(route.producer, RefusingProducer):
                # Nothing to look up or create: the first send waiting is refused, named.
                refusal = route.producer.refusal(route.stream)
                first = next((w for w in route.backlog or () if isinstance(w, Waiting)), None)
                if first is None or first.task is None:
                    raise refusal
                raise send_failed(refusal, first.task, first.origin) from refusal
            if route.producer is None:  # a system the job had not used: connect it first
                assert self._connect is not None
                # The tasks wait meanwhile, as they would for the producer's backpressure.
                gate = asyncio.get_running_loop().create_future()
                self._connecting.add(gate)
                try:
                    route.producer = await self._connect(system)
                finally:
                    self._connecting.discard(gate)
                    gate.set_result(None)
            linger_ms = self._linger_ms(route.stream)
            if linger_ms is not None:
                route.producer.linger(route.stream.stream, linger_ms)
            admin = self._admins[system]
            counts = await admin.partition_counts([route.stream.stream])
            count = counts.get(route.stream.stream)
            if count is None:
                count = self._partitions_for_new(route.stream)
                await admin.create_stream(
                    route.stream.stream,
                    count,
                    replication_factor=self._replication_for_new(route.stream),
                )
                log.info("stream_created", stream=str(route.stream), partitions=count)
            route.partitions = count
            route.partition_cache.clear()
            backlog, route.backlog = route.backlog or [], None
            for waiting in backlog:
                if isinstance(waiting, ControlRecord):
                    self._broadcast(route, waiting.record)
                    continue
                try:
                    # The route is ready now.
                    self.send(
                        waiting.envelope,
                        None,
                        waiting.writer,
                        waiting.origin,
                        waiting.ordinal,
                        waiting.floor,
                    )
                except SamzapyError as exc:
                    if waiting.task is None:
                        raise
                    raise send_failed(exc, waiting.task, waiting.origin) from exc
        except BaseException as exc:
            error = (
                exc
                if isinstance(exc, SamzapyError)
                else StreamSystemError(f"cannot send to {route.stream}: {exc}")
            )
            if error is not exc:
                error.__cause__ = exc
            self._error = error
            self._on_error(error)
            if not isinstance(exc, Exception):
                raise

    def backpressure(self) -> asyncio.Future[None] | None:
        """The first producer's request to wait before sending more, if any; or a system
        being connected for a send, or the lease being held."""
        if self._connecting:
            return next(iter(self._connecting))
        if (held := self._held()) is not None:
            return held
        for producer in self._producers.values():
            waiting = producer.backpressure()
            if waiting is not None:
                return waiting
        return None

    def take_up_added_partitions(self) -> None:
        """Let the plain output streams take up the partitions added to them, once their
        producer knows of them (``route.py``): at each flush, and for a job without periodic
        commits, at each check of the partition-count monitor (``partition_monitor.py``)."""
        for route in self._routes.values():
            if (counts := route.take_up_added_partitions()) is not None:
                log.info(
                    "output_partitions_added",
                    stream=str(route.stream),
                    partitions_before=counts[0],
                    partitions_now=counts[1],
                )

    async def flush(self) -> None:
        """Return once every message sent so far is durable; raise the first send error.
        First, the plain output streams take up partitions added to them (``route.py``)."""
        self.take_up_added_partitions()
        # Wait on the unfinished lookups only: awaiting finished ones does not yield to the
        # loop, so the callbacks that forget them would never run.
        while pending := [t for t in self._resolving if not t.done()]:
            await asyncio.wait(pending)
        if self._error is not None:
            raise self._error
        # Every producer, not only those this task sent to: another task's flush may be
        # carrying this task's output right now, and must be waited for.
        for producer in list(self._producers.values()):  # a send may connect one meanwhile
            try:
                await producer.flush()
            except TaskFencedError:
                raise
            except StreamSystemError as exc:
                if not self._drop_errors:
                    raise
                # task.drop.producer.errors: the checkpoint may move past what failed.
                self._on_dropped(lost := exc.messages if isinstance(exc, SendFailedError) else 1)
                log.warning("producer_errors_dropped", messages=lost, error=str(exc))


__all__ = ["OutputRouter"]
