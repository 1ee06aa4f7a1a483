"""What ``samzapy plan`` prints of an application: its streams, operators, tables, stores,
and the config keys the planner (``plan.py``) derived."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StreamPlan:
    """One stream of the job, as the application described it."""

    stream_id: str
    system: str
    physical_name: str
    role: str  # input, output, intermediate
    key_serde: str | None
    msg_serde: str | None
    keyed: bool
    #: intermediate: the count it is created with (None: the largest input's, at start-up).
    partitions: int | None = None
    broadcast: bool = False
    op_id: str | None = None
    #: intermediate: the streams whose messages reach its writer (``system.stream``).
    upstream: tuple[str, ...] = ()

    @property
    def qualified_name(self) -> str:
        return f"{self.system}.{self.physical_name}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stream_id": self.stream_id,
            "system": self.system,
            "physical_name": self.physical_name,
            "key_serde": self.key_serde,
            "msg_serde": self.msg_serde,
            "keyed": self.keyed,
        }
        if self.role == "intermediate":
            out.update(
                kind="broadcast" if self.broadcast else "partition_by",
                op_id=self.op_id,
                partitions=self.partitions,
                upstream=list(self.upstream),
            )
        return out


@dataclass(frozen=True)
class OperatorPlan:
    op_id: str
    kind: str
    #: The ids of the operators (or input streams) it takes messages from.
    inputs: tuple[str, ...]
    #: send_to, partition_by, broadcast: the stream it writes (``system.stream``).
    writes: str | None = None
    #: window: its description (kind, size, time domain, lateness, triggers, accumulation
    #: mode), its accumulation mode, its store and the store's factory (``with_store``).
    window: str | None = None
    accumulation_mode: str | None = None
    store: str | None = None
    store_factory: str | None = None
    #: send_to a table, stream_table_join: the table's id.
    table: str | None = None
    #: join: its time domain, ttl and stores.
    join: str | None = None
    #: window, join: the serdes its stores keep keys and values with, by role (``key``,
    #: ``value``; a join's ``key``, ``message``, ``other_message``); None: the default.
    serdes: tuple[tuple[str, str | None], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op_id": self.op_id, "kind": self.kind, "inputs": list(self.inputs)}
        if self.writes is not None:
            out["writes"] = self.writes
        if self.window is not None:
            out["window"] = self.window
            out["accumulation_mode"] = self.accumulation_mode
            out["store"] = self.store
            out["store_factory"] = self.store_factory
        if self.table is not None:
            out["table"] = self.table
        if self.join is not None:
            out["join"] = self.join
        if self.serdes:
            out["serdes"] = dict(self.serdes)
        return out


@dataclass(frozen=True)
class TablePlan:
    """One table of the application: its id, kind and what backs it."""

    table_id: str
    kind: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"table_id": self.table_id, "kind": self.kind, "description": self.description}


@dataclass(frozen=True)
class AppPlan:
    """What an application's job is made of, and the config keys it yields."""

    app: str
    inputs: tuple[StreamPlan, ...]
    outputs: tuple[StreamPlan, ...]
    intermediates: tuple[StreamPlan, ...]
    operators: tuple[OperatorPlan, ...]
    config: Mapping[str, Any] = field(repr=False)
    #: The stores the job declares (``stores.<name>.*``).
    stores: tuple[str, ...] = ()
    tables: tuple[TablePlan, ...] = ()
    #: The stream-stream joins that run in event time (``table_plan.event_time_joins``).
    event_time_joins: frozenset[str] = frozenset()
    #: The event-time windows that fire at end-of-stream only (``window_plan.held_to_the_end``).
    held_windows: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "inputs": [s.to_dict() for s in self.inputs],
            "operators": [o.to_dict() for o in self.operators],
            "outputs": [s.to_dict() for s in self.outputs],
            "intermediate_streams": [s.to_dict() for s in self.intermediates],
            "tables": [t.to_dict() for t in self.tables],
            "stores": list(self.stores),
        }


__all__ = ["AppPlan", "OperatorPlan", "StreamPlan", "TablePlan"]
