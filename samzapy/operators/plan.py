"""The planner: an application's graph -> the job's streams, operators and config (pure).

``plan_application`` checks the graph and says what the job is made of, as ``samzapy plan``
prints it:

1. the graph is frozen (``describe``'s methods refuse from now on) and checked
   (``graph_checks.py``): at least one input, every input used by an operator, every output
   written (by a ``send_to``, a late output, or maybe a ``sink``), no output that is also an
   input (a cycle through a stream), no stream id both an input's and an output's;
2. each intermediate stream is named ``<job.name>-<job.id>-<kind>-<op_id>`` (Samza's naming:
   editing a lambda or adding an operator does not orphan a stream), placed on
   ``job.default.system`` (else the one system every input is on), and sized: a broadcast
   stream has one partition, every task reads it; a ``partition_by`` stream has
   ``job.intermediate.stream.partitions``, else the largest input partition count, found at
   start-up when the stream is created; its upstream inputs are the streams whose messages
   reach the operator (end-of-stream and watermarks follow them);
3. the config keys the descriptors and the intermediate streams yield: systems, streams,
   serdes (serde objects registered under ``serializers.registry``), ``task.inputs`` and
   ``task.broadcast.inputs``. The job file's keys win over these;
4. no two of its parts claim one physical stream or store (``claims.py``: a window's
   changelog that is also a ``partition_by``'s stream, or an input).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samzapy.api.application import StreamApplicationDescriptor
from samzapy.api.descriptors import KVSerde, StreamDescriptor, SystemDescriptor, serde_label
from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph, IntermediateStream, OperatorSpec, upstream_of
from samzapy.api.task_application import TaskApplicationDescriptor
from samzapy.config.schema import SAMZA_SYSTEM_FACTORIES, to_int
from samzapy.operators.claims import check_claims
from samzapy.operators.graph_checks import check_graph, placed
from samzapy.operators.plan_document import AppPlan, OperatorPlan, StreamPlan, TablePlan
from samzapy.operators.table_plan import event_time_joins, is_asynchronous, table_keys
from samzapy.operators.window_plan import WINDOW_TICK_MS, held_to_the_end, tick_needed, window_keys

#: Systems whose streams can carry an intermediate stream (written and read back framed).
INTERMEDIATE_FACTORIES = ("kafka", "memory")


def intermediate_stream_id(job_name: str, job_id: str, kind: str, op_id: str) -> str:
    """Samza's name for the intermediate stream of operator ``op_id``."""
    return f"{job_name}-{job_id}-{kind}-{op_id}"


def plan_application(
    app_desc: StreamApplicationDescriptor | TaskApplicationDescriptor,
    config: Mapping[str, Any],
    app: str = "",
    *,
    checks: Callable[[ApplicationGraph, Mapping[str, Any]], None] = check_graph,
) -> AppPlan:
    """Check and plan the graph ``app_desc`` holds; ``config``: the job file's flat keys;
    ``checks``: step 1's (a task application's graph has no operators to check)."""
    graph = app_desc.graph
    graph.frozen = True  # 1.
    checks(graph, config)
    keys = _Keys()
    systems = _Systems()
    inputs = tuple(
        _stream_plan(spec.settings["descriptor"], "input", keys, systems, config)
        for spec in graph.inputs.values()
    )
    outputs = tuple(
        _stream_plan(out.descriptor, "output", keys, systems, config)
        for out in graph.outputs.values()
    )
    for stream in (*inputs, *outputs):
        if stream.role == "output" and stream.qualified_name in {i.qualified_name for i in inputs}:
            raise ConfigError(
                f"output stream {stream.stream_id!r} ({stream.qualified_name}) is also an input "
                "of the application: a cycle through a stream is not allowed"
            )
    # 2.
    names = _IntermediateNames(graph, config, app_desc.default_system, systems)
    intermediates = tuple(names.plan(stream, keys) for stream in graph.intermediates)
    # 3. (the stores' changelogs may put the default system among the systems)
    _state_keys(graph, keys, config, names)
    for system in systems.described:  # each descriptor's keys: two values of one are an error
        keys.update(system.to_config())
    _check_message_serdes(intermediates, {**keys.values, **config})
    # 4.
    check_claims(graph, (*inputs, *outputs, *intermediates), config, {**keys.values, **config})
    keys.set(
        "task.inputs", [s.qualified_name for s in (*inputs, *intermediates) if not s.broadcast]
    )
    broadcasts = [f"{s.qualified_name}#0" for s in intermediates if s.broadcast]
    if broadcasts:
        keys.set("task.broadcast.inputs", broadcasts)
    joins_in_event_time = event_time_joins(graph, config)
    named = (*config, *keys.values)
    stores = sorted(
        {k.split(".")[1] for k in named if k.startswith("stores.") and k.count(".") > 1}
    )
    return AppPlan(
        app=app,
        inputs=inputs,
        outputs=outputs,
        intermediates=intermediates,
        operators=tuple(
            _operator_plans(
                graph,
                {s.op_id: s for s in intermediates if s.op_id},
                config,
                joins_in_event_time,
            )
        ),
        config=keys.values,
        stores=tuple(stores),
        tables=tuple(
            TablePlan(t.table_id, t.descriptor.kind, t.descriptor.describe())
            for t in graph.tables.values()
        ),
        event_time_joins=joins_in_event_time,
        held_windows=held_to_the_end(graph, config),
    )


def _check_message_serdes(intermediates: Iterable[StreamPlan], keys: Mapping[str, Any]) -> None:
    """An intermediate stream carries bytes: a ``broadcast`` (or ``partition_by`` value or
    key) given no serde needs the job file's serde for its stream, or its system's."""
    for stream in intermediates:
        given = f"serde KVSerde({stream.key_serde}, {stream.msg_serde})"
        for which, serde in (("key", stream.key_serde), ("msg", stream.msg_serde)):
            if serde is not None or (which == "key" and not stream.keyed):
                continue
            system_key = f"systems.{stream.system}.samza.{which}.serde"
            if keys.get(f"streams.{stream.stream_id}.samza.{which}.serde") or keys.get(system_key):
                continue
            kind = "broadcast" if stream.broadcast else "partition_by"
            raise ConfigError(
                f"{kind} {stream.op_id!r} was given {given if stream.keyed else 'serde None'}, "
                f"and its intermediate stream {stream.stream_id!r} carries bytes: pass the "
                f"{'keys' if which == 'key' else 'messages'}' serde (a name such as json or "
                f"bytes, or a serde object), or set {system_key}"
            )


class _Keys:
    """The config keys an application yields; one key set twice to different values is an
    error naming it."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        if key in self.values and self.values[key] is not value and self.values[key] != value:
            raise ConfigError(
                f"the application's descriptors give {key} two values: "
                f"{self.values[key]!r} and {value!r}",
                key=key,
            )
        self.values[key] = value

    def update(self, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            self.set(key, value)

    def serde(self, stream_id: str, which: str, serde: Any) -> str | None:
        """The name ``streams.<id>.samza.<which>.serde`` gets: a serde name as it is, a serde
        object registered as ``<stream_id>-<which>``."""
        if serde is None:
            return None
        if isinstance(serde, str):
            name = serde
        else:
            name = f"{stream_id}-{which}"
            self.set(f"serializers.registry.{name}.class", serde)
        self.set(f"streams.{stream_id}.samza.{which}.serde", name)
        return name


def _serdes(serde: Any) -> tuple[Any, Any]:
    if isinstance(serde, KVSerde):
        return serde.key_serde, serde.value_serde
    return None, serde


class _Systems(dict[str, SystemDescriptor]):
    """The application's systems by name (the first descriptor of each), and every
    descriptor given (several of one name each give their keys)."""

    def __init__(self) -> None:
        super().__init__()
        self.described: list[SystemDescriptor] = []


def _add_system(system: SystemDescriptor, systems: _Systems) -> None:
    found = systems.setdefault(system.system_name, system)
    if found is not system and found.factory != system.factory:
        raise ConfigError(
            f"system {system.system_name!r} is described twice with different factories "
            f"({found.factory} and {system.factory})"
        )
    if not any(seen is system for seen in systems.described):
        systems.described.append(system)


def _stream_plan(
    descriptor: StreamDescriptor,
    role: str,
    keys: _Keys,
    systems: _Systems,
    config: Mapping[str, Any],
) -> StreamPlan:
    _add_system(descriptor.system_descriptor, systems)
    system, physical_name = placed(descriptor, config)
    keys.update(descriptor.to_config())
    key_serde, msg_serde = _serdes(descriptor.serde)
    keys.serde(descriptor.stream_id, "key", key_serde)
    keys.serde(descriptor.stream_id, "msg", msg_serde)
    return StreamPlan(
        stream_id=descriptor.stream_id,
        system=system,
        physical_name=physical_name,
        role=role,
        key_serde=serde_label(key_serde),
        msg_serde=serde_label(msg_serde),
        keyed=descriptor.keyed,
    )


class _IntermediateNames:
    """Names, places and sizes the intermediate streams."""

    def __init__(
        self,
        graph: ApplicationGraph,
        config: Mapping[str, Any],
        default: SystemDescriptor | None,
        systems: _Systems,
    ) -> None:
        self.graph = graph
        self.config = config
        self.systems = systems
        self.default = default
        if not graph.intermediates:
            return
        self.job = _job(config)
        self.system = self._system(default)
        # As the configuration's check reads it ("5" too); a bad value is its error.
        partitions = to_int(config.get("job.intermediate.stream.partitions"))
        self.partitions = partitions if partitions is not None and partitions > 0 else None

    def _system(self, default: SystemDescriptor | None) -> str:
        key = "job.default.system"
        configured = self.config.get(key)
        if isinstance(configured, str) and configured:
            name = configured
        elif default is not None:
            _add_system(default, self.systems)
            name = default.system_name
        else:
            used = {
                placed(s.settings["descriptor"], self.config)[0] for s in self.graph.inputs.values()
            }
            if len(used) != 1:
                raise ConfigError(
                    f"{key} must be set: partition_by and broadcast write intermediate streams "
                    f"to it, and the inputs are on several systems ({', '.join(sorted(used))})",
                    key=key,
                )
            name = used.pop()
        factory = self.config.get(f"systems.{name}.samza.factory")
        if isinstance(factory, str):  # Samza's class names too
            factory = SAMZA_SYSTEM_FACTORIES.get(factory, factory)
        if factory is None and name in self.systems:
            factory = self.systems[name].factory
        if factory is not None and factory not in INTERMEDIATE_FACTORIES:
            raise ConfigError(
                f"{key}: intermediate streams of partition_by and broadcast need a kafka or "
                f"memory system, and system {name!r} is {factory!r}: set {key} to one "
                "(app_desc.with_default_system(...) or the job file)",
                key=key,
            )
        return name

    def plan(self, stream: IntermediateStream, keys: _Keys) -> StreamPlan:
        stream_id = intermediate_stream_id(*self.job, stream.kind, stream.op_id)
        broadcast = stream.kind == "broadcast"
        prefix = f"streams.{stream_id}."
        keys.set(prefix + "samza.system", self.system)
        keys.set(prefix + "samza.intermediate", True)
        key_serde, msg_serde = _serdes(stream.serde)
        keys.serde(stream_id, "key", key_serde)
        keys.serde(stream_id, "msg", msg_serde)
        partitions = 1 if broadcast else self.partitions
        if partitions is not None:
            keys.set(prefix + "partitions", partitions)
        assert stream.writer is not None
        upstream = tuple(self._upstream(stream.writer))
        keys.set(prefix + "samza.upstream.inputs", list(upstream))
        return StreamPlan(
            stream_id=stream_id,
            system=self.system,
            physical_name=stream_id,
            role="intermediate",
            key_serde=serde_label(key_serde),
            msg_serde=serde_label(msg_serde),
            keyed=stream.kind == "partition_by" or stream.keyed,
            partitions=partitions,
            broadcast=broadcast,
            op_id=stream.op_id,
            upstream=upstream,
        )

    def _upstream(self, spec: OperatorSpec) -> Iterable[str]:
        """The streams whose messages reach ``spec``, sorted."""
        return sorted({self._qualified(op) for op in upstream_of(spec) if op.kind == "input"})

    def _qualified(self, spec: OperatorSpec) -> str:
        stream = spec.settings.get("intermediate")
        if stream is not None:
            stream_id = intermediate_stream_id(*self.job, stream.kind, stream.op_id)
            return f"{self.system}.{stream_id}"
        system, physical_name = placed(spec.settings["descriptor"], self.config)
        return f"{system}.{physical_name}"


def _job(config: Mapping[str, Any]) -> tuple[str, str]:
    job_name = config.get("job.name")
    if not isinstance(job_name, str) or not job_name:
        raise ConfigError("job.name is required", key="job.name")
    return job_name, str(config.get("job.id") or "1")


def _state_keys(
    graph: ApplicationGraph, keys: _Keys, config: Mapping[str, Any], names: _IntermediateNames
) -> None:
    """The stores of windows, tables and joins, their changelogs (on the intermediate
    system), and the clock they need."""
    windows = any(spec.kind == "window" for spec in graph.operators)
    joins = [spec for spec in graph.operators if spec.kind == "join"]
    if not windows and not joins and not graph.tables:
        return
    try:
        system: str | None = names.system if graph.intermediates else names._system(names.default)
    except ConfigError:
        system = None  # no kafka or memory system: the state is local only
    job = _job(config)
    if windows:
        window_keys(graph, keys.set, job, system, config, is_asynchronous(graph))
    table_keys(graph, keys.set, job, system, config)
    if joins:  # a join sweeps its expired entries at the tick: off, its stores only grow
        tick_needed(
            config,
            [f"the sweep of join {spec.op_id!r}" for spec in joins],
            "its stores would keep every key, expired or not, for good",
        )
        keys.values.setdefault("task.window.ms", WINDOW_TICK_MS)


def _operator_plans(
    graph: ApplicationGraph,
    intermediates: Mapping[str, StreamPlan],
    config: Mapping[str, Any],
    joins_in_event_time: frozenset[str],
) -> Iterable[OperatorPlan]:
    for spec in graph.operators:
        writes = None
        table = spec.settings.get("table")
        join = None
        serdes: tuple[tuple[str, Any], ...] = ()
        if spec.kind == "send_to":
            writes = ".".join(placed(spec.settings["output"].descriptor, config))
        elif spec.kind == "send_to_table" and table is not None:
            writes = f"table:{table.table_id}"
        elif spec.kind == "join":
            domain = "event" if spec.op_id in joins_in_event_time else "processing"
            join = (
                f"{domain} time, ttl {spec.settings['ttl_ms']} ms; stores {spec.op_id}-L, "
                f"{spec.op_id}-R"
            )
            roles = ("key", "message", "other_message")
            serdes = tuple(zip(roles, spec.settings["serdes"], strict=True))
        elif spec.kind in ("partition_by", "broadcast"):
            writes = intermediates[spec.op_id].qualified_name
        window = spec.settings.get("window") if spec.kind == "window" else None
        if window is not None and window.late_output is not None:
            writes = ".".join(placed(window.late_output.descriptor, config))
        if window is not None:
            serdes = (("key", window.key_serde), ("value", window.value_serde))
        yield OperatorPlan(
            op_id=spec.op_id,
            kind=spec.kind,
            inputs=tuple(_source_name(u, intermediates) for u in spec.upstream),
            writes=writes,
            window=None if window is None else window.describe(),
            accumulation_mode=None if window is None else window.accumulation_mode.value,
            store=None if window is None else spec.op_id,
            store_factory=None if window is None else window.store_factory,
            table=None if table is None else table.table_id,
            join=join,
            serdes=tuple((role, serde_label(serde)) for role, serde in serdes),
        )


def _source_name(spec: OperatorSpec, intermediates: Mapping[str, StreamPlan]) -> str:
    """An operator's input as ``samzapy plan`` names it: an operator id, or ``stream:<id>``."""
    if spec.kind != "input":
        return spec.op_id
    stream = spec.settings.get("intermediate")
    if stream is not None:
        return f"stream:{intermediates[stream.op_id].stream_id}"
    return f"stream:{spec.op_id}"


__all__ = [
    "INTERMEDIATE_FACTORIES",
    "intermediate_stream_id",
    "plan_application",
]
