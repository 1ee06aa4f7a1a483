"""A checkpoint's stored form: one JSON document per task, shared by every manager.

The document (version 1)::

    {"version": 1, "task": "Partition 0",
     "offsets": [{"system": "kafka", "stream": "in", "partition": 0, "offset": "42"}],
     "extra": {"partition_counts": {"kafka.in": 8},
               "changelog_offsets": {"counts": "1200"},
               "control": {...}, "epoch": 4, "snapshots": {"counts": "1200"},
               "topic_ids": {"kafka.in": "vKlMTtsYQrWCVh3lu1ap7g"}}}

``extra`` holds the typed fields of ``Checkpoint`` besides the offsets, each under its own key
(absent when empty); keys this version does not know are ignored when read. Decoding checks
every field's type, so a damaged document fails here, naming where it came from, instead of
later in the store or control layers.

This module also says what a checkpoint must agree with at start-up: the partition counts
(``check_partition_counts``), and the topic IDs, which tell which inputs were made again since
(``recreated``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from samzapy.api.errors import CheckpointError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition, TaskName
from samzapy.checkpoint.ports import Checkpoint

DOCUMENT_VERSION = 1
#: The keys of the typed fields in the document's ``extra``.
PARTITION_COUNTS = "partition_counts"
CHANGELOG_OFFSETS = "changelog_offsets"
CONTROL = "control"
EPOCH = "epoch"
SNAPSHOTS = "snapshots"
TOPIC_IDS = "topic_ids"


def encode_checkpoint(task_name: str, checkpoint: Checkpoint) -> bytes:
    """The JSON document of a task's checkpoint; CheckpointError if it cannot be stored."""
    offsets: list[dict[str, Any]] = []
    for ssp, offset in checkpoint.offsets.items():
        if not isinstance(ssp, SystemStreamPartition):
            raise CheckpointError(
                f"checkpoint of task {task_name!r}: offsets must be keyed by "
                f"SystemStreamPartition, got {ssp!r}"
            )
        if not isinstance(offset, str):
            raise CheckpointError(
                f"checkpoint of task {task_name!r}: the offset of {ssp} must be a str, "
                f"got {offset!r} ({type(offset).__name__})"
            )
        offsets.append(
            {
                "system": ssp.system,
                "stream": ssp.stream,
                "partition": ssp.partition,
                "offset": offset,
            }
        )
    offsets.sort(key=lambda entry: (entry["system"], entry["stream"], entry["partition"]))
    extra: dict[str, Any] = {}
    if checkpoint.partition_counts:
        extra[PARTITION_COUNTS] = {
            str(ss): n for ss, n in sorted(checkpoint.partition_counts.items())
        }
    if checkpoint.changelog_offsets:
        extra[CHANGELOG_OFFSETS] = dict(sorted(checkpoint.changelog_offsets.items()))
    if checkpoint.control is not None:
        extra[CONTROL] = checkpoint.control
    if checkpoint.epoch is not None:
        extra[EPOCH] = checkpoint.epoch
    if checkpoint.snapshots:
        extra[SNAPSHOTS] = dict(sorted(checkpoint.snapshots.items()))
    if checkpoint.topic_ids:
        extra[TOPIC_IDS] = {str(ss): i for ss, i in sorted(checkpoint.topic_ids.items())}
    document = {"version": DOCUMENT_VERSION, "task": str(task_name), "offsets": offsets}
    document["extra"] = extra
    try:
        return json.dumps(document, indent=2, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"checkpoint of task {task_name!r}: the control state must be JSON-serializable: {exc}"
        ) from exc


def decode_checkpoint(data: bytes, source: str) -> tuple[TaskName, Checkpoint]:
    """The task name and checkpoint of a document; CheckpointError naming ``source``."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError(f"expected a JSON object, got {type(document).__name__}")
        version = document.get("version")
        if version != DOCUMENT_VERSION:
            raise ValueError(f"unsupported version {version!r}, expected {DOCUMENT_VERSION}")
        task = document["task"]
        entries = document["offsets"]
        extra = document.get("extra", {})
        if not isinstance(task, str) or not isinstance(entries, list):
            raise ValueError("'task' must be a string and 'offsets' a list")
        if not isinstance(extra, dict):
            raise ValueError(f"'extra' must be an object, got {type(extra).__name__}")
        checkpoint = Checkpoint(
            offsets=_offsets(entries),
            partition_counts=_partition_counts(extra.get(PARTITION_COUNTS)),
            changelog_offsets=_by_store(CHANGELOG_OFFSETS, extra.get(CHANGELOG_OFFSETS)),
            control=_control(extra.get(CONTROL)),
            epoch=_epoch(extra.get(EPOCH)),
            snapshots=_by_store(SNAPSHOTS, extra.get(SNAPSHOTS)),
            topic_ids=_topic_ids(extra.get(TOPIC_IDS)),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"corrupt checkpoint {source}: {exc}") from exc
    return TaskName(task), checkpoint


def _offsets(entries: list[Any]) -> dict[SystemStreamPartition, str]:
    offsets: dict[SystemStreamPartition, str] = {}
    for entry in entries:
        system, stream = entry["system"], entry["stream"]
        partition, offset = entry["partition"], entry["offset"]
        if (
            not isinstance(system, str)
            or not isinstance(stream, str)
            or type(partition) is not int
            or not isinstance(offset, str)
        ):
            raise ValueError(f"malformed offset entry {entry!r}")
        offsets[SystemStreamPartition(system, stream, partition)] = offset
    return offsets


def _partition_counts(value: Any) -> dict[SystemStream, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'{PARTITION_COUNTS}' must be an object, got {type(value).__name__}")
    counts: dict[SystemStream, int] = {}
    for name, count in value.items():
        system, dot, stream = name.partition(".")
        if not dot or not stream or type(count) is not int:
            raise ValueError(f"malformed partition count {name!r}: {count!r}")
        counts[SystemStream(system, stream)] = count
    return counts


def _topic_ids(value: Any) -> dict[SystemStream, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'{TOPIC_IDS}' must be an object, got {type(value).__name__}")
    ids: dict[SystemStream, str] = {}
    for name, topic_id in value.items():
        system, dot, stream = name.partition(".")
        if not dot or not stream or not isinstance(topic_id, str):
            raise ValueError(f"malformed topic ID {name!r}: {topic_id!r}")
        ids[SystemStream(system, stream)] = topic_id
    return ids


def _by_store(key: str, value: Any) -> dict[str, str]:
    """``changelog_offsets`` or ``snapshots``: store names to strings."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"'{key}' must map store names to strings, got {value!r}")
    return dict(value)


def _control(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"'{CONTROL}' must be an object, got {type(value).__name__}")
    return value


def _epoch(value: Any) -> int | None:
    if value is not None and type(value) is not int:
        raise ValueError(f"'{EPOCH}' must be an integer, got {value!r}")
    return value


#: What the operator of a job without stores does about an input that gained partitions
#: (docs/deploy.md, "Adding partitions to an input"): nothing but the checkpoints stands in
#: the way, and a new job can start from them.
STATELESS_REMEDY = (
    "this job keeps no stores, so unless its tasks keep state of their own it can read the "
    "new partitions too: run it as a new job (a new job.id; with file checkpoints, on the old "
    "job's host, a task.checkpoint.dir of its own) started from these checkpoints, "
    "`samzapy checkpoint show JOB | samzapy checkpoint set NEW_JOB --to -`, with the input's "
    "samza.offset.default at oldest so that the new partitions are read from their first "
    'message (docs/deploy.md, "Adding partitions to an input")'
)


def check_partition_counts(
    checkpoints: Mapping[TaskName, Checkpoint],
    counts: Mapping[SystemStream, int],
    *,
    stateless: bool = False,
) -> None:
    """Raise if an input's partition count differs from the one the checkpoints recorded.

    A stream's partition count must never change: a task's partition k must keep meaning the
    same keys, or its state would mix keys of different partitions. ``stateless``: the job
    has no stores, and the error says how it goes on with the new partitions.
    """
    for task_name, checkpoint in sorted(checkpoints.items()):
        for stream, before in sorted(checkpoint.partition_counts.items()):
            after = counts.get(stream)
            if after is not None and after != before:
                remedy = (
                    STATELESS_REMEDY
                    if stateless
                    else "write the data to a new stream with the partition count you want and "
                    "read that instead"
                )
                raise StreamSystemError(
                    f"input {stream} had {before} partitions when task {task_name!r} last "
                    f"checkpointed and has {after} now; a stream's partition count must never "
                    f"change (each task's state belongs to its partition): {remedy}"
                )


def recreated(
    checkpoint: Checkpoint, topic_ids: Mapping[SystemStream, str]
) -> dict[SystemStream, tuple[str, str]]:
    """The inputs made again since ``checkpoint`` was written: each stream whose recorded
    topic ID differs from its current one (``topic_ids``), with both (recorded, current). A
    stream the checkpoint records no ID for (written before topic IDs, or on a system
    without), or whose current ID is unknown, is never among them."""
    return {
        stream: (before, now)
        for stream, before in checkpoint.topic_ids.items()
        if (now := topic_ids.get(stream)) is not None and now != before
    }


__all__ = [
    "CHANGELOG_OFFSETS",
    "CONTROL",
    "DOCUMENT_VERSION",
    "EPOCH",
    "PARTITION_COUNTS",
    "SNAPSHOTS",
    "STATELESS_REMEDY",
    "TOPIC_IDS",
    "check_partition_counts",
    "decode_checkpoint",
    "encode_checkpoint",
    "recreated",
]
