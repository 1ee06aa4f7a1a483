"""Resolving systems.<name>.samza.factory to a SystemFactory class."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from samzapy.api.errors import ConfigError
from samzapy.config.classes import load_class
from samzapy.system.file import FileSystemFactory
from samzapy.system.inmemory import InMemorySystemFactory
from samzapy.system.ports import SystemAdmin, SystemConsumer, SystemFactory, SystemProducer
from samzapy.system.registry import system_factory_class

KEY = "systems.events.samza.factory"


class CustomFactory(SystemFactory):
    def __init__(self, system_name: str, config: Mapping[str, Any]) -> None:
        super().__init__(system_name, config)

    def get_admin(self) -> SystemAdmin:
        raise NotImplementedError

    def get_consumer(self) -> SystemConsumer:
        raise NotImplementedError

    def get_producer(self) -> SystemProducer:
        raise NotImplementedError


class NotAFactory:
    pass


NOT_A_CLASS = 42


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("memory", InMemorySystemFactory),
        ("file", FileSystemFactory),
        (" file ", FileSystemFactory),
        ("org.apache.samza.system.inmemory.InMemorySystemFactory", InMemorySystemFactory),
        (f"{__name__}:CustomFactory", CustomFactory),
        (f"{__name__}.CustomFactory", CustomFactory),
        ("samzapy.system.file.factory:FileSystemFactory", FileSystemFactory),
    ],
)
def test_names_and_paths(name: str, expected: type[SystemFactory]) -> None:
    assert system_factory_class(name, key=KEY) is expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("mem", r"unknown system factory 'mem': expected one of file, kafka, memory"),
        (
            "no_such_module_zz:Factory",
            r"cannot import module 'no_such_module_zz' \(from 'no_such_module_zz:Factory'\)",
        ),
        (f"{__name__}:Missing", r"module '.*' has no attribute 'Missing'"),
        (f"{__name__}:NotAFactory", r"is not a samzapy\.system\.ports\.SystemFactory subclass"),
        (f"{__name__}:NOT_A_CLASS", r"is an int, expected a class"),
        (":Factory", r"must be a 'module:Class'"),
    ],
)
def test_errors_name_the_key(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^systems\.events\.samza\.factory.*{message}") as info:
        system_factory_class(name, key=KEY)
    assert info.value.key == KEY


def test_kafka_is_imported_only_when_named() -> None:
    assert system_factory_class("kafka", key=KEY).__name__ == "KafkaSystemFactory"


#: Run in a process of its own: aiokafka made unimportable, then the kafka system named.
WITHOUT_AIOKAFKA = """
import sys
sys.modules["aiokafka"] = None  # import aiokafka now raises ModuleNotFoundError
from samzapy.api.errors import ConfigError
from samzapy.system.registry import system_factory_class
try:
    system_factory_class("kafka", key="systems.events.samza.factory")
except ConfigError as exc:
    print(exc)
"""


def test_kafka_without_aiokafka_is_a_configuration_error_naming_the_remedy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_AIOKAFKA],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        f"{KEY}: the kafka system is not available: install its dependencies (pip install "
        "aiokafka); import failed: import of aiokafka halted"
    ), done.stdout


def test_load_class_reports_failing_modules(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_module_zz.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ConfigError,
        match=(
            r"^k: importing module 'broken_module_zz' \(from 'broken_module_zz:Thing'\) failed: "
            r"RuntimeError: boom \(broken_module_zz.py, line 1\)$"
        ),
    ):
        load_class("broken_module_zz:Thing", key="k")
