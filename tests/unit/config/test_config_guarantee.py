"""What task.processing.guarantee: exactly-once asks of a job: every problem named by its key."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import load_config, resolve

EXACTLY_ONCE: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["kafka.words", "files.extra"],
    "task.processing.guarantee": "exactly-once",
    "task.checkpoint.factory": "kafka",
    "task.commit.ms": 1000,
    "systems.kafka.samza.factory": "kafka",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
    "systems.files.samza.factory": "file",
    "systems.files.path": "/data",
    "stores.counts.factory": "rocksdb",
    "stores.counts.changelog": "kafka.counts-log",
    "streams.totals.samza.system": "kafka",
}


def problems(**changes: Any) -> tuple[str, ...]:
    config = {**EXACTLY_ONCE, **changes}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(ConfigError) as info:
        resolve(load_config(base=config, env={}))
    return info.value.problems


def test_a_job_with_everything_on_one_kafka_system_is_accepted() -> None:
    config = resolve(load_config(base=EXACTLY_ONCE, env={}))
    assert config.task.exactly_once
    assert config.task.transaction_timeout == 60_000
    many = resolve(load_config(base={**EXACTLY_ONCE, "task.commit.ms": 100_000}, env={}))
    assert many.task.transaction_timeout == 300_000, "three commit intervals"
    most = resolve(load_config(base={**EXACTLY_ONCE, "task.commit.ms": 899_999}, env={}))
    assert most.task.transaction_timeout == 900_000, "at most 15 minutes"


def test_a_commit_interval_past_the_derived_timeout_needs_the_timeout_set() -> None:
    longer = {"task.commit.ms": 1_000_000, "task.transaction.timeout.ms": 1_200_000}
    config = resolve(load_config(base={**EXACTLY_ONCE, **longer}, env={}))
    assert config.task.transaction_timeout == 1_200_000
    for timeout in (None, -1, 0):
        changes = {"task.commit.ms": 1_000_000, "task.transaction.timeout.ms": timeout}
        assert problems(**changes) == (
            "task.commit.ms must be < 900000 when task.processing.guarantee is exactly-once and "
            "task.transaction.timeout.ms is unset, got 1000000: the derived transaction timeout "
            "is at most 900000 and the broker aborts a transaction open longer than it (or set "
            "task.transaction.timeout.ms longer than task.commit.ms)",
        )


def test_at_least_once_is_the_default() -> None:
    config = resolve(load_config(base={**EXACTLY_ONCE, "task.processing.guarantee": None}))
    assert config.task.processing_guarantee == "at-least-once"
    assert not config.task.exactly_once


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        (
            {"task.checkpoint.factory": "file"},
            "task.checkpoint.factory must be kafka when task.processing.guarantee is "
            "exactly-once (checkpoints commit with the outputs in a Kafka transaction), "
            "got 'file'",
        ),
        (
            {"stores.counts.changelog": "files.counts-log"},
            "stores.counts.changelog must be on the checkpoints' kafka system 'kafka' when "
            "task.processing.guarantee is exactly-once, got 'files.counts-log'",
        ),
        (
            {"streams.totals.samza.system": "files"},
            "streams.totals.samza.system must be the checkpoints' kafka system 'kafka' when "
            "task.processing.guarantee is exactly-once (it is written by the job), got 'files'",
        ),
        (
            {"task.commit.ms": -1},
            "task.commit.ms must be > 0 when task.processing.guarantee is exactly-once, got -1",
        ),
        (
            {"task.transaction.timeout.ms": 500},
            "task.transaction.timeout.ms must be longer than task.commit.ms (1000), got 500: "
            "the broker aborts a transaction open longer than it",
        ),
        (
            {"task.commit.ms": 900_000},
            "task.commit.ms must be < 900000 when task.processing.guarantee is exactly-once and "
            "task.transaction.timeout.ms is unset, got 900000: the derived transaction timeout "
            "is at most 900000 and the broker aborts a transaction open longer than it (or set "
            "task.transaction.timeout.ms longer than task.commit.ms)",
        ),
        (
            {"task.drop.producer.errors": True},
            "task.drop.producer.errors must be false when task.processing.guarantee is "
            "exactly-once: a transaction with a failed send cannot commit",
        ),
    ],
)
def test_what_exactly_once_cannot_run_with_is_named_by_its_key(
    changes: dict[str, Any], problem: str
) -> None:
    assert problem in problems(**changes)


def test_a_declared_input_on_another_system_is_fine() -> None:
    config = resolve(load_config(base={**EXACTLY_ONCE, "streams.extra.samza.system": "files"}))
    assert config.task.exactly_once


def test_an_unknown_guarantee_names_the_choices() -> None:
    assert problems(**{"task.processing.guarantee": "at-most-once"}) == (
        "task.processing.guarantee must be one of at-least-once, exactly-once, got 'at-most-once'",
    )
