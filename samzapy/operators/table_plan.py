"""What tables and stream-stream joins add to an application's plan: stores and changelogs.

- A local table (``InMemoryTableDescriptor``, ``RocksDbTableDescriptor``) is store
  ``<table_id>`` of each task, with the table's serdes (a serde object is registered as
  ``<table_id>-key`` and ``<table_id>-msg``), its ``with_config`` settings and, when
  ``with_changelog_enabled()``, a changelog ``<job.name>-<job.id>-table-<table_id>`` (or the
  stream ``with_changelog_stream`` names) on the job's intermediate system. A remote table
  has no store; a caching table is the table it caches plus memory.
- A stream-stream join keeps each side in a store, ``<op_id>-L`` and ``<op_id>-R`` (bytes in
  and out: the operator serializes), RocksDB, changelogged as
  ``<job.name>-<job.id>-join-<op_id>-L`` and ``-R`` when the job has a system for it (as
  Samza names them). It runs in event time when every input that reaches it carries
  watermarks (``window_plan.carries``), else in processing time.

Two things may not claim one store name (a window's op id, a table id, a join's sides).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph, upstream_of
from samzapy.api.system import SystemStream
from samzapy.api.tables import (
    CachingTableDescriptor,
    LocalTableDescriptor,
    RemoteTableDescriptor,
)
from samzapy.operators.state_serdes import state_serde
from samzapy.operators.stream_joins import message_serde
from samzapy.operators.window_plan import carries


def store_names(graph: ApplicationGraph) -> dict[str, str]:
    """Every store the graph's operators and tables claim, with what claims it; an error
    naming both when two claim one name."""
    claimed: dict[str, str] = {}

    def claim(name: str, what: str) -> None:
        if name in claimed:
            raise ConfigError(
                f"store {name!r} is claimed by {claimed[name]} and by {what}: give one of them "
                "another id"
            )
        claimed[name] = what

    for spec in graph.operators:
        if spec.kind == "window":
            claim(spec.op_id, f"window {spec.op_id!r}")
        elif spec.kind == "join":
            claim(f"{spec.op_id}-L", f"join {spec.op_id!r}")
            claim(f"{spec.op_id}-R", f"join {spec.op_id!r}")
    for table_id, table in graph.tables.items():
        if isinstance(table.descriptor, LocalTableDescriptor):
            claim(table_id, f"table {table_id!r}")
    return claimed


def table_keys(
    graph: ApplicationGraph,
    set_key: Callable[[str, Any], None],
    job: tuple[str, str],
    changelog_system: str | None,
    config: Mapping[str, Any],
) -> None:
    """Each local table's and each join's store keys (``config``: the job file's keys, its
    serdes); a remote table without a read function and a join's unknown serde are errors."""
    store_names(graph)
    for table_id, table in graph.tables.items():
        descriptor = table.descriptor
        if isinstance(descriptor, RemoteTableDescriptor) and descriptor.read_fn is None:
            raise ConfigError(
                f"table {table_id!r}: a remote table needs a read function with a coroutine "
                "method get_async(key): give it with_read_function(...)"
            )
        if not isinstance(descriptor, LocalTableDescriptor):
            continue
        prefix = f"stores.{table_id}."
        set_key(prefix + "factory", descriptor.factory)
        for which, serde in (
            ("key", descriptor.kv_serde.key_serde),
            ("msg", descriptor.kv_serde.value_serde),
        ):
            set_key(prefix + f"{which}.serde", _serde_name(serde, f"{table_id}-{which}", set_key))
        for key, value in descriptor.configs.items():
            set_key(prefix + key, value)
        if descriptor.changelog_enabled:
            if changelog_system is None:
                raise ConfigError(
                    f"table {table_id!r} has a changelog, and the job has no kafka or memory "
                    "system to keep it on: set job.default.system "
                    "(app_desc.with_default_system(...))",
                    key="job.default.system",
                )
            topic = descriptor.changelog_stream or f"{job[0]}-{job[1]}-table-{table_id}"
            set_key(prefix + "changelog", f"{changelog_system}.{topic}")
    _check_writable(graph)
    for spec in graph.operators:
        if spec.kind != "join":
            continue
        _check_join_serdes(spec.op_id, spec.settings["serdes"], config)
        for side in ("L", "R"):
            prefix = f"stores.{spec.op_id}-{side}."
            set_key(prefix + "factory", "rocksdb")
            set_key(prefix + "key.serde", "bytes")
            set_key(prefix + "msg.serde", "bytes")
            if changelog_system is not None:
                topic = f"{job[0]}-{job[1]}-join-{spec.op_id}-{side}"
                set_key(prefix + "changelog", f"{changelog_system}.{topic}")


def _check_writable(graph: ApplicationGraph) -> None:
    """A ``send_to(table)`` reaches a table it can write: a remote table (or a cache in front
    of one) without a write function is an error at start-up, not at the first message."""
    for spec in graph.operators:
        if spec.kind != "send_to_table":
            continue
        table = spec.settings["table"]
        descriptor = table.descriptor
        if isinstance(descriptor, CachingTableDescriptor):
            descriptor = descriptor.table
        if isinstance(descriptor, RemoteTableDescriptor) and descriptor.write_fn is None:
            raise ConfigError(
                f"send_to_table {spec.op_id!r} writes to table {table.table_id!r}, a remote "
                "table without a write function (read-only): give it with_write_function(...) "
                "with coroutine methods put_async(key, value) and delete_async(key)"
            )


def check_copartitioned(
    graph: ApplicationGraph,
    streams: Mapping[str, SystemStream],
    counts: Mapping[SystemStream, int],
) -> None:
    """What a join brings together must be partitioned alike (a key in the same partition
    on each side): a stream-stream join's two sides, and a stream-table join's stream with
    the streams that fill its local table (``send_to(table)``, or ``send_to`` a cache in
    front of it). ``streams``: where each input and intermediate stream is; ``counts``: their
    partition counts at start-up. The partition_bys among them serialize their keys alike. A
    broadcast stream, read whole by every task, is left out."""
    for spec in graph.operators:
        if spec.kind == "join":
            sides = list(spec.upstream)
        elif spec.kind == "stream_table_join" and (
            store := _local_store(spec.settings["table"].descriptor)
        ):
            writers = [
                w
                for w in graph.operators
                if w.kind == "send_to_table"
                and _local_store(w.settings["table"].descriptor) == store
            ]
            sides = [*spec.upstream, *writers]
        else:
            continue
        found: dict[SystemStream, int] = {}
        key_serdes: dict[str, Any] = {}  # each partition_by's, by its op id
        for side in sides:
            for op in upstream_of(side):
                intermediate = op.settings.get("intermediate") if op.kind == "input" else None
                if op.kind != "input" or (intermediate and intermediate.kind == "broadcast"):
                    continue
                if intermediate is not None:
                    key_serdes[intermediate.op_id] = intermediate.serde.key_serde
                name = (
                    op.op_id
                    if intermediate is None
                    else f"{intermediate.kind}:{intermediate.op_id}"
                )
                stream = streams[name]
                if stream in counts:
                    found[stream] = counts[stream]
        if len(set(found.values())) > 1:
            listed = ", ".join(f"{stream} has {n}" for stream, n in found.items())
            raise ConfigError(
                f"{spec.kind.replace('_', '-')} {spec.op_id!r} brings together streams with "
                f"different partition counts ({listed}): a key must be in the same partition "
                "of each; give them the same count, or partition_by the others (an "
                "intermediate stream has the job's count)"
            )
        _check_key_serdes(spec, key_serdes)


def _check_key_serdes(spec: Any, key_serdes: Mapping[str, Any]) -> None:
    """The partition_bys whose streams a join brings together serialize their keys alike: a
    key goes to the partition its bytes hash to, so a key serialized two ways would be in
    two partitions. Only serdes given by name are compared (two serde objects of different
    classes may well write the same bytes)."""
    serdes = key_serdes.values()  # names are compared first: an object may be unhashable
    if all(isinstance(name, str) for name in serdes) and len(set(serdes)) > 1:
        listed = ", ".join(f"partition_by {op_id!r}: {name}" for op_id, name in key_serdes.items())
        raise ConfigError(
            f"{spec.kind.replace('_', '-')} {spec.op_id!r} brings together partition_by streams "
            f"whose keys are serialized differently ({listed}): a key is in the partition its "
            "serialized bytes hash to, so one key would be in different partitions of each; "
            "give them the same key serde"
        )


def _local_store(descriptor: Any) -> str | None:
    """The local table a table keeps its entries in (itself, or the one a cache is in front
    of: a write to either reaches it), by id; None for a remote table."""
    if isinstance(descriptor, CachingTableDescriptor):
        descriptor = descriptor.table
    return descriptor.table_id if isinstance(descriptor, LocalTableDescriptor) else None


def _check_join_serdes(op_id: str, serdes: tuple[Any, Any, Any], config: Mapping[str, Any]) -> None:
    """A join's serdes, made as its task will make them (``JoinSide.open``): an unknown
    name is an error at start-up, naming the join."""
    key, first, second = serdes
    for what, serde, make in (
        ("key", key, state_serde),
        ("message", first, message_serde),
        ("other message", second, message_serde),
    ):
        try:
            make(serde, config)
        except ConfigError as exc:
            raise ConfigError(f"join {op_id!r}: its {what} serde: {exc}") from exc


def _serde_name(serde: Any, name: str, set_key: Callable[[str, Any], None]) -> str:
    if isinstance(serde, str):
        return serde
    set_key(f"serializers.registry.{name}.class", serde)
    return name


def _join_inputs(
    graph: ApplicationGraph, config: Mapping[str, Any]
) -> Iterator[tuple[str, dict[str, bool]]]:
    """Each stream-stream join's op_id, with the input streams upstream of it (through
    intermediate streams) and whether each carries watermarks."""
    for spec in graph.operators:
        if spec.kind == "join":
            yield (
                spec.op_id,
                {
                    op.op_id: carries(op.settings["descriptor"], config)
                    for op in upstream_of(spec, through_intermediates=True)
                    if op.kind == "input" and op.settings.get("intermediate") is None
                },
            )


def half_watermarked_joins(
    graph: ApplicationGraph, config: Mapping[str, Any]
) -> list[tuple[str, list[str]]]:
    """``(join op_id, its input stream ids without watermarks)`` for each stream-stream join
    some of whose inputs carry watermarks and some not: it runs in processing time, which
    its author, having given watermarks, may not expect."""
    found = []
    for op_id, inputs in _join_inputs(graph, config):
        without = [stream_id for stream_id, timed in inputs.items() if not timed]
        if without and len(without) < len(inputs):
            found.append((op_id, without))
    return found


def event_time_joins(graph: ApplicationGraph, config: Mapping[str, Any]) -> frozenset[str]:
    """The stream-stream joins that run in event time: every input stream upstream of them
    (through intermediate streams) carries watermarks."""
    return frozenset(
        op_id for op_id, inputs in _join_inputs(graph, config) if inputs and all(inputs.values())
    )


def is_remote(table: Any) -> bool:
    """Whether a table's calls are asynchronous (anything not a local store)."""
    return not isinstance(table.descriptor, LocalTableDescriptor)


_TABLE_USERS = ("send_to_table", "stream_table_join")


def is_asynchronous(graph: ApplicationGraph) -> bool:
    """Whether the graph's operator task is asynchronous: a ``flat_map_async``, or an
    operator that calls a remote table."""
    return any(
        spec.kind == "flat_map_async"
        or (
            spec.kind in ("send_to_table", "stream_table_join")
            and is_remote(spec.settings["table"])
        )
        for spec in graph.operators
    )


__all__ = [
    "check_copartitioned",
    "event_time_joins",
    "half_watermarked_joins",
    "is_asynchronous",
    "is_remote",
    "store_names",
    "table_keys",
]
