"""The slots: the coroutines that take a task's messages and run its calls (the hot path).

A slot is one permit of a task: a sync task has one, an async task ``task.max.concurrency``.
A slot loops: while nothing is due, take the next envelope, invoke the task and await the
result inline, so no asyncio task is created per message and invocations happen in offset
order per partition. Once something is due (``SlotState.due`` is nonzero) it stops taking
messages and goes to the task's barrier, which runs what is due when nothing is in flight and
says whether to go on.

The three slots repeat their few lines of preamble (barrier, backpressure, choose) on purpose:
a shared coroutine would cost a coroutine per message. Each binds what it uses to locals once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import time
import types
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samzapy.api.context import MessageCollector, TaskCoordinator
from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import OperatorError, TaskError, WatermarkFiringError
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.container.clock import Clock, cancelled_here
from samzapy.container.drops import DroppedEnvelope, Drops, NotAwaitableError
from samzapy.container.inputs import ControlEnvelope, Envelope, TaskInputs
from samzapy.container.task_collector import MessageInProgress
from samzapy.metrics.registry import Timer

#: How many messages an async task's slot starts, calls that complete at once, before it
#: yields to the other tasks.
ASYNC_TURN = 32
#: A sync task's turn on the loop thread: it yields to the other tasks (and the consumers,
#: the producers, the timers) after this many messages or this long, whichever comes first.
#: Each yield is a turn of the event loop, which polls its sockets: a few microseconds, as
#: much as a message of a light task costs.
TURN_MESSAGES = 256
TURN_NS = 1_000_000


class SlotState:
    """What a task's slots and its barriers share: what is due (bits; nonzero sends the
    slots to the barrier), calls in flight, messages processed, and the wake-up of slots
    waiting for input or for a barrier to end, and the last call a pooled sync task handed to
    the thread pool (once its slot is cancelled, it may still run: ``TaskInstance.pooled``)."""

    __slots__ = ("due", "inflight", "pooled", "processed", "waiter")

    def __init__(self, due: int = 0) -> None:
        self.due = due
        self.inflight = 0
        self.processed = 0
        self.waiter: asyncio.Future[None] | None = None
        self.pooled: concurrent.futures.Future[Any] | None = None

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            waiter = self.waiter = asyncio.get_running_loop().create_future()
        await waiter


@dataclass(frozen=True, slots=True)
class SlotContext:
    """A task's collaborators, as its slots use them."""

    name: TaskName
    state: SlotState
    inputs: TaskInputs
    trackers: dict[SystemStreamPartition, OffsetTracker]
    collector: MessageCollector
    coordinator: TaskCoordinator
    latency: Timer
    clock: Clock
    #: The producers' request to wait before sending more, if any.
    backpressure: Callable[[], asyncio.Future[None] | None]
    #: Run what is due; False: the slot exits.
    barrier: Callable[[], Awaitable[bool]]
    on_control: Callable[[ControlEnvelope], None]
    fail: Callable[[BaseException], None]
    #: Ends the store iterators a call left open (None: the task has no stores).
    close_iterators: Callable[[], object] | None
    executor: concurrent.futures.Executor | None
    #: Note when each async call started (callback timeouts are on).
    track_call_starts: bool
    #: What to do with a message the task cannot process (None: fail the job).
    drops: Drops | None = None
    #: Set to the message of each call, for the sends it makes (``task_collector.py``).
    current: MessageInProgress = field(default_factory=MessageInProgress)
    #: Whether a record read with its origin is new (``ReaderOrigins.admit``): a copy is
    #: not processed (the sync slot on the loop thread asks; the others' calls are wrapped).
    admit: Callable[[SystemStreamPartition, bytes], bool] = lambda ssp, record: True
    #: The resumed partitions whose epoch the task's first message of each settles, and the
    #: call that settles it (``WriterOrigins.unresolved`` and ``observe``; the sync slot on
    #: the loop thread calls it, the others' calls are wrapped).
    unresolved: Mapping[SystemStreamPartition, int] = field(default_factory=dict)
    observe: Callable[[SystemStreamPartition, str], None] = lambda ssp, offset: None


def _failed(
    name: TaskName, exc: BaseException, env: IncomingMessageEnvelope, what: str
) -> TaskError:
    ssp = env.system_stream_partition
    operator = None
    if isinstance(exc, OperatorError):
        # An application's operator: name it, and keep the function's own error as the cause.
        operator = exc.op_id
        text = f"{exc}: {exc.__cause__!r}" if exc.__cause__ is not None else str(exc)
        exc = exc.__cause__ if isinstance(exc.__cause__, BaseException) else exc
    else:
        text = repr(exc)
    error = TaskError(
        f"{what} of task {name!r} failed on {ssp} at offset {env.offset}: {text}",
        task_name=name,
        ssp=ssp,
        offset=env.offset,
        operator=operator,
    )
    error.__cause__ = exc
    return error


def _process_failed(
    ctx: SlotContext, exc: BaseException, env: IncomingMessageEnvelope, what: str
) -> BaseException | None:
    """The error the task fails with, or None when the message was dropped (never what a
    pane that the message's watermark fired failed on: not the message's failure)."""
    error = _failed(ctx.name, exc, env, what)
    if ctx.drops is None or isinstance(exc, WatermarkFiringError):
        return error
    return ctx.drops.process_failed(error, env)


def _passed(ctx: SlotContext, env: DroppedEnvelope) -> BaseException | None:
    """A message the consumer dropped: write its dead letter, then count its offset as
    processed. The error the task fails with, or None."""
    error = ctx.drops.deserialization_failed(env) if ctx.drops is not None else None
    if error is None:
        tracker = ctx.trackers[env.system_stream_partition]
        tracker.completed(tracker.invoked(env.offset))
    return error


async def inline_slot(ctx: SlotContext, process: Callable[..., Any]) -> None:
    """``_inline_slot``; whatever ends it, no message is current any more (a send from
    ``close`` carries no origin)."""
    try:
        await _inline_slot(ctx, process)
    finally:
        ctx.current.env = None


async def _inline_slot(ctx: SlotContext, process: Callable[..., Any]) -> None:
    """A sync task on the loop thread: process up to TURN_MESSAGES messages, for up to
    TURN_NS, then yield.

    The bookkeeping is per turn: the offsets processed are noted, the latencies recorded and
    the count added once the turn ends (a barrier never runs inside a turn, so a commit sees
    the same offsets). A task reading one partition takes its turn straight from that queue;
    one reading several takes Samza's round-robin, message by message."""
    state = ctx.state
    collector, coordinator = ctx.collector, ctx.coordinator
    trackers = ctx.trackers
    record_all = ctx.latency.update_all_ns
    backpressure = ctx.backpressure
    barrier = ctx.barrier
    inputs = ctx.inputs
    choose = inputs.choose
    on_control = ctx.on_control
    close_iterators = ctx.close_iterators
    current = ctx.current
    admit, unresolved, observe = ctx.admit, ctx.unresolved, ctx.observe
    clock = time.perf_counter_ns
    durations: list[int] = []
    last: dict[SystemStreamPartition, str] = {}  # the offsets processed in this turn
    while True:
        if state.due and not await barrier():
            return
        if state.due:
            continue
        if (held := backpressure()) is not None:
            await held
            continue
        single = inputs.only()
        queue = single.queue if single is not None else None
        before = len(queue) if queue is not None else 0
        env: Envelope | None = None
        done: IncomingMessageEnvelope | None = None  # one partition: the last processed
        failure: BaseException | None = None
        n = 0
        t = clock()
        ends = t + TURN_NS
        while n < TURN_MESSAGES and t < ends:
            env = (queue.popleft() if queue else None) if queue is not None else choose()
            if env is None:
                break
            if isinstance(env, ControlEnvelope):
                # In offset order with the messages: note theirs before the control's own.
                if done is not None:
                    last[done.system_stream_partition] = done.offset
                    done = None
                for ssp, offset in last.items():
                    trackers[ssp].last_processed = offset
                last.clear()
                current.env = None  # what on_control sends is for no one message
                if type(env) is not DroppedEnvelope:
                    on_control(env)
                elif (failure := _passed(ctx, env)) is not None:
                    break
                if state.due:
                    break
                t = clock()
                continue
            current.env = env
            try:
                if unresolved:  # a resumed partition's first message settles its epoch
                    observe(env.system_stream_partition, env.offset)
                # A copy of a record already applied is skipped: it counts as processed.
                if (origin := env.origin) is None or admit(env.system_stream_partition, origin):
                    if (result := process(env, collector, coordinator)) is not None:
                        _returned(result)
                    if close_iterators is not None:
                        close_iterators()
            except BaseException as exc:  # the task's own: CancelledError, SystemExit too
                if (failure := _process_failed(ctx, exc, env, "process()")) is not None:
                    break
                if close_iterators is not None:  # dropped: it counts as processed
                    close_iterators()
            now = clock()
            durations.append(now - t)
            t = now
            if queue is None:
                last[env.system_stream_partition] = env.offset
            else:
                done = env
            n += 1
            if state.due:
                break
        # The turn's bookkeeping.
        current.env = None  # what a barrier sends is for no one message
        if done is not None:
            last[done.system_stream_partition] = done.offset
        if last:
            for ssp, offset in last.items():
                trackers[ssp].last_processed = offset
            last.clear()
        if durations:
            record_all(durations)
            durations.clear()
        state.processed += n
        if single is not None and before > single.low_mark >= len(single.queue):
            inputs.space_freed()
        if failure is not None:
            ctx.fail(failure)
            return
        if env is None:
            await state.wait()
        elif not state.due:
            await asyncio.sleep(0)


def _returned(result: Any) -> None:
    """A sync ``process`` returned ``result``: an awaitable is an error (nothing would run
    it, and its message would count as processed); anything else is ignored."""
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()  # no "never awaited" warning on top of the error
        raise TypeError(
            "process returned an awaitable, which nothing would run: a StreamTask's process "
            "is synchronous (subclass AsyncStreamTask and define process_async)"
        )


async def pool_slot(ctx: SlotContext, process: Callable[..., Any]) -> None:
    """A sync task on the thread pool: one call at a time for this task."""
    state = ctx.state
    collector, coordinator = ctx.collector, ctx.coordinator
    backpressure = ctx.backpressure
    choose = ctx.inputs.choose
    clock = time.perf_counter_ns
    while True:
        if state.due and not await ctx.barrier():
            return
        if state.due:
            continue
        if (held := backpressure()) is not None:
            await held
            continue
        env = choose()
        if env is None:
            await state.wait()
            continue
        if isinstance(env, ControlEnvelope):
            if type(env) is not DroppedEnvelope:
                ctx.on_control(env)
            elif (failure := _passed(ctx, env)) is not None:
                ctx.fail(failure)
                return
            continue
        state.inflight = 1
        t0 = clock()
        ctx.current.env = env
        try:
            # The call itself, not run_in_executor's wrapper: a cancelled slot leaves it running.
            assert ctx.executor is not None
            call = state.pooled = ctx.executor.submit(process, env, collector, coordinator)
            result = await asyncio.wrap_future(call)
            if result is not None:
                _returned(result)
        except BaseException as exc:
            if cancelled_here(exc):
                # Given up (a stop), it may still run: its message stays in flight, so
                # that no commit counts it past (the consumer group's position).
                ctx.trackers[env.system_stream_partition].invoked(env.offset)
                raise
            if (failure := _process_failed(ctx, exc, env, "process()")) is not None:
                ctx.fail(failure)
                return
        finally:
            state.inflight = 0
            ctx.current.env = None
        ctx.latency.update_ns(clock() - t0)
        state.processed += 1
        ctx.trackers[env.system_stream_partition].last_processed = env.offset
        if ctx.close_iterators is not None:
            ctx.close_iterators()


async def async_slot(ctx: SlotContext, process_async: Callable[..., Any]) -> None:
    """One permit of an async task: invoke in order, await inline, complete."""
    state = ctx.state
    collector, coordinator = ctx.collector, ctx.coordinator
    trackers = ctx.trackers
    record = ctx.latency.update_ns
    clock = time.perf_counter_ns
    now = ctx.clock.now if ctx.track_call_starts else None
    backpressure = ctx.backpressure
    barrier = ctx.barrier
    choose = ctx.inputs.choose
    close_iterators = ctx.close_iterators
    calls, me = ctx.current.calls, asyncio.current_task()
    turn = 0
    while True:
        if state.due and not await barrier():
            return
        if state.due:
            continue
        if (held := backpressure()) is not None:
            await held
            continue
        env = choose()
        if env is None:
            await state.wait()
            continue
        if isinstance(env, ControlEnvelope):
            if type(env) is not DroppedEnvelope:
                ctx.on_control(env)
            elif (failure := _passed(ctx, env)) is not None:
                ctx.fail(failure)
                return
            continue
        tracker = trackers[env.system_stream_partition]
        entry = tracker.invoked(env.offset)
        if now is not None:
            entry.started = now()
        state.inflight += 1
        t0 = clock()
        calls[me] = env  # for the sends this slot's task makes during the call
        try:
            result = process_async(env, collector, coordinator)
            if type(result) is types.CoroutineType or isinstance(result, asyncio.Future):
                await result
            elif isinstance(result, concurrent.futures.Future):
                if result.done():
                    result.result()
                else:
                    await asyncio.wrap_future(result)
            elif inspect.isawaitable(result):
                await result
            else:
                raise NotAwaitableError(
                    f"process_async must return an awaitable, got {type(result).__name__}"
                )
        except BaseException as exc:  # the task's own: CancelledError, SystemExit too
            if cancelled_here(exc):
                raise
            if (failure := _process_failed(ctx, exc, env, "process_async()")) is not None:
                state.inflight -= 1
                ctx.fail(failure)
                return
        calls[me] = None
        state.inflight -= 1
        tracker.completed(entry)
        record(clock() - t0)
        state.processed += 1
        if state.inflight == 0:
            if close_iterators is not None:
                close_iterators()
            if state.due:
                state.wake()
        # Awaitables that complete at once never suspend the slot: yield now and then so
        # other tasks and the consumers get their turn.
        turn += 1
        if turn >= ASYNC_TURN:
            turn = 0
            await asyncio.sleep(0)


__all__ = [
    "ASYNC_TURN",
    "TURN_MESSAGES",
    "TURN_NS",
    "SlotContext",
    "SlotState",
    "async_slot",
    "inline_slot",
    "pool_slot",
]
