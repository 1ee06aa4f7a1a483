"""Loading the classes a job's configuration names, with one set of error texts.

Task classes, system, store and checkpoint factories, serdes and metrics reporters are named in
the config by import path: ``package.module:Class`` (the class may be nested,
``module:Outer.Inner``) or ``package.module.Class``. ``load_class`` imports one and turns every
way that can fail into a ConfigError naming the key, the path or module, and the cause:

- ``task.class must be a 'module:Class' (or 'package.module.Class') import path, got 'x'``
- ``task.class: cannot import module 'mytasks' (from 'mytasks:Counter'): No module named
  'mytasks'; it must be importable from the job's Python path (the working directory, then
  PYTHONPATH)``
- ``task.class: importing module 'mytasks' (from 'mytasks:Counter') failed: ZeroDivisionError:
  division by zero (mytasks.py, line 3)``
- ``task.class: module 'mytasks' has no attribute 'Countr' (from 'mytasks:Countr'); did you
  mean 'Counter'?``
- ``task.class: 'mytasks:count' is a function, expected a class``
- ``task.class: 'mytasks:Counter' is not a task: it must subclass samzapy.StreamTask or
  samzapy.AsyncStreamTask``

The exception that caused it stays in ``__cause__``; ``samzapy run`` logs its traceback at
debug level only. ``create`` also builds the class with no arguments, with the same texts.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import sysconfig
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samzapy.api.errors import ConfigError
from samzapy.api.task import AsyncStreamTask, StreamTask

TASK_CLASS_KEY = "task.class"
#: The key naming a high-level application (``module:Class``), the other kind of job.
APP_CLASS_KEY = "app.class"
TASK_BASES = (StreamTask, AsyncStreamTask)


def is_application(config: Mapping[str, Any]) -> bool:
    """Whether the job file runs an application (``app.class``) rather than a task class."""
    return config.get(APP_CLASS_KEY) is not None


TASK_BASE_NAMES = "samzapy.StreamTask or samzapy.AsyncStreamTask"


def split_class_path(path: Any, *, key: str) -> tuple[str, str]:
    """``'pkg.mod:Outer.Inner'`` -> ``('pkg.mod', 'Outer.Inner')``; ``'pkg.mod.Cls'`` ->
    ``('pkg.mod', 'Cls')``. A ConfigError naming ``key`` when ``path`` has neither shape."""
    text = path.strip() if isinstance(path, str) else ""
    if ":" in text:
        module_name, _, attribute = text.partition(":")
    else:
        module_name, _, attribute = text.rpartition(".")
    if not module_name or not attribute or ":" in attribute:
        raise ConfigError(
            f"{key} must be a 'module:Class' (or 'package.module.Class') import path, got {path!r}",
            key=key,
        )
    return module_name, attribute


def load_class(
    path: str, *, key: str, base: type | tuple[type, ...] = (), what: str = ""
) -> type[Any]:
    """Import the class at ``path``; every failure is a ConfigError naming ``key``.

    With ``base``, the class must subclass it (one of them, for a tuple); ``what`` names the
    expected kind in that message (``a samzapy.system.ports.SystemFactory subclass``).
    """
    module_name, attribute = split_class_path(path, key=key)
    path = path.strip()
    module = _import_module(module_name, path, key)
    obj: object = module
    parts = attribute.split(".")
    for depth, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            owner = (
                f"module {module_name!r}"
                if depth == 0
                else repr(f"{module_name}:{'.'.join(parts[:depth])}")
            )
            raise ConfigError(
                f"{key}: {owner} has no attribute {part!r} (from {path!r})"
                + _suggestion(part, obj),
                key=key,
            ) from exc
    if not isinstance(obj, type):
        raise ConfigError(
            f"{key}: {path!r} is {_article(type(obj).__name__)}, expected a class", key=key
        )
    bases = base if isinstance(base, tuple) else (base,)
    if bases and not issubclass(obj, bases):
        expected = what or " or ".join(f"{b.__module__}.{b.__qualname__}" for b in bases)
        raise ConfigError(f"{key}: {path!r} is not {expected}", key=key)
    return obj


def create(path: str, *, key: str, base: type | tuple[type, ...] = (), what: str = "") -> Any:
    """``load_class(...)()``: the class built with no arguments; failures name ``key``."""
    cls = load_class(path, key=key, base=base, what=what)
    try:
        return cls()
    except Exception as exc:
        raise ConfigError(
            f"{key}: creating {path.strip()!r} with no arguments failed: {describe_cause(exc)}",
            key=key,
        ) from exc


def load_task_class(path: str, *, key: str = TASK_CLASS_KEY) -> type[Any]:
    """The task class ``task.class`` names: it must subclass StreamTask or AsyncStreamTask
    (one of them), a StreamTask's ``process`` being a plain function (``async def`` would
    make a coroutine per message that nothing runs)."""
    cls = load_class(
        path,
        key=key,
        base=TASK_BASES,
        what=f"a task: it must subclass {TASK_BASE_NAMES}",
    )
    check_task_class(cls, key=key, name=path.strip())
    return cls


def check_task_class(cls: type[Any], *, key: str, name: str, created: bool = True) -> None:
    """A task class (``name`` in messages, which name ``key``) subclasses one of StreamTask and
    AsyncStreamTask, not both, a StreamTask's ``process`` is a plain function, and (unless
    ``created`` is False: its instance is made by another's code) it takes no arguments."""
    if issubclass(cls, StreamTask) and issubclass(cls, AsyncStreamTask):
        raise ConfigError(
            f"{key}: {name!r} subclasses both StreamTask and AsyncStreamTask: subclass one "
            "(StreamTask with process, or AsyncStreamTask with process_async)",
            key=key,
        )
    if created:
        try:
            inspect.signature(cls).bind()
        except TypeError:
            raise ConfigError(
                f"{key}: {name!r} cannot be created with no arguments, as samzapy creates one "
                f"instance per task ({cls.__name__}()): give its __init__ parameters defaults, "
                "or read the job's settings in init(context) (InitableTask)",
                key=key,
            ) from None
        except ValueError:
            pass  # no signature to read (a class built in C): creating it will tell
    if issubclass(cls, StreamTask) and inspect.iscoroutinefunction(cls.process):
        raise ConfigError(
            f"{key}: {name!r} is a StreamTask whose process is a coroutine function (async "
            "def), which would never run: subclass AsyncStreamTask and define process_async",
            key=key,
        )


def _import_module(module_name: str, path: str, key: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigError(
                f"{key}: cannot import module {module_name!r} (from {path!r}): {exc}; it must "
                "be importable from the job's Python path (the working directory, then "
                "PYTHONPATH)",
                key=key,
            ) from exc
        raise _import_failed(module_name, path, key, exc) from exc  # a module it imports
    except (Exception, SystemExit) as exc:  # the module itself raised while importing
        raise _import_failed(module_name, path, key, exc) from exc


def _import_failed(module_name: str, path: str, key: str, exc: BaseException) -> ConfigError:
    return ConfigError(
        f"{key}: importing module {module_name!r} (from {path!r}) failed: {describe_cause(exc)}",
        key=key,
    )


def describe_cause(exc: BaseException) -> str:
    """``Type: message``, with where it was raised: ``(tasks.py, line 3)``."""
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        return text  # its message already names the file and line
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<") and not _in_stdlib(frame.filename)
    ]
    if frames:
        text += f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})"
    return text


_STDLIB = Path(sysconfig.get_paths()["stdlib"])


def _in_stdlib(filename: str) -> bool:
    """Frames of the standard library, and of this module, say nothing about the user's code."""
    path = Path(filename)
    return filename == __file__ or (
        path.is_relative_to(_STDLIB) and "site-packages" not in path.parts
    )


def _suggestion(name: str, owner: object) -> str:
    classes = [n for n in dir(owner) if isinstance(getattr(owner, n, None), type)]
    close = difflib.get_close_matches(name, classes, n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""


def _article(noun: str) -> str:
    return f"an {noun}" if noun[:1].lower() in "aeiou" else f"a {noun}"


__all__ = [
    "APP_CLASS_KEY",
    "TASK_BASES",
    "TASK_BASE_NAMES",
    "TASK_CLASS_KEY",
    "check_task_class",
    "create",
    "describe_cause",
    "is_application",
    "load_class",
    "load_task_class",
    "split_class_path",
]
