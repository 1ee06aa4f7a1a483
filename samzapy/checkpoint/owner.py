"""The checkpoint stream's owner record: which job (``job.name``, ``job.id``) a stream is.

``checkpoint_stream_name`` is not injective (job ``a_b`` id ``1`` and job ``a`` id ``b_1``
both get ``__samzapy_checkpoint_a_b_1``), and renaming the stream would lose every running
job's checkpoints. So the stream says whose it is instead, and a job refuses another's.

The owner record sits in the stream beside the tasks' checkpoints. Its key is a JSON object
with a ``"type"`` field, as Samza's checkpoint keys are: ``{"type": "owner", "job.name": ...,
"job.id": ..., "claim": <random hex>}``. A task's key is its name (``Partition k``), which
never begins with ``{``, so compaction keeps the owner record apart from the checkpoints; the
random ``claim`` makes every owner record's key its own, so compaction never replaces the
first owner record by a later one. Its value is ``{"version": 1, "job.name": ..., "job.id":
..., "task": <the key>, "offsets": []}``: to a samzapy from before the owner record, which
takes every record for a task's checkpoint (a container of it still running during a rolling
upgrade, or a job taken back to it), it is the empty checkpoint of a task named by the key,
which no job has, instead of a corrupt checkpoint that stops it. A key of another type (a
newer samzapy's) is skipped.

The rule (``StreamCheckpointManager.start``): the FIRST owner record in the stream names the
owner. A job that finds none (a new stream, or one an older samzapy wrote: adopted) writes
its own and reads the stream again to its end, so two jobs that claimed at the same moment
both find the same first record: one runs, the other refuses (``owner_of``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from samzapy.api.errors import CheckpointError, JobCollisionError

OWNER_TYPE = "owner"
OWNER_VERSION = 1


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """A job's ``job.name`` and ``job.id``."""

    name: str
    id: str

    def __str__(self) -> str:
        return f"job.name {self.name!r} job.id {self.id!r}"


def is_typed_key(key: object) -> bool:
    """Whether ``key`` is a typed record's (a JSON object), not a task's name."""
    return isinstance(key, bytes | bytearray) and bytes(key[:1]) == b"{"


def owner_record(identity: JobIdentity) -> tuple[bytes, bytes]:
    """The key and value of an owner record naming ``identity``."""
    key = {
        "type": OWNER_TYPE,
        "job.name": identity.name,
        "job.id": identity.id,
        "claim": uuid.uuid4().hex,
    }
    encoded = json.dumps(key, sort_keys=True)
    value = {
        "version": OWNER_VERSION,
        "job.name": identity.name,
        "job.id": identity.id,
        # An older samzapy's reading: the empty checkpoint of the task the key names.
        "task": encoded,
        "offsets": [],
    }
    return encoded.encode(), json.dumps(value, sort_keys=True).encode()


def read_owner(key: bytes, value: object, source: str) -> JobIdentity | None:
    """The job an owner record names; None for a typed record of another type (or a
    tombstone); CheckpointError naming ``source`` for a damaged one."""
    try:
        decoded = json.loads(key)
        if not isinstance(decoded, dict):
            raise ValueError(f"expected a JSON object, got {type(decoded).__name__}")
        if decoded.get("type") != OWNER_TYPE or value is None:
            return None
        if not isinstance(value, bytes | bytearray):
            raise ValueError(f"expected a JSON document as bytes, got {type(value).__name__}")
        return read_owner_document(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"corrupt owner record {source}: {exc}") from exc


def read_owner_document(data: bytes | bytearray) -> JobIdentity:
    """The job an owner document (a record's value, an owner file) names; ValueError (or
    UnicodeDecodeError) when it is not one."""
    document = json.loads(data)
    if not isinstance(document, dict) or document.get("version") != OWNER_VERSION:
        raise ValueError(f"expected a version {OWNER_VERSION} owner document")
    name, job_id = document.get("job.name"), document.get("job.id")
    if not isinstance(name, str) or not isinstance(job_id, str):
        raise ValueError("'job.name' and 'job.id' must be strings")
    return JobIdentity(name, job_id)


def owner_of(stream: str, owner: JobIdentity, job: JobIdentity) -> None:
    """Raise JobCollisionError unless ``job`` is ``owner``, the job that claimed ``stream``."""
    if owner == job:
        return
    raise JobCollisionError(
        f"job.name, job.id: checkpoint stream {stream} belongs to another job ({owner}); "
        f"this job ({job}) maps to the same stream name, and sharing it would mix the two "
        "jobs' checkpoints: change job.name or job.id of this job so that the names differ "
        "(the other job's checkpoints are untouched)"
    )


__all__ = [
    "OWNER_TYPE",
    "JobIdentity",
    "is_typed_key",
    "owner_of",
    "owner_record",
    "read_owner_document",
    "read_owner",
]
