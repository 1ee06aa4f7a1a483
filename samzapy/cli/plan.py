"""``samzapy plan JOB_YAML``: an application's operator graph, streams, tables and stores.

Prints the inputs, each operator (a task application has none: the class of the task its
factory made instead) with its id and kind and what it reads and writes (a join:
its time domain, ttl and stores), the outputs, the intermediate streams with their partition
counts, the tables, and the stores. A count that
``job.intermediate.stream.partitions`` does not set is the largest input partition count:
the inputs are looked up through the systems' admins (for at most ``LOOKUP_S`` seconds), and
shown as unknown when they cannot be. ``--format json`` prints one JSON document and nothing
else on stdout. The job is checked as ``samzapy validate`` checks it (``problems.check_job``);
exit codes as validate's: 0, or 2 with the problems on stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samzapy.api.errors import SamzapyError
from samzapy.api.task_application import TaskApplicationDescriptor
from samzapy.cli.logging import configure_logging, scrub
from samzapy.cli.problems import check_job
from samzapy.cli.process import add_working_directory_to_path, command_output, write_output

if TYPE_CHECKING:
    from samzapy.config import ResolvedConfig

LOOKUP_S = 10.0


def print_plan(job_yaml: str, overrides: Sequence[str], fmt: str) -> int:
    configure_logging("console", "warning", stream=sys.stderr)  # keep stdout pure
    add_working_directory_to_path()
    # What the application's module and describe (or a system's module) print goes to
    # stderr: stdout is the plan.
    with command_output() as out:
        # The check of `samzapy validate` and `run`: a job they refuse gets no plan (and a
        # system that cannot be built is not taken for inputs that cannot be reached).
        check = check_job(job_yaml, overrides)
        resolved, app = check.resolved, check.app
        if check.errors or resolved is None:
            for problem in check.problems:
                print(scrub(problem), file=sys.stderr)
            return 2
        if app is None:
            print(
                f"{job_yaml}: samzapy plan is for applications (app.class); this job runs the "
                f"task class {resolved.task.task_class}",
                file=sys.stderr,
            )
            return 2
        document = app.plan.to_dict()
        if isinstance(app.descriptor, TaskApplicationDescriptor) and check.task_class:
            cls = check.task_class
            document["task_class"] = f"{cls.__module__}:{cls.__qualname__}"
        _fill_partitions(document, resolved)
    text = json.dumps(document, indent=2) if fmt == "json" else _text(document)
    write_output(out, text + "\n")  # `samzapy plan job.yaml | head`: quietly
    return 0


def _fill_partitions(document: dict[str, Any], resolved: ResolvedConfig) -> None:
    """Sized at start-up: the largest input partition count, when the inputs can be found."""
    pending = [s for s in document["intermediate_streams"] if s["partitions"] is None]
    if not pending:
        return
    counts = _input_counts(resolved)
    for stream in pending:
        stream["partitions_rule"] = "largest input partition count"
        if counts:
            stream["partitions"] = max(counts)


def _input_counts(resolved: ResolvedConfig) -> list[int]:
    from samzapy.container.streams import partition_counts
    from samzapy.container.systems import started_admins

    inputs = [ss for ss in resolved.task.inputs if not resolved.stream(ss).intermediate]

    async def lookup() -> list[int]:
        async with started_admins(resolved) as admins:
            return list((await partition_counts(admins, inputs)).values())

    try:
        return asyncio.run(asyncio.wait_for(lookup(), LOOKUP_S))
    except (SamzapyError, TimeoutError, OSError):
        return []


def _text(document: dict[str, Any]) -> str:
    lines = [f"application: {document['app']}", "inputs:"]
    for s in document["inputs"]:
        lines.append(f"  {s['stream_id']}: {s['system']}.{s['physical_name']}{_serdes(s)}")
    if "task_class" in document:
        lines.append(f"task: {document['task_class']}")
    else:
        lines.append("operators:")
    for op in document["operators"]:
        writes = f" -> {op['writes']}" if "writes" in op else ""
        lines.append(f"  {op['op_id']} ({op['kind']}) <- {', '.join(op['inputs'])}{writes}")
        if "window" in op:
            store = f"store {op['store']} ({op['store_factory']})"
            lines.append(f"    {op['window']}; {store}{_state_serdes(op)}")
        if "table" in op and op["kind"] != "send_to_table":
            lines.append(f"    table {op['table']}")
        if "join" in op:
            lines.append(f"    {op['join']}{_state_serdes(op)}")
    lines.append("outputs:" + ("" if document["outputs"] else " none"))
    for s in document["outputs"]:
        lines.append(f"  {s['stream_id']}: {s['system']}.{s['physical_name']}{_serdes(s)}")
    lines.append("intermediate streams:" + ("" if document["intermediate_streams"] else " none"))
    for s in document["intermediate_streams"]:
        partitions = s["partitions"] if s["partitions"] is not None else "unknown"
        rule = f" ({s['partitions_rule']})" if "partitions_rule" in s else ""
        lines.append(
            f"  {s['system']}.{s['physical_name']}: {s['kind']} {s['op_id']}, partitions "
            f"{partitions}{rule}, upstream {', '.join(s['upstream'])}{_serdes(s)}"
        )
    lines.append("tables:" + ("" if document["tables"] else " none"))
    lines.extend(f"  {t['table_id']}: {t['description']}" for t in document["tables"])
    lines.append("stores:" + ("" if document["stores"] else " none"))
    lines.extend(f"  {name}" for name in document["stores"])
    return "\n".join(lines)


def _state_serdes(op: dict[str, Any]) -> str:
    """A window's or join's serdes given (not the default), as ``[key string, ...]``."""
    given = [f"{role} {serde}" for role, serde in op.get("serdes", {}).items() if serde]
    return f" [{', '.join(given)}]" if given else ""


def _serdes(stream: dict[str, Any]) -> str:
    parts = []
    if stream.get("key_serde"):
        parts.append(f"key {stream['key_serde']}")
    if stream.get("msg_serde"):
        parts.append(f"msg {stream['msg_serde']}")
    return f" [{', '.join(parts)}]" if parts else ""


__all__ = ["LOOKUP_S", "print_plan"]
