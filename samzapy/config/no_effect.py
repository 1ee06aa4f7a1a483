"""What a job file or a task class sets that samzapy would never use, found before a run.

Samza reads a task's hooks through the interfaces it implements, and so does samzapy: a task
class with a ``close`` method that does not subclass ``ClosableTask`` is never closed, one
with a ``window`` method that is not a ``WindowableTask`` never windowed. In Java the
compiler keeps the two together; in Python a forgotten base passes in silence, and the
method's work (flushing a client in ``close``, emitting in ``window``) is lost without a
word. Some keys likewise do nothing beside others: ``task.window.ms`` for a task that is no
``WindowableTask``, ``task.max.concurrency`` above 1 for a sync ``StreamTask`` (one call at a
time), ``job.container.thread.pool.size`` above 1 for an ``AsyncStreamTask`` (its calls run
on the loop), ``task.transaction.timeout.ms`` under at-least-once.

Each is a warning, not an error (a class may hold a ``close`` of its own for other callers;
a template may set a key for the jobs that need it): ``samzapy validate`` and ``samzapy run``
log one ``method_never_called`` or ``key_without_effect`` event for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samzapy.api.task import (
    AsyncStreamTask,
    ClosableTask,
    EndOfStreamListenerTask,
    InitableTask,
    StreamTask,
    StreamWatermarkListenerTask,
    WatermarkListenerTask,
    WindowableTask,
)

#: Each hook samzapy calls and the interface that makes it called.
HOOKS: tuple[tuple[str, type], ...] = (
    ("init", InitableTask),
    ("window", WindowableTask),
    ("close", ClosableTask),
    ("on_end_of_stream", EndOfStreamListenerTask),
    ("on_watermark", WatermarkListenerTask),
    ("on_stream_watermark", StreamWatermarkListenerTask),
    ("process", StreamTask),
    ("process_async", AsyncStreamTask),
)


def methods_never_called(cls: type) -> list[tuple[str, str]]:
    """``(method, why)`` for each hook ``cls`` defines without the interface that has it
    called. ``process`` and ``process_async`` count only on a class of the other kind (a
    class must be one of them to be loaded at all)."""
    found = []
    for method, interface in HOOKS:
        if issubclass(cls, interface) or not callable(getattr(cls, method, None)):
            continue
        name = cls.__name__
        if method == "process":
            why = (
                f"{name} is an AsyncStreamTask, which samzapy calls through process_async "
                "only: rename it process_async (returning an awaitable), or subclass "
                "StreamTask instead"
            )
        elif method == "process_async":
            why = (
                f"{name} is a StreamTask, which samzapy calls through process only: subclass "
                "AsyncStreamTask instead"
            )
        else:
            why = (
                f"{name} does not subclass {interface.__name__}, and samzapy calls {method} "
                f"only on one: add {interface.__name__} to its bases"
            )
        found.append((method, why))
    return found


def keys_without_effect(
    keys: Mapping[str, Any], values: Mapping[str, Any], task_class: type | None
) -> list[tuple[str, str]]:
    """``(key, why)`` for each key the job file sets (``keys``, as written) that does nothing
    beside the others (``values``, the typed keys) and ``task_class`` (None for an
    application, whose operator task uses each of these keys as it needs)."""
    found = []
    if (
        "task.transaction.timeout.ms" in keys
        and values.get("task.processing.guarantee") != "exactly-once"
    ):
        found.append(
            (
                "task.transaction.timeout.ms",
                "it applies under task.processing.guarantee: exactly-once only",
            )
        )
    if task_class is None:
        return found
    name = task_class.__name__
    is_async = issubclass(task_class, AsyncStreamTask)

    def above(key: str, floor: int) -> bool:
        value = values.get(key)
        return key in keys and isinstance(value, int) and value > floor

    if above("task.window.ms", 0) and not issubclass(task_class, WindowableTask):
        why = f"{name} is not a WindowableTask: nothing is called on the window tick"
        found.append(("task.window.ms", why))
    if above("task.max.concurrency", 1) and not is_async:
        why = (
            f"{name} is a StreamTask, which makes one process call at a time (with or without "
            "the thread pool): it applies to an AsyncStreamTask"
        )
        found.append(("task.max.concurrency", why))
    if above("job.container.thread.pool.size", 1) and is_async:
        why = (
            f"{name} is an AsyncStreamTask, whose calls run on the event loop: the pool runs "
            "a sync StreamTask's process and window"
        )
        found.append(("job.container.thread.pool.size", why))
    return found


__all__ = ["HOOKS", "keys_without_effect", "methods_never_called"]
