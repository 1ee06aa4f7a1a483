"""Logging set-up for the ``samzapy`` process: structlog events, JSON lines or console text.

Every event carries ``timestamp`` (ISO 8601, UTC), ``level`` and ``event``, plus the context
bound with ``structlog.contextvars.bind_contextvars`` (the CLI binds ``job`` and ``container``;
the container binds ``task``, ``ssp``, ``offset`` where it knows them). Records of the standard
``logging`` module (asyncio, libraries, ``warnings.warn``) at WARNING and above go through the
same renderer to the same stream, so the process never prints an unstructured line.
"""

from __future__ import annotations

import logging
import sys
from typing import Final, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor

from samzapy.api.errors import ConfigError

FORMATS: Final = ("json", "console")
LEVELS: Final = ("debug", "info", "warning", "error")

_ESSENTIALS: Final = ("timestamp", "level", "event")
_LEVEL_NUMBERS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _SamzapyHandler(logging.StreamHandler[TextIO]):
    """The root handler this module installs; recognised so reconfiguring replaces it."""


def configure_logging(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> None:
    """Send structlog events at ``level`` and above to ``stream`` (default: stdout) as ``fmt``.

    ``fmt`` is ``json`` (one JSON object per line, tracebacks as structured data) or
    ``console`` (aligned, coloured when ``stream`` is a terminal). Calling it again replaces
    the previous set-up for loggers used afterwards; loggers are cached on first use (a
    filtered-out call then costs a few hundred ns), so call it before anything logs.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if level not in _LEVEL_NUMBERS:
        raise ConfigError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    out = sys.stdout if stream is None else stream
    level_number = _LEVEL_NUMBERS[level]

    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        timestamper,
    ]
    renderer: list[Processor]
    if fmt == "json":
        renderer = [
            # Frames without their local variables: they can hold secrets and be huge.
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False)),
            _essentials_first,
            structlog.processors.JSONRenderer(),
        ]
    else:
        isatty = getattr(out, "isatty", None)
        colors = bool(isatty and isatty())
        renderer = [structlog.dev.ConsoleRenderer(colors=colors)]

    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            *renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number),
        context_class=dict,
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    _route_stdlib_logging(out, max(level_number, logging.WARNING), shared, renderer)


def _essentials_first(_logger: object, _name: str, event_dict: EventDict) -> EventDict:
    """Put ``timestamp``, ``level`` and ``event`` first, so JSON lines read well when tailed."""
    ordered = {key: event_dict.pop(key) for key in _ESSENTIALS if key in event_dict}
    ordered.update(event_dict)
    return ordered


def _route_stdlib_logging(
    out: TextIO, level_number: int, shared: list[Processor], renderer: list[Processor]
) -> None:
    """Render the standard library's records with structlog's processors, to ``out``."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = _SamzapyHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SamzapyHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_number)
    logging.captureWarnings(True)


__all__ = ["FORMATS", "LEVELS", "configure_logging"]
