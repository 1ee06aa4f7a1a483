"""What a test gave a TestRunner against what its job reads: a mismatch is the test's mistake.

A task runner is given a task class (not an instance, nor an application: that is
``TestRunner.of``'s), and ``run`` a timeout that is a duration; anything else is refused at
the call.

Messages given for a stream the job does not read would be silently left out, and a stream
the job reads that nobody gave would fail the run with an error about the in-memory system
(or, for a job file's Kafka inputs, wait for a broker until the timeout); each is refused
before the job starts, naming the call and the key at fault. So is a memory system of the
job moved out of the runner's namespace: its streams would be where the runner neither
gives inputs nor reads outputs (``result.outputs`` empty, or a KeyError for a stream never
written there).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any

from samzapy.api.application import StreamApplication
from samzapy.api.descriptors import InputDescriptor, StreamDescriptor
from samzapy.api.system import SystemStream
from samzapy.api.task import AsyncStreamTask, StreamTask
from samzapy.config import ResolvedConfig
from samzapy.system.inmemory import InMemoryBroker


def check_task_inputs(
    resolved: ResolvedConfig,
    system: str,
    namespace: str,
    given: Mapping[str, Collection[str]],
    broker: InMemoryBroker,
) -> None:
    """A task job's: every memory system of the job is in the runner's ``namespace``; every
    stream given (``given``: the call, ``add_input`` or ``add_intermediate``, to its streams)
    is an input of the job on the runner's ``system``; and every input of the job on a
    memory system is on ``broker`` (given, or made by an earlier job of the namespace)."""
    for name, settings in sorted(resolved.systems.items()):
        found = settings.params.get("namespace")
        if settings.factory == "memory" and found != namespace:
            raise ValueError(
                f"systems.{name}.namespace is {found!r}, not the runner's {namespace!r}: the "
                f"job's streams on system {name!r} would be where the runner neither gives "
                "inputs (add_input) nor reads outputs (add_output, result.outputs): leave "
                f"systems.{name}.namespace out (the runner puts every memory system of the "
                f"job in its namespace), or give TestRunner namespace={found!r} to share the "
                "streams of that namespace (another runner's)"
            )
    read = {*resolved.task.inputs, *(b.system_stream for b in resolved.task.broadcast_inputs)}
    for call, streams in given.items():
        for stream in streams:
            if SystemStream(system, stream) not in read:
                listed = ", ".join(sorted(str(ss) for ss in read))
                raise ValueError(
                    f"{call}({stream!r}): the config's task.inputs ({listed}) does not read "
                    f"{system}.{stream}: leave task.inputs out (the runner sets it from "
                    f"add_input and add_intermediate) or list {system}.{stream} in it"
                )
    for ss in sorted(read, key=str):
        on = resolved.systems.get(ss.system)
        ours = on is not None and on.factory == "memory"
        if ours and broker.partition_count(ss.stream) is None:
            raise ValueError(
                f"the config (task.inputs or task.broadcast.inputs) reads {ss}, which has no "
                f"messages: give it some with add_input({ss.stream!r}, messages)"
            )


def check_task_class(task_class: Any) -> None:
    """``TestRunner(task_class)`` is given a class, and not an application's."""
    if not isinstance(task_class, type):
        given = type(task_class).__name__
        if isinstance(task_class, StreamTask | AsyncStreamTask):
            raise TypeError(
                f"TestRunner() takes a task class, not an instance of {given}: "
                f"TestRunner({given}) (the container makes one instance per task)"
            )
        raise TypeError(f"TestRunner() takes a task class, not {given} {task_class!r:.60}")
    if issubclass(task_class, StreamApplication):
        raise TypeError(
            f"{task_class.__name__} is an application: run it with "
            f"TestRunner.of({task_class.__name__})"
        )


def timeout_s(timeout: Any) -> float:
    """``run``'s ``timeout`` in seconds: a number or a ``timedelta`` (Samza's ``run`` takes a
    ``Duration``), more than zero; ``math.inf`` waits as long as the job runs."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if type(seconds) not in (int, float) or not seconds > 0:  # NaN too
        raise (ValueError if type(seconds) in (int, float) else TypeError)(
            f"run(timeout={timeout!r}): expected seconds > 0 (a number or a timedelta)"
        )
    return float(seconds)


def check_app_inputs(
    resolved: ResolvedConfig,
    names: Mapping[str, str],
    streams: Mapping[str, StreamDescriptor],
    broker: InMemoryBroker,
) -> None:
    """An application's: messages given for a stream it does not read, or none for one it
    reads (and no other job of the namespace wrote). ``names``: the job's name of each of
    ``streams`` (descriptors by stream id)."""
    read = {ss.stream for ss in resolved.task.inputs}
    for stream_id, descriptor in streams.items():
        if isinstance(descriptor, InputDescriptor) and names[stream_id] not in read:
            raise ValueError(
                f"add_input_stream: the application reads no stream {stream_id!r} (it "
                f"reads {', '.join(sorted(read))})"
            )
    for ss in resolved.task.inputs:
        if resolved.stream(ss).intermediate:
            continue  # the job makes it
        if broker.partition_count(ss.stream) is None:
            raise ValueError(
                f"the application reads stream {ss.stream!r}, which has no messages: "
                "give it some with add_input_stream(descriptor, messages)"
            )


__all__ = ["check_app_inputs", "check_task_class", "check_task_inputs", "timeout_s"]
