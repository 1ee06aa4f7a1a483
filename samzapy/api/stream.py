"""MessageStream and OutputStream: the pure graph builder of the high-level API.

An application's ``describe`` builds a graph of operator specs; nothing runs here. Each
operator is an ``OperatorSpec`` (kind, id, function, upstream and downstream specs) in an
``ApplicationGraph``; the planner (``samzapy.operators.plan``) turns the graph into the job's
inputs, intermediate streams and config, and each task runs its own copy of the graph
(``samzapy.operators``).

Functions are plain callables, or objects with an ``apply`` method (Samza's MapFunction,
FilterFunction, ...) and optionally ``init(context)`` and ``close()`` (InitableFunction and
ClosableFunction): each task gets its own copy of such an object, ``init`` is called once per
task with the task's context before its first message, ``close`` when the task closes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from samzapy.api.descriptors import KVSerde, check_id, same_serde, serde_label
from samzapy.api.errors import ConfigError

if TYPE_CHECKING:
    from samzapy.api.descriptors import InputDescriptor, OutputDescriptor
    from samzapy.api.windows import Window

#: The kinds of operator, in the words ``samzapy plan`` prints.
KINDS = (
    "input",
    "map",
    "filter",
    "flat_map",
    "flat_map_async",
    "sink",
    "send_to",
    "merge",
    "partition_by",
    "broadcast",
    "window",
)


def check_function(fn: Any, what: str) -> Any:
    """``fn`` if it is a callable or an object with a callable ``apply``."""
    if callable(getattr(fn, "apply", None)) or callable(fn):
        return fn
    raise ConfigError(f"{what} must be a callable or an object with an apply method, got {fn!r}")


class OperatorSpec:
    """One operator of the graph: its kind, id, settings, and the specs around it."""

    __slots__ = ("downstream", "fn", "graph", "kind", "op_id", "settings", "upstream")

    def __init__(
        self,
        graph: ApplicationGraph,
        kind: str,
        op_id: str,
        upstream: Iterable[OperatorSpec] = (),
        fn: Any = None,
        **settings: Any,
    ) -> None:
        self.graph = graph
        self.kind = kind
        self.op_id = op_id
        self.fn = fn
        self.settings = settings
        self.upstream: list[OperatorSpec] = list(upstream)
        self.downstream: list[OperatorSpec] = []
        for spec in self.upstream:
            spec.downstream.append(self)

    def __repr__(self) -> str:
        return f"OperatorSpec({self.kind}, {self.op_id!r})"


class IntermediateStream:
    """The intermediate stream of a ``partition_by`` or ``broadcast``: written by the
    operator, read back by the job (its stream id is given by the planner)."""

    __slots__ = ("kind", "op_id", "reader", "serde", "writer")

    def __init__(self, kind: str, op_id: str, serde: Any) -> None:
        self.kind = kind
        self.op_id = op_id
        self.serde = serde
        self.writer: OperatorSpec | None = None
        self.reader: OperatorSpec | None = None


class ApplicationGraph:
    """The operators, inputs, outputs and intermediate streams an application described."""

    def __init__(self) -> None:
        self.inputs: dict[str, OperatorSpec] = {}
        self.outputs: dict[str, OutputStream] = {}
        self.intermediates: list[IntermediateStream] = []
        self.operators: list[OperatorSpec] = []
        self.op_ids: set[str] = set()
        self._counts: dict[str, int] = {}
        self.frozen = False

    def check_open(self, what: str) -> None:
        if self.frozen:
            raise ConfigError(
                f"{what} was called after the application was described: the graph is built "
                "in describe() only"
            )

    def new_op_id(self, kind: str, given: str | None) -> str:
        """``given`` checked and claimed, or the next ``<kind>-<n>``."""
        if given is None:
            n = self._counts.get(kind, 0) + 1
            while f"{kind}-{n}" in self.op_ids:
                n += 1
            self._counts[kind] = n
            op_id = f"{kind}-{n}"
        else:
            op_id = check_id(given, f"the op_id of {kind}")
            if op_id in self.op_ids:
                raise ConfigError(f"op_id {op_id!r} is used twice: operator ids must be unique")
        self.op_ids.add(op_id)
        return op_id

    def add(
        self,
        kind: str,
        upstream: Iterable[OperatorSpec],
        fn: Any = None,
        op_id: str | None = None,
        **settings: Any,
    ) -> OperatorSpec:
        self.check_open(kind)
        spec = OperatorSpec(self, kind, self.new_op_id(kind, op_id), upstream, fn, **settings)
        self.operators.append(spec)
        return spec


class MessageStream:
    """A stream of messages inside an application; each operator returns a new stream."""

    __slots__ = ("_spec",)

    def __init__(self, spec: OperatorSpec) -> None:
        self._spec = spec

    @property
    def spec(self) -> OperatorSpec:
        return self._spec

    def _then(self, kind: str, fn: Any = None, op_id: str | None = None, **s: Any) -> MessageStream:
        return MessageStream(self._spec.graph.add(kind, [self._spec], fn, op_id, **s))

    def map(self, fn: Callable[[Any], Any]) -> MessageStream:
        """Each message becomes ``fn(message)``."""
        return self._then("map", check_function(fn, "map's function"))

    def filter(self, fn: Callable[[Any], bool]) -> MessageStream:
        """Only the messages for which ``fn(message)`` is true go on."""
        return self._then("filter", check_function(fn, "filter's function"))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> MessageStream:
        """Each message becomes the messages of the iterable ``fn(message)``, in order."""
        return self._then("flat_map", check_function(fn, "flat_map's function"))

    def flat_map_async(self, fn: Callable[[Any], Any]) -> MessageStream:
        """``fn(message)`` returns an awaitable of an iterable of messages; up to
        ``task.max.concurrency`` are in flight per task. A message counts as processed (and
        can be checkpointed) once the awaitable and everything downstream completed."""
        return self._then("flat_map_async", check_function(fn, "flat_map_async's function"))

    def sink(self, fn: Callable[[Any, Any, Any], None]) -> None:
        """``fn(message, collector, coordinator)`` for each message: the end of a stream."""
        self._then("sink", check_function(fn, "sink's function"))

    def send_to(self, output: OutputStream) -> None:
        """Send each message to ``output``: a ``KV`` with its key, anything else keyless."""
        if not isinstance(output, OutputStream):
            raise ConfigError(
                f"send_to takes an OutputStream (app_desc.get_output_stream(...)), got {output!r}"
            )
        if output.graph is not self._spec.graph:
            raise ConfigError(f"send_to: {output!r} belongs to another application")
        self._then("send_to", output=output)

    def window(self, window: Window, op_id: str) -> MessageStream:
        """Group and aggregate by key and time (``samzapy.api.windows``): a stream of
        ``WindowPane``s. The window's state lives in store ``op_id`` (named from the op id,
        so editing a function keeps it), with a changelog when the job has a system for one."""
        from samzapy.api.windows import Window

        if not isinstance(window, Window):
            raise ConfigError(f"window takes a Window made by samzapy.Windows, got {window!r}")
        if op_id is None:
            raise ConfigError("window needs an op_id (it names the window's store)")
        late = window.late_output
        if late is not None and not isinstance(late, OutputStream):
            raise ConfigError(
                "with_late_output takes an OutputStream (app_desc.get_output_stream(...)), got "
                f"{late!r}"
            )
        if late is not None and late.graph is not self._spec.graph:
            raise ConfigError(f"with_late_output: {late!r} belongs to another application")
        return self._then("window", None, op_id, window=window)

    def merge(self, others: Iterable[MessageStream]) -> MessageStream:
        """A stream of this stream's messages and the others', each in its own order."""
        return MessageStream.merge_all([self, *others])

    @staticmethod
    def merge_all(streams: Iterable[MessageStream]) -> MessageStream:
        """One stream of every message of ``streams``."""
        streams = list(streams)
        if not streams or not all(isinstance(s, MessageStream) for s in streams):
            raise ConfigError("merge takes one or more MessageStreams")
        graph = streams[0]._spec.graph
        if any(s._spec.graph is not graph for s in streams):
            raise ConfigError("merge: the streams belong to different applications")
        specs = list(dict.fromkeys(s._spec for s in streams))
        return MessageStream(graph.add("merge", specs))

    def partition_by(
        self,
        key_fn: Callable[[Any], Any],
        value_fn: Callable[[Any], Any],
        serde: Any,
        op_id: str,
    ) -> MessageStream:
        """Repartition by ``key_fn(message)`` through an intermediate stream of the job
        (``<job.name>-<job.id>-partition_by-<op_id>``); returns the stream read back from it,
        of ``KV(key, value_fn(message))``, each key on the partition Kafka's partitioner
        gives its serialized key. ``serde`` is a ``KVSerde`` or one serde for both."""
        if op_id is None:
            raise ConfigError("partition_by needs an op_id (it names the intermediate stream)")
        return self._intermediate(
            "partition_by",
            op_id,
            _kv_serde(serde, "partition_by"),
            key_fn=check_function(key_fn, "partition_by's key function"),
            value_fn=check_function(value_fn, "partition_by's value function"),
        )

    def broadcast(self, serde: Any, op_id: str) -> MessageStream:
        """Send every message to every task of the job through an intermediate stream of one
        partition that every task reads (``<job.name>-<job.id>-broadcast-<op_id>``)."""
        if op_id is None:
            raise ConfigError("broadcast needs an op_id (it names the intermediate stream)")
        if isinstance(serde, KVSerde):
            raise ConfigError("broadcast's serde is the messages' serde, not a KVSerde")
        return self._intermediate("broadcast", op_id, serde)

    def _intermediate(self, kind: str, op_id: str, serde: Any, **settings: Any) -> MessageStream:
        graph = self._spec.graph
        graph.check_open(kind)
        stream = IntermediateStream(kind, op_id, serde)
        stream.writer = graph.add(kind, [self._spec], None, op_id, stream=stream, **settings)
        reader = OperatorSpec(
            graph, "input", graph.new_op_id("input", f"{op_id}-input"), intermediate=stream
        )
        stream.reader = reader
        graph.intermediates.append(stream)
        return MessageStream(reader)

    def __repr__(self) -> str:
        return f"MessageStream(after {self._spec.kind} {self._spec.op_id!r})"


def _kv_serde(serde: Any, what: str) -> KVSerde:
    if isinstance(serde, KVSerde):
        return serde
    if serde is None:
        raise ConfigError(f"{what} needs a serde: a KVSerde(key_serde, value_serde) or a name")
    return KVSerde(serde, serde)


class OutputStream:
    """A stream messages are sent to (``MessageStream.send_to``)."""

    __slots__ = ("descriptor", "graph")

    def __init__(self, graph: ApplicationGraph, descriptor: OutputDescriptor) -> None:
        self.graph = graph
        self.descriptor = descriptor

    @property
    def stream_id(self) -> str:
        return self.descriptor.stream_id

    def __repr__(self) -> str:
        return f"OutputStream({self.descriptor.stream_id!r})"


def upstream_of(spec: OperatorSpec, *, through_intermediates: bool = False) -> list[OperatorSpec]:
    """``spec`` and every operator whose messages reach it, each once; with
    ``through_intermediates``, an intermediate stream's reader leads on to its writer's."""
    found: dict[int, OperatorSpec] = {}
    todo = [spec]
    while todo:
        op = todo.pop()
        if id(op) in found:
            continue
        found[id(op)] = op
        todo.extend(op.upstream)
        intermediate = op.settings.get("intermediate") if op.kind == "input" else None
        if through_intermediates and intermediate is not None and intermediate.writer:
            todo.append(intermediate.writer)
    return list(found.values())


def add_input(graph: ApplicationGraph, descriptor: InputDescriptor) -> MessageStream:
    graph.check_open("get_input_stream")
    stream_id = descriptor.stream_id
    if stream_id in graph.inputs:
        raise ConfigError(
            f"get_input_stream was called twice for stream {stream_id!r}: keep the first "
            "MessageStream and apply several operators to it"
        )
    if stream_id in graph.op_ids:
        raise ConfigError(
            f"input stream {stream_id!r} has the id of an operator: an input's operator id is "
            "its stream id, and operator ids must be unique"
        )
    graph.op_ids.add(stream_id)
    spec = OperatorSpec(graph, "input", stream_id, descriptor=descriptor)
    graph.inputs[stream_id] = spec
    return MessageStream(spec)


def add_output(graph: ApplicationGraph, descriptor: OutputDescriptor) -> OutputStream:
    graph.check_open("get_output_stream")
    found = graph.outputs.get(descriptor.stream_id)
    if found is not None:
        if not same_serde(found.descriptor.serde, descriptor.serde):
            raise ConfigError(
                f"output stream {descriptor.stream_id!r} is described twice with different "
                f"serdes ({serde_label(found.descriptor.serde)} and "
                f"{serde_label(descriptor.serde)})"
            )
        return found
    output = OutputStream(graph, descriptor)
    graph.outputs[descriptor.stream_id] = output
    return output


__all__ = [
    "KINDS",
    "ApplicationGraph",
    "IntermediateStream",
    "MessageStream",
    "OperatorSpec",
    "OutputStream",
    "add_input",
    "add_output",
    "check_function",
    "upstream_of",
]
