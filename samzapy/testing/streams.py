"""A TestRunner's streams in its namespace before a run: made from what the test gave.

1. Each input is created with the partitions it was given, filled with the records of its
   messages (serialized as the job's config says: ``records.py``) and ended, unless it was
   given with ``end=False``: then the job runs until a task shuts it down or the run's
   timeout;
2. each output and intermediate stream is created with its declared partition count.

A send to a partition an output does not have fails the job with the container's remedy,
``streams.<id>.partitions``, which a runner does not read for a stream it made: ``retold``
gives the runner's way instead, ``add_output``'s ``partitions``.

A stream the namespace has already (an earlier run, a restart, reads it as it is; or the test
made it on the runner's ``broker``) is left as it is, but the messages given for it must be
those a partition holds, and an output its declared partition count: others would be
silently left out, so each mismatch is a ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import TaskError
from samzapy.config import ResolvedConfig
from samzapy.container.send_errors import out_of_range_of
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing.records import given_records


def prepare_streams(
    broker: InMemoryBroker,
    config: ResolvedConfig,
    inputs: Mapping[str, Mapping[int, list[Any]]],
    ends: Mapping[str, bool],
) -> None:
    """Step 1, for the messages given (``inputs``: ``{stream: {partition: [messages]}}``)."""
    for stream, by_partition in inputs.items():
        records = given_records(config, stream, by_partition)
        existing = broker.partition_count(stream)
        if existing is not None:
            if any(
                written
                and (p >= existing or broker.records(stream, p) != [(k, m) for k, m, _ in written])
                for p, written in records.items()
            ):
                raise ValueError(
                    f"input {stream!r} already exists in namespace {broker.namespace!r} "
                    f"with {existing} partition(s) and other messages than given (an "
                    "earlier run of this runner or namespace made it): a restart reads it "
                    "as it is, so give it the same messages, or use a new TestRunner"
                )
            continue
        broker.create_stream(stream, max(by_partition, default=0) + 1)
        for p, written in records.items():
            for key, message, timestamp in written:
                broker.append(stream, p, key, message, timestamp)
        if ends[stream]:
            broker.end_stream(stream)


def create_outputs(
    broker: InMemoryBroker, outputs: Mapping[str, int], intermediate: Mapping[str, int]
) -> None:
    """Step 2 (``outputs`` and ``intermediate``: each stream's partition count)."""
    for stream, partitions in outputs.items():
        existing = broker.partition_count(stream)
        if existing is not None and existing != partitions:
            raise ValueError(
                f"output {stream!r} already exists in namespace {broker.namespace!r} with "
                f"{existing} partition(s), not {partitions}: declare it as the earlier "
                "run did, or use a new TestRunner"
            )
    for stream, partitions in {**outputs, **intermediate}.items():
        if broker.partition_count(stream) is None:
            broker.create_stream(stream, partitions)


def retold(error: TaskError, config: ResolvedConfig, *, app: bool) -> TaskError | None:
    """``error`` with the runner's remedy when its cause is a send to a partition a memory
    stream lacks (``app``: the application's call, ``add_output_stream``); else None."""
    cause = error.__cause__
    found = out_of_range_of(cause)
    if found is None:
        return None
    ss = found.system_stream
    system = config.systems.get(ss.system)
    if system is None or system.factory != "memory":
        return None
    declare = "add_output_stream(<its descriptor>" if app else f"add_output({ss.stream!r}"
    better = found.error(f"{declare}, partitions={found.partition + 1})")
    better = better.with_traceback(cause.__traceback__ if cause is not None else None)
    retold = TaskError(
        str(error).replace(str(cause), str(better)),
        task_name=error.task_name,
        ssp=error.ssp,
        offset=error.offset,
        operator=error.operator,
    )
    retold.__cause__ = better
    return retold


__all__ = ["create_outputs", "prepare_streams", "retold"]
