"""The names a job gives Kafka: each within what the broker takes, checked before any is used.

Kafka refuses a topic name longer than 249 characters or holding anything but letters, digits,
``.``, ``_`` and ``-`` (and ``.`` and ``..`` themselves), and two topics whose names differ only
by ``.`` against ``_`` (their metrics' names would be the same: the second is refused). Without
this check such a name is found when the job first reads the topic's metadata or creates it,
as a bare ``InvalidTopicError``. The names checked, on each ``kafka`` system of the job:

1. every input and broadcast input (``task.inputs``, ``task.broadcast.inputs``), the streams
   under ``streams.<id>`` (their ``samza.physical.name``, the id by default: an application's
   intermediate streams are ``<job.name>-<job.id>-partition_by-<op_id>``), the store changelogs
   (an application's windows and joins are ``<job.name>-<job.id>-<op_id>-...``) and the
   dead-letter stream. A name that begins with ``<job.name>-<job.id>-`` says to shorten those;
2. the job's consumer group ``samzapy.<job.name>.<job.id>`` and its tasks' transactional ids
   ``samzapy-<job.name>-<job.id>-<task>``: strings of Kafka's protocol, at most 32767 bytes.

The checkpoint topic needs no check: ``checkpoint_stream_name`` makes it fit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from samzapy.config.guarantee import parse_system_stream

#: Kafka's longest topic name.
MAX_TOPIC_NAME_LENGTH = 249
#: Kafka's longest protocol string (a group id, a transactional id): an int16 length.
MAX_KAFKA_STRING = 32767
#: The longest task name a transactional id is given room for (``Partition 2147483647``).
_TASK_NAME_ROOM = len("Partition 2147483647")
_NOT_IN_TOPIC_NAMES = re.compile(r"[^A-Za-z0-9._-]")
_KAFKA = "kafka"


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None when it takes it."""
    if not name:
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}, which Kafka refuses as a topic name"
    bad = sorted(set(_NOT_IN_TOPIC_NAMES.findall(name)))
    if bad:
        return (
            f"holds {', '.join(repr(c) for c in bad)}: a Kafka topic name may hold only "
            "letters, digits, '.', '_' and '-'"
        )
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"is {len(name)} characters long, and Kafka refuses a topic name longer than "
            f"{MAX_TOPIC_NAME_LENGTH}"
        )
    return None


def kafka_name_problems(
    values: Mapping[str, Any],
    factories: Mapping[str, str | None],
    streams: tuple[str, ...],
    problem: Callable[[str, str], None],
) -> None:
    """Report, through ``problem(key, message)``, each name of ``values`` (typed keys, before
    defaults) that Kafka would refuse; ``factories``: each system's short factory name."""
    job_name, job_id = str(values.get("job.name") or ""), str(values.get("job.id") or "1")
    _id_problems(job_name, job_id, factories, problem)
    prefix = f"{job_name}-{job_id}-"
    seen: dict[tuple[str, str], str] = {}  # (system, topic): what it is
    for key, what, system, topic in _topics(values, streams):
        if factories.get(system) != _KAFKA or (system, topic) in seen:
            continue
        reason = topic_name_problem(topic)
        if reason is None:
            _collision(seen, key, what, system, topic, problem)
            seen[(system, topic)] = what
            continue
        seen[(system, topic)] = what
        if job_name and topic.startswith(prefix) and len(topic) > MAX_TOPIC_NAME_LENGTH:
            problem(
                "job.name",
                f"job.name, job.id: Kafka topic {topic!r} ({what}) {reason}; it is "
                f"named '<job.name>-<job.id>-...', so shorten job.name ({len(job_name)} "
                f"characters) or job.id ({len(job_id)}) by {len(topic) - MAX_TOPIC_NAME_LENGTH} "
                "or more",
            )
        else:
            problem(key, f"{key}: Kafka topic {topic!r} ({what}) {reason}")


def _id_problems(
    job_name: str,
    job_id: str,
    factories: Mapping[str, str | None],
    problem: Callable[[str, str], None],
) -> None:
    if _KAFKA not in factories.values():
        return
    longest = len(f"samzapy-{job_name}-{job_id}-".encode()) + _TASK_NAME_ROOM
    if longest > MAX_KAFKA_STRING:
        problem(
            "job.name",
            f"job.name, job.id: the job's Kafka consumer group 'samzapy.<job.name>.<job.id>' "
            f"and transactional ids 'samzapy-<job.name>-<job.id>-<task>' would be up to "
            f"{longest} bytes, and Kafka takes at most {MAX_KAFKA_STRING}: shorten job.name "
            f"({len(job_name)} characters) or job.id ({len(job_id)})",
        )


def _collision(
    seen: Mapping[tuple[str, str], str],
    key: str,
    what: str,
    system: str,
    topic: str,
    problem: Callable[[str, str], None],
) -> None:
    """Kafka refuses a topic whose name differs from another's only by '.' against '_'."""
    folded = topic.replace(".", "_")
    for (other_system, other), other_what in seen.items():
        if other_system == system and other != topic and other.replace(".", "_") == folded:
            problem(
                key,
                f"{key}: Kafka topics {topic!r} ({what}) and {other!r} ({other_what}) "
                "differ only by '.' against '_', which Kafka counts as the same "
                "(it refuses to create the second): rename one",
            )
            return


def _topics(values: Mapping[str, Any], streams: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(key, what it is, system, topic) of each stream the job names, its own streams first."""
    found: list[tuple[str, str, str, str]] = []
    for stream in streams:
        prefix = f"streams.{stream}."
        system = values.get(prefix + "samza.system")
        if not isinstance(system, str):
            continue
        physical = values.get(prefix + "samza.physical.name")
        topic = stream if physical is None else str(physical)
        what = "intermediate stream" if values.get(prefix + "samza.intermediate") else "stream"
        what += "" if topic == stream else f" {stream!r}"
        found.append((prefix + "samza.physical.name", what, system, topic))
    for key, what in (("task.inputs", "input"), ("task.broadcast.inputs", "broadcast input")):
        for item in values.get(key) or ():
            parsed = parse_system_stream(str(item).partition("#")[0])
            if parsed is not None:
                found.append((key, what, *parsed))
    for key in sorted(values):
        if key.startswith("stores.") and key.endswith(".changelog") and key.count(".") == 2:
            parsed = parse_system_stream(str(values[key]))
            if parsed is not None:
                found.append((key, f"changelog of store {key.split('.')[1]!r}", *parsed))
    dead = values.get("task.dead.letter.stream")
    if isinstance(dead, str) and (parsed := parse_system_stream(dead)) is not None:
        found.append(("task.dead.letter.stream", "dead-letter stream", *parsed))
    return found


__all__ = ["MAX_KAFKA_STRING", "MAX_TOPIC_NAME_LENGTH", "kafka_name_problems", "topic_name_problem"]
