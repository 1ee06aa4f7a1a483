"""task.drop.process.errors and task.dead.letter.stream: their views, and every problem
samzapy validate reports, named by its key."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.api.system import SystemStream
from samzapy.config import load_config, resolve

JOB: dict[str, Any] = {
    "job.name": "dl",
    "task.class": "app.tasks:Forward",
    "task.inputs": ["kafka.in"],
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
    "systems.files.samza.factory": "file",
    "systems.files.path": "/data",
}


def problems(**changes: Any) -> tuple[str, ...]:
    with pytest.raises(ConfigError) as info:
        resolve(load_config(base={**JOB, **changes}, env={}))
    return info.value.problems


def test_both_are_off_by_default() -> None:
    task = resolve(load_config(base=JOB, env={})).task
    assert task.drop_process_errors is False
    assert task.dead_letter_stream is None


def test_a_dead_letter_stream_is_a_system_stream() -> None:
    task = resolve(
        load_config(
            base={
                **JOB,
                "task.drop.process.errors": True,
                "task.dead.letter.stream": "kafka.orders.dlq",
            },
            env={},
        )
    ).task
    assert task.drop_process_errors is True
    assert task.dead_letter_stream == SystemStream("kafka", "orders.dlq")


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (
            {"task.dead.letter.stream": "nowhere.dlq", "task.drop.process.errors": True},
            "task.dead.letter.stream refers to system 'nowhere', which is not defined "
            "(set systems.nowhere.samza.factory)",
        ),
        (
            {"task.dead.letter.stream": "dlq", "task.drop.process.errors": True},
            "task.dead.letter.stream must be 'system.stream', got 'dlq'",
        ),
        (
            {"task.dead.letter.stream": "kafka.dlq"},
            "task.dead.letter.stream is set, but nothing is dropped: set "
            "task.drop.process.errors or task.drop.deserialization.errors to true, or unset "
            "task.dead.letter.stream",
        ),
        (
            {"task.dead.letter.stream": "kafka.dlq", "task.drop.process.errors": False},
            "task.dead.letter.stream is set, but nothing is dropped",
        ),
        (
            {"task.dead.letter.stream": "files.dlq", "task.drop.deserialization.errors": True},
            "task.dead.letter.stream: system 'files' (samza.factory file) does not keep record "
            "headers, which a dead letter carries; use a kafka or memory system",
        ),
        (
            {"task.dead.letter.stream": "kafka.in", "task.drop.process.errors": True},
            "task.dead.letter.stream is 'kafka.in', an input of the job: each message dropped "
            "would be read again, and dropped again",
        ),
        (
            {
                "task.dead.letter.stream": "kafka.other",
                "task.drop.process.errors": True,
                "task.broadcast.inputs": ["kafka.other#0"],
            },
            "task.dead.letter.stream is 'kafka.other', an input of the job",
        ),
        (
            {
                "task.dead.letter.stream": "kafka.mid-topic",
                "task.drop.process.errors": True,
                "streams.mid.samza.system": "kafka",
                "streams.mid.samza.physical.name": "mid-topic",
                "streams.mid.samza.framed": True,
            },
            "task.dead.letter.stream is 'kafka.mid-topic', the framed stream 'mid'",
        ),
        (
            {"task.drop.process.errors": "sometimes"},
            "task.drop.process.errors",
        ),
    ],
)
def test_problems_name_the_key_and_what_is_expected(changes: dict[str, Any], problem: str) -> None:
    assert any(p.startswith(problem) for p in problems(**changes)), problems(**changes)


def test_under_exactly_once_the_dead_letters_commit_with_the_checkpoints() -> None:
    found = problems(
        **{
            "task.processing.guarantee": "exactly-once",
            "task.checkpoint.factory": "kafka",
            "task.checkpoint.system": "kafka",
            "task.drop.deserialization.errors": True,
            "systems.other.samza.factory": "kafka",
            "systems.other.bootstrap.servers": "127.0.0.1:9093",
            "task.dead.letter.stream": "other.dlq",
        }
    )
    assert (
        "task.dead.letter.stream must be on the checkpoints' kafka system 'kafka' when "
        "task.processing.guarantee is exactly-once, got 'other.dlq'"
    ) in found
