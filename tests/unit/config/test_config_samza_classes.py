"""Samza's Java factory class names in a job file: those samzapy has read as its built-ins,
the others refused naming the key, the class and what to write instead."""

from __future__ import annotations

from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config import ResolvedConfig, load_config, resolve
from samzapy.storage.registry import store_factory_for

BASE: dict[str, Any] = {
    "job.name": "wc",
    "task.class": "app.tasks:WordCount",
    "task.inputs": ["kafka.words"],
    "systems.kafka.samza.factory": "org.apache.samza.system.kafka.KafkaSystemFactory",
    "systems.kafka.bootstrap.servers": "127.0.0.1:9092",
}
SAMZA = "org.apache.samza."


def resolved(**keys: Any) -> ResolvedConfig:
    return resolve(load_config(base={**BASE, **keys}))


@pytest.mark.parametrize(
    ("java", "short"),
    [
        ("checkpoint.kafka.KafkaCheckpointManagerFactory", "kafka"),
        ("checkpoint.file.FileSystemCheckpointManagerFactory", "file"),
    ],
)
def test_samza_checkpoint_factories_are_samzapy_s_same_managers(java: str, short: str) -> None:
    config = resolved(**{"task.checkpoint.factory": SAMZA + java})
    assert config.task.checkpoint_factory == short


def test_a_samza_kafka_checkpoint_factory_meets_exactly_once_s_need_for_kafka() -> None:
    config = resolved(
        **{
            "task.checkpoint.factory": SAMZA + "checkpoint.kafka.KafkaCheckpointManagerFactory",
            "task.processing.guarantee": "exactly-once",
        }
    )
    assert config.task.exactly_once


@pytest.mark.parametrize(
    ("java", "short"),
    [
        ("storage.kv.RocksDbKeyValueStorageEngineFactory", "rocksdb"),
        ("storage.kv.inmemory.InMemoryKeyValueStorageEngineFactory", "inmemory"),
    ],
)
def test_samza_store_factories_are_samzapy_s_same_engines(java: str, short: str) -> None:
    config = resolved(**{"stores.s.factory": SAMZA + java, "stores.s.changelog": "kafka.s-log"})
    store = config.stores["s"]
    assert store.factory == short
    assert store.options["factory"] == short
    store_factory_for("s", store.options["factory"])  # builds: no import of a module 'org'


@pytest.mark.parametrize(
    ("key", "java", "instead"),
    [
        (
            "systems.h.samza.factory",
            "system.hdfs.HdfsSystemFactory",
            "write memory, file, kafka (samzapy's built-ins), or the 'module:Class' path of a "
            "samzapy.system.ports.SystemFactory subclass of your own",
        ),
        (
            "stores.s.factory",
            "storage.kv.LoggedStore",
            "write rocksdb, inmemory (samzapy's built-ins), or the 'module:Class' path of a "
            "samzapy.storage.ports.StoreFactory subclass of your own",
        ),
        (
            "task.checkpoint.factory",
            "checkpoint.azure.AzureCheckpointManagerFactory",
            "write kafka, file, memory, stream (samzapy's built-ins), or the 'module:Class' "
            "path of a samzapy.checkpoint.ports.CheckpointManager subclass of your own",
        ),
    ],
)
def test_other_samza_classes_are_refused_naming_key_class_and_what_to_write(
    key: str, java: str, instead: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolved(**{key: SAMZA + java})
    assert (
        f"{key}: '{SAMZA + java}' is one of Samza's Java classes, which samzapy has no "
        f"counterpart of: {instead}"
    ) in info.value.problems


@pytest.mark.parametrize(
    ("key", "java", "reason"),
    [
        (
            "metrics.reporter.jmx.class",
            "metrics.reporter.JmxReporterFactory",
            "samzapy's reporters are listed in metrics.reporters by name (log, prometheus)",
        ),
        (
            "job.factory.class",
            "job.yarn.YarnJobFactory",
            "samzapy runs a job itself (samzapy run job.yaml",
        ),
        (
            "job.systemstreampartition.grouper.factory",
            "container.grouper.stream.GroupByPartitionFactory",
            "samzapy groups input partitions by partition number",
        ),
    ],
)
def test_samza_keys_naming_a_java_class_say_what_samzapy_does_instead(
    key: str, java: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as info:
        resolved(**{key: SAMZA + java})
    assert any(p.startswith(f"unknown key '{key}': {reason}") for p in info.value.problems), (
        info.value.problems
    )
