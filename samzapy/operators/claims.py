"""What an application's parts claim by name: stores and physical streams (pure).

Operator ids are unique, and so are the names of the application's own stores
(``table_plan.store_names``), but the other names the planner makes from ids are not unique
by construction: a window ``partition_by-x`` keeps its changelog in
``<job.name>-<job.id>-partition_by-x-changelog``, the intermediate stream of a
``partition_by`` ``x-changelog``; a window ``table-t`` in the changelog of table
``t-changelog``. Each such name stays what it is (a stream or store in use keeps its name),
and ``check_claims`` refuses, when the application is planned (at start-up, in ``samzapy
validate`` and ``samzapy plan``), naming both claimants and the name:

1. a window's or a join's store that the job file gives a key or message serde other than
   ``bytes``: the window and the join keep bytes they serialize themselves, so that is another
   store the job file declares under their name (the job file may tune their stores with
   other keys, which win, as for every key of an application);
2. one physical stream (system and name, as the job file and the application together place
   it) claimed twice among the inputs, the outputs, the intermediate streams of
   ``partition_by`` and ``broadcast``, and the changelog of every store (the application's
   and the job file's). Outputs may share a stream; an input may not be another input (the
   job would read the stream once, for one of them only); an input that is an output is the
   planner's own check (a cycle through a stream). The configuration's check
   (``config/changelogs.py``) finds some of these too, by key, for any job; here they are
   named by what made them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.graph import ApplicationGraph
from samzapy.operators.plan_document import StreamPlan
from samzapy.operators.table_plan import store_names

#: The serde the stores of windows and joins are given (``window_plan``, ``table_plan``).
_OWN_SERDE = "bytes"


def check_claims(
    graph: ApplicationGraph,
    streams: Iterable[StreamPlan],
    config: Mapping[str, Any],
    merged: Mapping[str, Any],
) -> None:
    """``streams``: the plan's inputs, outputs and intermediate streams; ``config``: the job
    file's keys; ``merged``: the application's keys with the job file's over them."""
    owners = store_names(graph)
    _check_own_serdes(graph, config)  # 1.
    claimed: dict[tuple[str, str], tuple[str, str]] = {}  # 2.
    for stream in streams:
        if stream.role == "intermediate":
            kind = "broadcast" if stream.broadcast else "partition_by"
            what = f"the intermediate stream of {kind} {stream.op_id!r}"
        else:
            what = f"{stream.role} stream {stream.stream_id!r}"
        prefix = f"streams.{stream.stream_id}.samza."
        system = merged.get(prefix + "system") or stream.system
        physical = merged.get(prefix + "physical.name") or stream.physical_name
        _claim(claimed, str(system), str(physical), what, stream.role)
    stores = {k.split(".")[1] for k in merged if k.startswith("stores.") and k.count(".") > 1}
    for store in sorted(stores):
        changelog = merged.get(f"stores.{store}.changelog")
        if not isinstance(changelog, str) or "." not in changelog:
            continue  # none, or malformed: the configuration's check says so
        system, _, physical = changelog.partition(".")
        owner = owners.get(store)
        what = (
            f"the changelog of the job file's store {store!r}"
            if owner is None
            else f"the changelog of {owner} (store {store!r})"
        )
        _claim(claimed, system, physical, what, "changelog")


def _claim(
    claimed: dict[tuple[str, str], tuple[str, str]],
    system: str,
    physical: str,
    what: str,
    role: str,
) -> None:
    """``role``: input, output, intermediate or changelog; only outputs share a stream."""
    found = claimed.get((system, physical))
    if found is None:
        claimed[(system, physical)] = (what, role)
    elif role == "input" and found[1] == "input":
        raise ConfigError(
            f"{found[0]} and {what} are both stream {system}.{physical}: an input is read "
            "once: describe it once and apply several operators to its MessageStream"
        )
    elif not (role == "output" and found[1] == "output"):
        raise ConfigError(
            f"{found[0]} and {what} are both stream {system}.{physical}: one stream cannot be "
            "both; give one of them another id or name"
        )


def _check_own_serdes(graph: ApplicationGraph, config: Mapping[str, Any]) -> None:
    for spec in graph.operators:
        if spec.kind == "window":
            stores = [spec.op_id]
        elif spec.kind == "join":
            stores = [f"{spec.op_id}-L", f"{spec.op_id}-R"]
        else:
            continue
        for store in stores:
            for which in ("key", "msg"):
                key = f"stores.{store}.{which}.serde"
                serde = config.get(key)
                if serde is not None and serde != _OWN_SERDE:  # None: not set
                    raise ConfigError(
                        f"store {store!r} is the store of {spec.kind} {spec.op_id!r}, which "
                        f"keeps bytes it serializes itself, and the job file gives it {key}: "
                        f"{serde!r}, as if it declared a store of its own under that name: "
                        f"give the job file's store another name (or leave out {key})",
                        key=key,
                    )


__all__ = ["check_claims"]
