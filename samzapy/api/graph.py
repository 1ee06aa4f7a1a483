"""The application graph the high-level API builds: operator specs, intermediate streams,
the tables and the inputs and outputs an application described (pure: nothing runs here).

``MessageStream`` (``stream.py``) adds to it; the planner (``samzapy.operators.plan``) reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from samzapy.api.descriptors import KVSerde, check_id
from samzapy.api.errors import ConfigError

if TYPE_CHECKING:
    from samzapy.api.descriptors import OutputDescriptor
    from samzapy.api.tables import Table


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

    @property
    def keyed(self) -> bool:
        """Whether its records carry a key, read back as ``KV``s: a ``KVSerde``'s stream."""
        return isinstance(self.serde, KVSerde)


class ApplicationGraph:
    """The operators, inputs, outputs and intermediate streams an application described."""

    def __init__(self) -> None:
        self.inputs: dict[str, OperatorSpec] = {}
        self.outputs: dict[str, OutputStream] = {}
        self.intermediates: list[IntermediateStream] = []
        #: Every table of the application by id, a caching table's inner table included.
        self.tables: dict[str, Table] = {}
        self.operators: list[OperatorSpec] = []
        #: Every operator id, an input's stream id included, and what it names (an error
        #: naming an id used twice names both).
        self.op_ids: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self.frozen = False

    def check_open(self, what: str) -> None:
        if self.frozen:
            raise ConfigError(
                f"{what} was called after the application was described: the graph is built "
                "in describe() only"
            )

    def new_op_id(self, kind: str, given: str | None, names: str | None = None) -> str:
        """``given`` checked and claimed, or the next ``<kind>-<n>``; ``names``: what the id
        names, for errors (default: an operator of ``kind``)."""
        names = names or f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        if given is None:
            n = self._counts.get(kind, 0) + 1
            while f"{kind}-{n}" in self.op_ids:
                n += 1
            self._counts[kind] = n
            op_id = f"{kind}-{n}"
        else:
            op_id = check_id(given, f"the op_id of {kind}")
            if op_id in self.op_ids:
                raise ConfigError(
                    f"op_id {op_id!r} is used twice: by {self.op_ids[op_id]} and by {names}: "
                    "operator ids must be unique"
                )
        self.op_ids[op_id] = names
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


__all__ = [
    "ApplicationGraph",
    "IntermediateStream",
    "OperatorSpec",
    "OutputStream",
    "upstream_of",
]
