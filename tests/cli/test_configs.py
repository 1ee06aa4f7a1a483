"""Every job file shipped in configs/ validates, so the examples stay true to the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config, resolve
from samzapy.config.classes import load_task_class
from samzapy.operators import load_application
from samzapy.operators.application import is_application

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_there_are_shipped_configs() -> None:
    assert any(p.name == "quickstart.yaml" for p in CONFIGS)
    assert any(is_application(load_config(p)) for p in CONFIGS)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_config_validates_and_its_task_class_or_application_loads(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(path.parents[1]))
    raw = load_config(path)
    if is_application(raw):
        app = load_application(raw)  # imported, described and planned
        config = resolve(app.config)
        assert config.task.app_class == raw["app.class"]
        assert config.task.inputs
    else:
        config = resolve(raw)
        assert load_task_class(config.task.task_class)
