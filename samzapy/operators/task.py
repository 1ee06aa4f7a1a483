"""The operator task: one task's copy of an application's graph (Samza's StreamOperatorTask).

The container runs it like any task class: one instance per task, ``process`` (or
``process_async`` when the graph has a ``flat_map_async`` or calls a remote table) per
message, in offset order per partition, with every guarantee the container gives task
classes. A message is processed once every operator it reached is done with it.

``OperatorTaskFactory`` builds the instances: each gets its own operators, tables and copy of
every function object (``functions.py``). ``init`` opens the tables, calls the functions'
``init(context)`` once, in graph order, and registers the operators' metrics; ``close``
calls their ``close()`` and closes the tables.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from samzapy.api.context import MessageCollector, TaskContext, TaskCoordinator
from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import OperatorError
from samzapy.api.graph import ApplicationGraph, OperatorSpec
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.api.task import (
    AsyncStreamTask,
    ClosableTask,
    InitableTask,
    StreamTask,
)
from samzapy.operators import impl, sends
from samzapy.operators.event_time import EventClock, Watermarks, sources
from samzapy.operators.functions import TaskFunction
from samzapy.operators.fusion import Entry, fuse, fuse_input
from samzapy.operators.hooks import WindowHooks
from samzapy.operators.impl import InputOperator, OperatorImpl
from samzapy.operators.joins import SendToTableOperator, StreamTableJoinOperator
from samzapy.operators.plan_document import AppPlan
from samzapy.operators.sends import TaskIO
from samzapy.operators.sessions import SessionWindowOperator
from samzapy.operators.stream_joins import JoinOperator
from samzapy.operators.table_plan import check_copartitioned, is_asynchronous, is_remote
from samzapy.operators.task_tables import AppTaskContext, TaskTables
from samzapy.operators.tumbling import TumblingWindowOperator
from samzapy.operators.windows import WindowOperator


class OperatorGraph:
    """One task's operators: the input operator of each stream, every operator in graph
    order, the functions with their hooks, and the task's collector and coordinator."""

    def __init__(
        self,
        graph: ApplicationGraph,
        streams: dict[str, SystemStream],
        event_time_joins: frozenset[str] = frozenset(),
        held_windows: frozenset[str] = frozenset(),
    ) -> None:
        self.io = TaskIO()
        self.entries: dict[SystemStream, InputOperator] = {}
        self.operators: list[OperatorImpl] = []
        self.functions: list[TaskFunction] = []
        self.windows: list[WindowOperator] = []
        self.joins: list[JoinOperator] = []
        #: The operators that use a table (``send_to(table)``, stream-table joins).
        self.table_users: list[SendToTableOperator | StreamTableJoinOperator] = []
        self.asynchronous = is_asynchronous(graph)
        self._event_time_joins = event_time_joins
        self._held_windows = held_windows  # they follow no watermark: end-of-stream only
        #: What panes sent to asynchronous operators still owe (``windows.gather_pending``).
        self.pending: list[Any] = []
        #: Event time: kept when a window or a join runs in it (the clock, the watermarks).
        self.event_time = bool(event_time_joins) or any(
            spec.kind == "window" and spec.settings["window"].event_time for spec in graph.operators
        )
        self.clock = EventClock()
        self.watermarks = Watermarks(deferred=self.asynchronous)
        self._timestamp_fns: dict[str, Callable[[Any], Any]] = {}
        self._memo: dict[int, Any] = {}
        self.tables = TaskTables(graph, self._memo)
        built: dict[int, OperatorImpl] = {}
        inputs_of: dict[int, SystemStream] = {}
        readers = [s.reader for s in graph.intermediates if s.reader is not None]
        for spec in [*graph.inputs.values(), *readers, *graph.operators]:
            op = self._build(spec, streams)
            built[id(spec)] = op
            self.operators.append(op)
            if isinstance(op, InputOperator):
                inputs_of[id(spec)] = op.stream
            if isinstance(op, JoinOperator):  # each input to its own side
                built[id(spec.upstream[0])].connect(op.left)
                built[id(spec.upstream[1])].connect(op.right)
                continue
            for upstream in spec.upstream:
                built[id(upstream)].connect(op)
        for spec in graph.operators:  # each window ends once the streams that reach it did
            if isinstance(op := built[id(spec)], WindowOperator):
                self.watermarks.add_end(op.end_of_stream, sources(spec, inputs_of))
        if self.event_time:
            self._keep_event_time(graph, built, inputs_of)
        for op in self.operators:
            if op.downstream:
                op.emit = fuse(op)

    def _keep_event_time(
        self,
        graph: ApplicationGraph,
        built: dict[int, OperatorImpl],
        inputs_of: dict[int, SystemStream],
    ) -> None:
        """Sends carry the message's time; each event-time window waits on the watermarks of
        the input streams that reach it; inputs with ``with_watermarks`` generate theirs."""
        for op in self.operators:
            if isinstance(op, sends.SendingOperator | impl.FlatMapAsyncOperator) or (
                isinstance(op, StreamTableJoinOperator) and op.asynchronous
            ):
                op.clock = self.clock
        for spec in graph.inputs.values():
            descriptor = spec.settings["descriptor"]
            if descriptor.watermarks is not None:
                self.watermarks.generate(inputs_of[id(spec)], *descriptor.watermarks)
            if descriptor.timestamp_fn is not None:
                self._timestamp_fns[spec.op_id] = descriptor.timestamp_fn
        for spec in graph.operators:
            op = built[id(spec)]
            held = spec.op_id in self._held_windows
            if isinstance(op, WindowOperator) and op.event_time and not held:
                self.watermarks.add_window(op.advance, sources(spec, inputs_of))
            if isinstance(op, JoinOperator) and op.op_id in self._event_time_joins:
                op.event_time, op.clock = True, self.clock
                self.watermarks.add_window(op.advance, sources(spec, inputs_of))

    def fuse_inputs(self, bind: Callable[[Any, Any], None]) -> dict[str, Entry]:
        """Each input operator's fused chain, by its id (``fusion.fuse_input``)."""
        if not self.event_time:
            return {entry.op_id: fuse_input(entry, bind) for entry in self.entries.values()}
        return {
            entry.op_id: fuse_input(
                entry,
                bind,
                self.clock,
                self._timestamp_fns.get(entry.op_id),
                self.watermarks.observer(entry.stream),
                # with_watermarks: the container derives watermarks with with_timestamp's
                timed_by_consumer=entry.stream in self.watermarks.generated,
            )
            for entry in self.entries.values()
        }

    def _function(self, spec: OperatorSpec, fn: Any, what: str = "function") -> Callable[..., Any]:
        return self._copy(spec, fn, what).call

    def _copy(self, spec: OperatorSpec, fn: Any, what: str) -> TaskFunction:
        function = TaskFunction(spec, fn, what, self._memo)
        if all(f.target is not function.target for f in self.functions):
            self.functions.append(function)  # its init and close run once per task
        return function

    def _build(self, spec: OperatorSpec, streams: dict[str, SystemStream]) -> OperatorImpl:
        kind, op_id, s = spec.kind, spec.op_id, spec.settings
        if kind == "input":
            intermediate = s.get("intermediate")
            if intermediate is not None:
                stream = streams[f"{intermediate.kind}:{intermediate.op_id}"]
                keyed = intermediate.kind == "partition_by" or intermediate.keyed
            else:
                stream = streams[op_id]
                keyed = s["descriptor"].keyed
            entry = InputOperator(op_id, stream, keyed)
            self.entries[stream] = entry
            return entry
        if kind == "map":
            return impl.MapOperator(op_id, self._function(spec, spec.fn))
        if kind == "filter":
            return impl.FilterOperator(op_id, self._function(spec, spec.fn))
        if kind == "flat_map":
            return impl.FlatMapOperator(op_id, self._function(spec, spec.fn))
        if kind == "flat_map_async":
            return impl.FlatMapAsyncOperator(op_id, self._function(spec, spec.fn))
        if kind == "sink":
            return sends.SinkOperator(op_id, self._function(spec, spec.fn), self.io)
        if kind == "send_to":
            return sends.SendToOperator(op_id, streams[s["output"].stream_id])
        if kind == "merge":
            return impl.MergeOperator(op_id)
        if kind == "partition_by":
            return sends.PartitionByOperator(
                op_id,
                streams[f"partition_by:{op_id}"],
                self._function(spec, s["key_fn"], "key function"),
                self._function(spec, s["value_fn"], "value function"),
                repr(s["stream"].serde),
            )
        if kind == "window":
            window = s["window"]
            functions = {
                name: None if fn is None else self._function(spec, fn, name.replace("_", " "))
                for name, fn in (
                    ("key_fn", window.key_fn),
                    ("initial_value", window.initial_value),
                    ("aggregator", window.aggregator),
                    ("merger", window.merger),
                )
            }
            late = window.late_output
            kind_of = SessionWindowOperator if window.kind == "session" else TumblingWindowOperator
            op = kind_of(
                op_id,
                window,
                functions,
                self.clock,
                None if late is None else streams[late.stream_id],
                self.pending,
            )
            self.windows.append(op)
            return op
        if kind in ("send_to_table", "stream_table_join"):
            table = s["table"]
            if kind == "send_to_table":
                user: SendToTableOperator | StreamTableJoinOperator = SendToTableOperator(
                    op_id, table.table_id, is_remote(table)
                )
            else:
                join_fn = self._copy(spec, spec.fn, "join function").target
                user = StreamTableJoinOperator(op_id, table.table_id, join_fn, is_remote(table))
            self.table_users.append(user)
            return user
        if kind == "join":
            join_fn = self._copy(spec, spec.fn, "join function").target
            join = JoinOperator(op_id, join_fn, s["serdes"], s["ttl_ms"])
            self.joins.append(join)
            return join
        if kind == "broadcast":
            serde = s["stream"].serde
            label = serde if isinstance(serde, str | None) else type(serde).__qualname__
            stream = streams[f"broadcast:{op_id}"]
            return sends.BroadcastOperator(op_id, stream, str(label), s["stream"].keyed)
        raise AssertionError(f"unknown operator kind {kind!r}")


class _OperatorTask(InitableTask, ClosableTask, WindowHooks):
    """What the sync and async operator tasks share: routing, init, close, metrics, and the
    hooks windows fire in (``hooks.py``)."""

    def __init__(self, graph: OperatorGraph) -> None:
        self.graph = graph
        self._io = graph.io
        #: Each input operator's fused chain (``fusion.fuse_input``), by its id, and by the
        #: input partitions seen so far.
        self._entries = graph.fuse_inputs(self._bind)
        self._chains: dict[SystemStreamPartition, Entry] = {}

    def _chain(self, ssp: SystemStreamPartition) -> Entry:
        entry = self.graph.entries.get(ssp.system_stream)
        if entry is None:
            raise OperatorError(
                f"the application has no input operator for {ssp.system_stream}",
                op_id="input",
                kind="input",
            )
        chain = self._chains[ssp] = self._entries[entry.op_id]
        return chain

    def _bind(self, collector: MessageCollector, coordinator: TaskCoordinator) -> None:
        io = self._io
        io.collector, io.coordinator = collector, coordinator
        for op in self.graph.operators:
            if isinstance(op, sends.SendingOperator):
                op.send = collector.send

    async def init(self, context: TaskContext) -> None:
        self.use_clock(context)
        tables = self.graph.tables
        await tables.open(context)
        for op in self.graph.table_users:
            op.use_table(tables.tables[op.table_id])
        own, context = context, AppTaskContext(context, tables.tables)
        for function in self.graph.functions:
            hook = function.hook("init")
            if hook is None:
                continue
            try:
                result = hook(context)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                op = function.op
                raise OperatorError(
                    f"init of the function of operator {op.op_id!r} ({op.kind}) failed: {exc!r}",
                    op_id=op.op_id,
                    kind=op.kind,
                ) from exc
            function.ready = True
        self.graph.watermarks.restrict(
            {ssp.system_stream for ssp in context.system_stream_partitions}
        )
        for window in self.graph.windows:
            window.open(own)  # the container's context: its commit hook (``before_commit``)
        for join in self.graph.joins:
            join.open(context)
        self._register_metrics(context)
        self._single_stream(context)

    def _single_stream(self, context: TaskContext) -> None:
        """A task that reads one stream: its fused chain is the task's ``process``."""

    async def close(self) -> None:
        failure: BaseException | None = None
        for function in self.graph.functions:
            hook = function.hook("close")
            if hook is None or not function.ready:  # its init never returned
                continue
            try:
                result = hook()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # close every function, then report the first failure
                if failure is None:
                    op = function.op
                    failure = OperatorError(
                        f"close of the function of operator {op.op_id!r} ({op.kind}) failed: "
                        f"{exc!r}",
                        op_id=op.op_id,
                        kind=op.kind,
                    )
                    failure.__cause__ = exc
        try:
            await self.graph.tables.close()
        except Exception as exc:
            if failure is None:
                failure = exc
        if failure is not None:
            raise failure

    def _register_metrics(self, context: TaskContext) -> None:
        metrics: Any = context.metrics
        group = f"task.{context.task_name}"
        for op in self.graph.operators:
            counters = [
                ("messages-in", "messages_in", "received"),
                ("messages-out", "messages_out", "passed on or sent"),
            ]
            if isinstance(op, WindowOperator | JoinOperator):
                counters.append(("late-messages", "late", "had too late, dropped or sent aside"))
            for name, attribute, what in counters:
                metrics.counter(
                    group,
                    f"{op.op_id}-{name}",
                    _reader(op, attribute),
                    help=f"Messages operator {op.op_id} ({op.kind}) {what}",
                    unit="messages",
                )
            if op.kind != "input":
                op.timer = metrics.timer(
                    group,
                    f"{op.op_id}-process-latency",
                    help=f"Time in operator {op.op_id} ({op.kind}), sampled",
                )


def _reader(op: OperatorImpl, name: str) -> Callable[[], int]:
    return lambda: int(getattr(op, name))


class StreamOperatorTask(_OperatorTask, StreamTask):
    """The operator task of a graph with no asynchronous operator."""

    def process(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> None:
        chain = self._chains.get(envelope.system_stream_partition)
        if chain is None:
            chain = self._chain(envelope.system_stream_partition)
        chain(envelope, collector, coordinator)

    def _single_stream(self, context: TaskContext) -> None:
        # The container looks ``process`` up once init has returned: a task that reads one
        # stream gets that stream's chain itself, with no routing per message.
        streams = {ssp.system_stream for ssp in context.system_stream_partitions}
        entry = self.graph.entries.get(streams.pop()) if len(streams) == 1 else None
        if entry is not None:
            self.process = self._entries[entry.op_id]  # type: ignore[method-assign,assignment]


class AsyncStreamOperatorTask(_OperatorTask, AsyncStreamTask):
    """The operator task of a graph with a ``flat_map_async``: a message is processed once
    the awaitables of every operator it reached completed."""

    def __init__(self, graph: OperatorGraph) -> None:
        super().__init__(graph)
        self._done: asyncio.Future[None] | None = None

    def process_async(
        self,
        envelope: IncomingMessageEnvelope,
        collector: MessageCollector,
        coordinator: TaskCoordinator,
    ) -> Awaitable[Any]:
        chain = self._chains.get(envelope.system_stream_partition)
        if chain is None:
            chain = self._chain(envelope.system_stream_partition)
        # What the panes the message fired owe comes with it (``WindowOperator._take``); a
        # generated watermark moves at the tick only in this graph (``Watermarks.deferred``),
        # so no pane fires as the message enters.
        pending = chain(envelope, collector, coordinator)
        if pending is not None:
            return pending
        done = self._done
        if done is None:
            done = self._done = asyncio.get_running_loop().create_future()
            done.set_result(None)
        return done


class OperatorTaskFactory:
    """Makes the operator task of each task; ``streams``: where each stream of the plan is
    (its ``system.physical-name`` after the job file's keys)."""

    def __init__(self, graph: ApplicationGraph, plan: AppPlan, streams: dict[str, SystemStream]):
        self.graph = graph
        self.plan = plan
        self._streams = streams
        self.is_async = is_asynchronous(graph)

    def __call__(self) -> _OperatorTask:
        plan = self.plan
        graph = OperatorGraph(self.graph, self._streams, plan.event_time_joins, plan.held_windows)
        if self.is_async:
            return AsyncStreamOperatorTask(graph)
        return StreamOperatorTask(graph)

    def check_partitions(self, counts: Mapping[SystemStream, int]) -> None:
        """At start-up, with the streams' partition counts: joins read co-partitioned streams."""
        check_copartitioned(self.graph, self._streams, counts)

    def __repr__(self) -> str:
        return f"app {self.plan.app}" if self.plan.app else "app"


__all__ = [
    "AsyncStreamOperatorTask",
    "OperatorGraph",
    "OperatorTaskFactory",
    "StreamOperatorTask",
]
