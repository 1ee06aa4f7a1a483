"""The checks of an application's graph before it is planned (pure): at least one input,
every input used by an operator, every output written (by a ``send_to``, a late output, or
maybe a ``sink``), every ``partition_by`` or ``broadcast`` stream used, no output that is also
an input (a cycle through a stream), no stream id both an input's and an output's (a task
application's graph, without operators: an input, and the stream ids); and where
the job places a stream (``placed``), as the planner reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samzapy.api.descriptors import StreamDescriptor
from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph


def check_graph(graph: ApplicationGraph, config: Mapping[str, Any]) -> None:
    """Step 1 of the plan: the graph's inputs, outputs and intermediate streams are used,
    and its stream ids each name one stream (``config``: the job file's keys)."""
    if not graph.inputs:
        raise ConfigError(
            "the application described no input: call app_desc.get_input_stream(...) in describe"
        )
    for stream_id, spec in graph.inputs.items():
        if not spec.downstream:
            raise ConfigError(
                f"input stream {stream_id!r} is not used by any operator: apply an operator "
                "to it, or leave it out"
            )
    _check_outputs_written(graph)
    for stream in graph.intermediates:
        assert stream.reader is not None
        if not stream.reader.downstream:
            raise ConfigError(
                f"the stream {stream.kind} {stream.op_id!r} returns is not used by any "
                "operator: apply an operator to it, or leave the operator out"
            )
    _check_stream_ids(graph, config)


def check_task_graph(graph: ApplicationGraph, config: Mapping[str, Any]) -> None:
    """A task application's graph (inputs, outputs and tables, no operators): at least one
    input, and its stream ids each name one stream."""
    if not graph.inputs:
        raise ConfigError(
            "the application described no input: call app_desc.with_input_stream(...) in describe"
        )
    _check_stream_ids(graph, config)


def _check_outputs_written(graph: ApplicationGraph) -> None:
    """Every output is written: by a ``send_to`` or as a window's late output, else by a
    ``sink`` (whose collector may send anywhere: then it cannot be told)."""
    if any(spec.kind == "sink" for spec in graph.operators):
        return
    written = set()
    for spec in graph.operators:
        if spec.kind == "send_to":
            written.add(spec.settings["output"].stream_id)
        elif spec.kind == "window" and spec.settings["window"].late_output is not None:
            written.add(spec.settings["window"].late_output.stream_id)
    for stream_id in graph.outputs.keys() - written:
        raise ConfigError(
            f"output stream {stream_id!r} is not written by any operator: send_to it, or "
            "leave out its get_output_stream"
        )


def _check_stream_ids(graph: ApplicationGraph, config: Mapping[str, Any]) -> None:
    """A stream id names one stream (its ``streams.<id>.*`` keys): not an input and an
    output that differ, whose keys would be mixed, nor one stream read and written."""
    for stream_id in sorted(graph.inputs.keys() & graph.outputs.keys()):
        read = ".".join(placed(graph.inputs[stream_id].settings["descriptor"], config))
        written = ".".join(placed(graph.outputs[stream_id].descriptor, config))
        if read == written:
            raise ConfigError(
                f"output stream {stream_id!r} ({written}) is also an input of the application: "
                "a cycle through a stream is not allowed"
            )
        raise ConfigError(
            f"stream id {stream_id!r} is both an input ({read}) and an output ({written}) of "
            "the application: a stream id names one stream, its streams.<id>.* keys; give the "
            "output descriptor another stream id"
        )


def placed(descriptor: StreamDescriptor, config: Mapping[str, Any]) -> tuple[str, str]:
    """The stream's system and physical name: the job file's (``streams.<id>.samza.system``,
    ``streams.<id>.samza.physical.name``) win over the descriptor's."""
    prefix = f"streams.{descriptor.stream_id}.samza."
    system = config.get(prefix + "system") or descriptor.system_name
    physical = config.get(prefix + "physical.name") or descriptor.physical_name
    return str(system), str(physical)


__all__ = ["check_graph", "check_task_graph", "placed"]
