"""Tracebacks without local variables in a TestRunner's logs, while structlog is on its defaults.

The ``samzapy`` command configures structlog itself, never showing a frame's local variables;
a TestRunner runs outside it. Left to its defaults, structlog renders with its own
``ConsoleRenderer``, which with ``rich`` installed prints every frame's local variables under a
failing task's traceback: a message being processed, a resolved config with its passwords,
all in the test's output.

So, while a run is in progress and only then, a renderer that is structlog's built-in default
gets ``format_exc_info`` in front of it, in the configured processors list itself (as
``structlog.testing.capture_logs`` edits it): the traceback is rendered as plain text, without
locals. A set-up of the test's own (``structlog.configure`` with a renderer of its choice,
``capture_logs``) has no built-in renderer and is left exactly as it is. Runs may overlap (in
threads, or ``run_async`` gathered): the first one in inserts the processor, the last one out
removes it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog
from structlog import _config as structlog_config

_lock = threading.Lock()
_runs = 0
#: The processors list the formatter went into (None: none did).
_edited: list[Any] | None = None
#: ``format_exc_info``'s own kind, an instance of ours: removed by identity.
_FORMAT = structlog.processors.ExceptionRenderer()


def _builtin_renderers() -> list[Any]:
    """structlog's own default renderer (found by identity: an equal renderer the test
    configured is its choice, not a default)."""
    defaults = getattr(structlog_config, "_BUILTIN_DEFAULT_PROCESSORS", ())
    return [p for p in defaults if isinstance(p, structlog.dev.ConsoleRenderer)]


@contextmanager
def tracebacks_without_locals() -> Iterator[None]:
    """For the duration of a run (see the module docstring)."""
    global _runs, _edited
    with _lock:
        _runs += 1
        if _runs == 1:
            _edited = _insert_formatter()
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _edited is not None:
                _remove_formatter(_edited)
                _edited = None


def _insert_formatter() -> list[Any] | None:
    processors: list[Any] = structlog.get_config()["processors"]
    builtin = _builtin_renderers()
    for index, processor in enumerate(processors):
        if any(processor is renderer for renderer in builtin):
            processors.insert(index, _FORMAT)
            return processors
    return None


def _remove_formatter(processors: list[Any]) -> None:
    for index, processor in enumerate(processors):
        if processor is _FORMAT:
            del processors[index]
            return


__all__ = ["tracebacks_without_locals"]
