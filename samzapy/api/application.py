"""StreamApplication and its descriptor: what an application describes in ``describe``.

    class PageViewFilter(StreamApplication):
        def describe(self, app_desc):
            kafka = KafkaSystemDescriptor("kafka")
            views = app_desc.get_input_stream(kafka.get_input_descriptor("page-views", "json"))
            out = app_desc.get_output_stream(kafka.get_output_descriptor("mobile", "json"))
            views.filter(lambda v: v["device"] == "mobile").send_to(out)

``app.class: module:PageViewFilter`` in the job file runs it. ``describe`` is called once at
start-up, before anything is read or written; calling the descriptor's methods later is an
error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samzapy.api.descriptors import InputDescriptor, OutputDescriptor, SystemDescriptor
from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph
from samzapy.api.stream import (
    MessageStream,
    OutputStream,
    add_input,
    add_output,
    add_table,
)
from samzapy.api.tables import Table, TableDescriptor


class StreamApplication:
    """An application of the high-level API: ``describe`` builds its graph."""

    def describe(self, app_desc: StreamApplicationDescriptor) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must define describe(self, app_desc), which builds its "
            "graph from app_desc's input streams"
        )


class StreamApplicationDescriptor:
    """Given to ``StreamApplication.describe``: the job's config and the graph's entry points."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self.graph = ApplicationGraph()
        #: ``with_default_system``: where intermediate streams live.
        self.default_system: SystemDescriptor | None = None

    @property
    def config(self) -> Mapping[str, Any]:
        """The job file's keys, flat (``${VAR}`` resolved, ``--set`` applied)."""
        return self._config

    def get_input_stream(self, input_descriptor: InputDescriptor) -> MessageStream:
        """The stream of ``input_descriptor``'s messages (``KV`` with a ``KVSerde``)."""
        if not isinstance(input_descriptor, InputDescriptor):
            raise ConfigError(
                "get_input_stream takes an input descriptor "
                f"(system_descriptor.get_input_descriptor(...)), got {input_descriptor!r}"
            )
        return add_input(self.graph, input_descriptor)

    def get_output_stream(self, output_descriptor: OutputDescriptor) -> OutputStream:
        """The stream ``send_to`` writes to."""
        if not isinstance(output_descriptor, OutputDescriptor):
            raise ConfigError(
                "get_output_stream takes an output descriptor "
                f"(system_descriptor.get_output_descriptor(...)), got {output_descriptor!r}"
            )
        return add_output(self.graph, output_descriptor)

    def get_table(self, table_descriptor: TableDescriptor) -> Table:
        """The table ``table_descriptor`` describes (``samzapy.api.tables``): a handle for
        ``send_to`` and ``join``; each task reaches its instance with
        ``context.get_table(table_id)``. Asking twice with one descriptor gives one table; one
        table id with two different descriptors is an error."""
        return add_table(self.graph, table_descriptor)

    def with_default_system(self, system: SystemDescriptor) -> StreamApplicationDescriptor:
        """The system intermediate streams live on (``job.default.system``)."""
        self.graph.check_open("with_default_system")
        if not isinstance(system, SystemDescriptor):
            raise ConfigError(f"with_default_system takes a system descriptor, got {system!r}")
        self.default_system = system
        return self


__all__ = ["StreamApplication", "StreamApplicationDescriptor"]
