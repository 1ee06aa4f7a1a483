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

from samzapy.api.descriptors import KVSerde, same_serde, serde_label
from samzapy.api.durations import duration_ms
from samzapy.api.errors import ConfigError
from samzapy.api.functions import check_function, check_sync, check_sync_function
from samzapy.api.graph import (
    ApplicationGraph,
    IntermediateStream,
    OperatorSpec,
    OutputStream,
)
from samzapy.api.tables import CachingTableDescriptor, Table, TableDescriptor

if TYPE_CHECKING:
    from datetime import timedelta

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
    "send_to_table",
    "stream_table_join",
    "join",
)


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
        return self._then("map", check_sync_function(fn, "map's function"))

    def filter(self, fn: Callable[[Any], bool]) -> MessageStream:
        """Only the messages for which ``fn(message)`` is true go on."""
        return self._then("filter", check_sync_function(fn, "filter's function"))

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> MessageStream:
        """Each message becomes the messages of the iterable ``fn(message)``, in order."""
        return self._then("flat_map", check_sync_function(fn, "flat_map's function"))

    def flat_map_async(self, fn: Callable[[Any], Any]) -> MessageStream:
        """``fn(message)`` returns an awaitable of an iterable of messages; up to
        ``task.max.concurrency`` are in flight per task. A message counts as processed (and
        can be checkpointed) once the awaitable and everything downstream completed."""
        return self._then("flat_map_async", check_function(fn, "flat_map_async's function"))

    def sink(self, fn: Callable[[Any, Any, Any], None]) -> None:
        """``fn(message, collector, coordinator)`` for each message: the end of a stream."""
        self._then("sink", check_sync_function(fn, "sink's function"))

    def send_to(self, output: OutputStream | Table) -> None:
        """Send each message to ``output``: a ``KV`` with its key, anything else keyless. To a
        table (``app_desc.get_table``): each message is a ``KV`` written to it, a ``KV`` whose
        value is None deletes its key."""
        if isinstance(output, Table):
            self._own(output, "send_to")
            self._then("send_to_table", table=output)
            return
        if not isinstance(output, OutputStream):
            raise ConfigError(
                "send_to takes an OutputStream (app_desc.get_output_stream(...)) or a Table "
                f"(app_desc.get_table(...)), got {output!r}"
            )
        self._own(output, "send_to")
        self._then("send_to", output=output)

    def _own(self, target: OutputStream | Table, what: str) -> None:
        """``target`` (an output stream or a table) must be of this stream's application."""
        if target.graph is not self._spec.graph:
            raise ConfigError(f"{what}: {target!r} belongs to another application")

    def join(
        self,
        other: MessageStream | Table,
        join_fn: Any,
        key_serde: Any = None,
        message_serde: Any = None,
        other_message_serde: Any = None,
        ttl: timedelta | None = None,
        op_id: str | None = None,
    ) -> MessageStream:
        """Join with a table or with another stream.

        ``join(table, join_fn)`` (Samza's stream-table join): ``join_fn`` has
        ``get_message_key(message)``, ``get_record_key(record)`` and ``apply(message,
        record)``; ``record`` is the table's ``KV(key, value)``, or None when the key is absent
        (``apply`` decides: return None to drop the message). A remote table's look-ups run
        concurrently, up to ``task.max.concurrency``, and the results keep the input's order.

        ``join(other, join_fn, key_serde, message_serde, other_message_serde, ttl, op_id)``
        (Samza's stream-stream join): ``join_fn`` has ``get_first_key(message)``,
        ``get_second_key(other_message)`` and ``apply(message, other_message)``. Each side
        keeps its latest message per key in a store named from ``op_id``
        (``<op_id>-L``, ``<op_id>-R``); a message joins the other side's message of its key
        if that is at most ``ttl`` older (processing time, or event time when every input
        that reaches the join carries watermarks). The serdes store the keys and each side's
        messages (a ``KVSerde`` for a stream of ``KV``; None: the state serde windows use).
        Both streams must be partitioned alike (``partition_by`` to the same partition
        count)."""
        if isinstance(other, Table):
            self._own(other, "join")
            given = {
                "key_serde": key_serde,
                "message_serde": message_serde,
                "other_message_serde": other_message_serde,
                "ttl": ttl,
            }
            for name, value in given.items():
                if value is not None:  # a stream-stream join's: ignored, it would mislead
                    raise ConfigError(
                        f"join with table {other.table_id!r}: a stream-table join takes no "
                        f"{name} (got {value!r}): it keeps no state and reads the table as it "
                        "is; serdes and a ttl are a stream-stream join's"
                    )
            _needs(
                join_fn,
                ("apply", "get_message_key", "get_record_key"),
                "a stream-table join's function needs apply(message, record), "
                "get_message_key(message) and get_record_key(record)",
                op_id,
            )
            return self._then("stream_table_join", join_fn, op_id, table=other)
        if not isinstance(other, MessageStream):
            raise ConfigError(f"join takes a MessageStream or a Table, got {other!r}")
        graph = self._spec.graph
        if other._spec.graph is not graph:
            raise ConfigError("join: the streams belong to different applications")
        if other._spec is self._spec:
            raise ConfigError("join: a stream cannot be joined with itself")
        _needs(
            join_fn,
            ("apply", "get_first_key", "get_second_key"),
            "a stream-stream join's function needs apply(message, other_message), "
            "get_first_key(message) and get_second_key(other_message)",
            op_id,
        )
        if op_id is None:
            raise ConfigError("a stream-stream join needs an op_id (it names the join's stores)")
        if ttl is None:
            raise ConfigError(f"join {op_id!r} needs a ttl (a datetime.timedelta)")
        ttl_ms = duration_ms(ttl, f"the ttl of join {op_id!r}")
        if isinstance(key_serde, KVSerde):
            raise ConfigError(
                f"join {op_id!r}: key_serde is the keys' serde (a name or object), not a KVSerde"
            )
        spec = graph.add(
            "join",
            [self._spec, other._spec],
            join_fn,
            op_id,
            serdes=(key_serde, message_serde, other_message_serde),
            ttl_ms=ttl_ms,
        )
        return MessageStream(spec)

    def window(self, window: Window, op_id: str) -> MessageStream:
        """Group and aggregate by key and time (``samzapy.api.windows``): a stream of
        ``WindowPane``s. The window's state lives in store ``op_id`` (named from the op id,
        so editing a function keeps it), with a changelog when the job has a system for one."""
        from samzapy.api.windows import Window

        named = "window" if op_id is None else f"window {op_id!r}"
        if not isinstance(window, Window):
            raise ConfigError(f"{named} takes a Window made by samzapy.Windows, got {window!r}")
        if op_id is None:
            raise ConfigError("window needs an op_id (it names the window's store)")
        late = window.late_output
        if late is not None and not isinstance(late, OutputStream):
            raise ConfigError(
                f"{named}: with_late_output takes an OutputStream "
                f"(app_desc.get_output_stream(...)), got {late!r}"
            )
        if late is not None:
            self._own(late, "with_late_output")
        return self._then("window", None, op_id, window=window)

    def merge(self, others: Iterable[MessageStream]) -> MessageStream:
        """A stream of this stream's messages and the others', each in its own order."""
        if isinstance(others, MessageStream):
            raise ConfigError(
                "merge takes a list of MessageStreams: merge([other]), not merge(other)"
            )
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
        gives its serialized key. ``serde`` is a ``KVSerde`` or one serde for both (a value
        serde None: the system's ``samza.msg.serde``, checked when planned)."""
        if op_id is None:
            raise ConfigError("partition_by needs an op_id (it names the intermediate stream)")
        return self._intermediate(
            "partition_by",
            op_id,
            _kv_serde(serde, f"partition_by {op_id!r}"),
            key_fn=check_sync_function(key_fn, "partition_by's key function"),
            value_fn=check_sync_function(value_fn, "partition_by's value function"),
        )

    def broadcast(self, serde: Any, op_id: str) -> MessageStream:
        """Send every message to every task of the job through an intermediate stream of one
        partition that every task reads (``<job.name>-<job.id>-broadcast-<op_id>``).
        ``serde``: the messages' serde, or a ``KVSerde`` for a stream of ``KV``s, read back
        as ``KV``s; None: the system's ``samza.msg.serde`` (none there is an error when
        planned)."""
        if op_id is None:
            raise ConfigError("broadcast needs an op_id (it names the intermediate stream)")
        return self._intermediate("broadcast", op_id, serde)

    def _intermediate(self, kind: str, op_id: str, serde: Any, **settings: Any) -> MessageStream:
        graph = self._spec.graph
        graph.check_open(kind)
        stream = IntermediateStream(kind, op_id, serde)
        stream.writer = graph.add(kind, [self._spec], None, op_id, stream=stream, **settings)
        reader_id = graph.new_op_id(
            "input", f"{op_id}-input", f"the stream {kind} {op_id!r} returns (its input operator)"
        )
        reader = OperatorSpec(graph, "input", reader_id, intermediate=stream)
        stream.reader = reader
        graph.intermediates.append(stream)
        return MessageStream(reader)

    def __repr__(self) -> str:
        return f"MessageStream(after {self._spec.kind} {self._spec.op_id!r})"


def _needs(fn: Any, methods: tuple[str, ...], what: str, op_id: str | None) -> None:
    """A ConfigError (the join's op id when given, ``what``, then the first method missing)
    unless ``fn`` has each."""
    named = "" if op_id is None else f"join {op_id!r}: "
    for method in methods:
        if not callable(getattr(fn, method, None)):
            raise ConfigError(f"{named}{what}; {fn!r} has no {method}")
        check_sync(getattr(fn, method), f"{named}the join function's {method}")


def _kv_serde(serde: Any, what: str) -> KVSerde:
    if isinstance(serde, KVSerde):
        return serde
    if serde is None:
        raise ConfigError(
            f"{what} needs a serde: a KVSerde(key_serde, value_serde), or one serde (a name or "
            "object) for both, got None"
        )
    return KVSerde(serde, serde)


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
            f"input stream {stream_id!r} has the id of an operator, {graph.op_ids[stream_id]}: "
            "an input's operator id is its stream id, and operator ids must be unique"
        )
    graph.op_ids[stream_id] = f"input stream {stream_id!r}"
    spec = OperatorSpec(graph, "input", stream_id, descriptor=descriptor)
    graph.inputs[stream_id] = spec
    return MessageStream(spec)


def add_table(graph: ApplicationGraph, descriptor: TableDescriptor) -> Table:
    graph.check_open("get_table")
    if not isinstance(descriptor, TableDescriptor):
        raise ConfigError(
            "get_table takes a table descriptor (RocksDbTableDescriptor, RemoteTableDescriptor, "
            f"...), got {descriptor!r}"
        )
    if isinstance(descriptor, CachingTableDescriptor):
        add_table(graph, descriptor.table)
    found = graph.tables.get(descriptor.table_id)
    if found is not None:
        if found.descriptor is not descriptor:
            raise ConfigError(
                f"table id {descriptor.table_id!r} is used by two different descriptors "
                f"({found.descriptor!r} and {descriptor!r}, two objects even if alike): table "
                "ids must be unique; call get_table once per table and use the Table it "
                "returns wherever the table is read or written"
            )
        return found
    table = Table(graph, descriptor)
    graph.tables[descriptor.table_id] = table
    return table


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
        first, then = found.descriptor.to_config(), descriptor.to_config()
        if first != then:  # else what is sent to the second goes where the first says
            differ = ", ".join(
                f"{k}: {first.get(k)!r} and {then.get(k)!r}"
                for k in sorted({*first, *then})
                if first.get(k) != then.get(k)
            )
            raise ConfigError(
                f"output stream {descriptor.stream_id!r} is described twice with different "
                f"settings ({differ}): describe it once and send_to its OutputStream from "
                "every operator"
            )
        return found
    output = OutputStream(graph, descriptor)
    graph.outputs[descriptor.stream_id] = output
    return output


__all__ = [
    "KINDS",
    "MessageStream",
    "OutputStream",
    "add_input",
    "add_output",
    "add_table",
]
