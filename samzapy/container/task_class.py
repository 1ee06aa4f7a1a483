"""Loading the job's task class (``task.class``)."""

from __future__ import annotations

import importlib
from typing import Any

from samzapy.api.errors import ConfigError


def load_task_class(path: str) -> type[Any]:
    """Import ``module:Class`` or ``dotted.module.Class``; errors name ``task.class``."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"task.class: cannot import {path!r} ({exc}); expected 'module:Class' or "
            "'package.module.Class' importable from the job's Python path",
            key="task.class",
        ) from exc
    if not isinstance(obj, type):
        raise ConfigError(f"task.class: {path!r} is not a class", key="task.class")
    return obj


__all__ = ["load_task_class"]
