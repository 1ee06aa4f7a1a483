"""TaskApplication and its descriptor: a low-level job described in code, as Samza's.

    class PageViewCounts(TaskApplication):
        def describe(self, app_desc):
            kafka = KafkaSystemDescriptor("kafka")
            app_desc.with_input_stream(kafka.get_input_descriptor("page-views", "json"))
            app_desc.with_output_stream(kafka.get_output_descriptor("counts", "json"))
            app_desc.with_table(RocksDbTableDescriptor("counts", KVSerde("string", "integer")))
            app_desc.with_task_factory(PageViewCounter)

``app.class: module:PageViewCounts`` in the job file runs it: the descriptors give the keys
a ``task.class`` job's file holds (``task.inputs``, systems, streams, serdes, stores), and
each task's instance comes from one call of the task factory. The descriptors are the ones
a ``StreamApplication`` uses, and yield the same keys. ``describe`` is called once at
start-up; calling the descriptor's methods later is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from samzapy.api.descriptors import InputDescriptor, OutputDescriptor, SystemDescriptor
from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph
from samzapy.api.stream import add_input, add_output, add_table
from samzapy.api.tables import TableDescriptor


class TaskApplication:
    """A low-level application: ``describe`` names its streams, tables and task factory."""

    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        raise NotImplementedError(
            f"{type(self).__name__} must define describe(self, app_desc), which gives "
            "app_desc its input streams and its task factory"
        )


class TaskApplicationDescriptor:
    """Given to ``TaskApplication.describe``: the job's config, and what the job reads,
    writes, keeps and runs. Each ``with_*`` method returns the descriptor."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        #: The inputs, outputs and tables, in the graph a StreamApplication's would be in
        #: (no operators: the task is the processing), so that both are planned alike.
        self.graph = ApplicationGraph()
        #: ``with_default_system``: where the tables' changelogs live.
        self.default_system: SystemDescriptor | None = None
        #: ``with_task_factory``: makes each task's instance.
        self.task_factory: Callable[[], Any] | None = None

    @property
    def config(self) -> Mapping[str, Any]:
        """The job file's keys, flat (``${VAR}`` resolved, ``--set`` applied)."""
        return self._config

    def with_input_stream(self, input_descriptor: InputDescriptor) -> TaskApplicationDescriptor:
        """Read ``input_descriptor``'s stream: it is among ``task.inputs``."""
        self._check_open("with_input_stream")
        if not isinstance(input_descriptor, InputDescriptor):
            raise ConfigError(
                "with_input_stream takes an input descriptor "
                f"(system_descriptor.get_input_descriptor(...)), got {input_descriptor!r}"
            )
        if input_descriptor.stream_id in self.graph.inputs:
            raise ConfigError(
                f"with_input_stream was called twice for stream {input_descriptor.stream_id!r}: "
                "add each input once"
            )
        add_input(self.graph, input_descriptor)
        return self

    def with_output_stream(self, output_descriptor: OutputDescriptor) -> TaskApplicationDescriptor:
        """Declare the stream ``output_descriptor`` describes, which the task sends to: its
        system, physical name and serdes become the job's keys."""
        self._check_open("with_output_stream")
        if not isinstance(output_descriptor, OutputDescriptor):
            raise ConfigError(
                "with_output_stream takes an output descriptor "
                f"(system_descriptor.get_output_descriptor(...)), got {output_descriptor!r}"
            )
        add_output(self.graph, output_descriptor)
        return self

    def with_table(self, table_descriptor: TableDescriptor) -> TaskApplicationDescriptor:
        """A local table of each task (``InMemoryTableDescriptor``, ``RocksDbTableDescriptor``):
        the task reaches it with ``context.get_table(table_id)`` (or its store with
        ``context.get_store(table_id)``)."""
        self._check_open("with_table")
        if not isinstance(table_descriptor, TableDescriptor):
            raise ConfigError(
                "with_table takes a table descriptor (RocksDbTableDescriptor, "
                f"InMemoryTableDescriptor), got {table_descriptor!r}"
            )
        add_table(self.graph, table_descriptor)
        return self

    def with_task_factory(self, factory: Callable[[], Any]) -> TaskApplicationDescriptor:
        """What makes each task's instance: a task class (a ``StreamTask`` or
        ``AsyncStreamTask`` subclass, created with no arguments), or a callable taking no
        arguments that returns a new task instance, called once per task."""
        self._check_open("with_task_factory")
        if self.task_factory is not None:
            raise ConfigError(
                f"with_task_factory was called twice ({self.task_factory!r}, then {factory!r}): "
                "a task application has one task factory"
            )
        if not callable(factory):
            raise ConfigError(
                "with_task_factory takes a task class or a callable with no arguments that "
                f"returns a task, got {factory!r}"
            )
        self.task_factory = factory
        return self

    def with_default_system(self, system: SystemDescriptor) -> TaskApplicationDescriptor:
        """The job's default system (``job.default.system``): where the tables' changelogs
        live (the job file's key wins)."""
        self._check_open("with_default_system")
        if not isinstance(system, SystemDescriptor):
            raise ConfigError(f"with_default_system takes a system descriptor, got {system!r}")
        self.default_system = system
        return self

    def _check_open(self, what: str) -> None:
        if self.graph.frozen:
            raise ConfigError(
                f"{what} was called after the application was described: a task application "
                "is described in describe() only"
            )


__all__ = ["TaskApplication", "TaskApplicationDescriptor"]
