"""Logging set-up for the ``samzapy`` process: structlog events, JSON lines or console text.

Every event carries ``timestamp`` (ISO 8601, UTC), ``level`` and ``event``, plus the context
bound with ``structlog.contextvars.bind_contextvars`` (the CLI binds ``job`` and ``container``;
the container binds ``task``, ``ssp``, ``offset`` where they apply). Records of the standard
``logging`` module (asyncio, client libraries such as aiokafka, ``warnings.warn``) at WARNING
and above go through the same renderer to the same stream, with the same context, so the
process never prints an unstructured line.

Client-library records are rate-limited (``ClientLogLimiter``): one line per distinct message
per ``CLIENT_LOG_INTERVAL_S``, the next one carrying ``repeats``, the number left out since.
The transient connection errors a library retries by itself (``TRANSIENT_MESSAGES`` of the
kafka system) are logged at warning and count as one distinct message together, so a broker
outage shows as samzapy's ``broker_unreachable`` / ``broker_reachable`` pair and a line or two
from the client.

Secrets never reach the stream: tracebacks are rendered without their frames' local variables
(in both formats), and every line written has the values given to ``add_secrets`` replaced by
``<redacted>``, in plain, JSON-escaped and ``repr`` form.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor

from samzapy.api.errors import ConfigError
from samzapy.config.secrets import REDACTED
from samzapy.system.kafka.client_logs import CLIENT_LOGGER, TRANSIENT_MESSAGES

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
        renderer = [
            structlog.dev.ConsoleRenderer(
                colors=colors, exception_formatter=_traceback_formatter(colors)
            )
        ]
    renderer.append(_scrub_secrets)

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


def _traceback_formatter(colors: bool) -> Callable[[TextIO, Any], None]:
    """rich's traceback when rich is installed, else the plain one: never local variables
    (structlog's default shows them, and with them a resolved config's passwords)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return structlog.dev.plain_traceback
    return structlog.dev.RichTracebackFormatter(
        show_locals=False, color_system="truecolor" if colors else None
    )


# -- secrets ----------------------------------------------------------------------------------

_SECRETS: dict[str, None] = {}  # insertion-ordered set; longest first when scrubbing


def add_secrets(values: Iterable[str]) -> None:
    """Scrub ``values`` from every line logged from now on (and from ``scrub``).

    Each value is also scrubbed in the forms it takes inside JSON strings and ``repr``.
    """
    for value in values:
        for form in (value, json.dumps(value)[1:-1], repr(value)[1:-1]):
            _SECRETS[form] = None
    ordered = sorted(_SECRETS, key=len, reverse=True)
    _SECRETS.clear()
    _SECRETS.update(dict.fromkeys(ordered))


def scrub(text: str) -> str:
    """``text`` with every secret given to ``add_secrets`` replaced by ``<redacted>``."""
    for secret in _SECRETS:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _scrub_secrets(_logger: object, _name: str, rendered: Any) -> Any:
    """The last processor: the rendered line, secrets scrubbed."""
    if _SECRETS and isinstance(rendered, str):
        return scrub(rendered)
    return rendered


# -- client libraries -------------------------------------------------------------------------

#: How long a client library's message is left out after it was logged (its repeats counted).
CLIENT_LOG_INTERVAL_S = 60.0


class ClientLogLimiter(logging.Filter):
    """Rate-limits the records of client libraries (see the module docstring).

    A record of a library's transient connection errors is logged at warning; then, per
    distinct message (all transient ones of a library are one), the first record of each
    ``interval_s`` passes, carrying ``repeats`` (how many were left out since the last one
    that passed) when there were any. samzapy's own records are never limited.
    """

    def __init__(
        self, interval_s: float = CLIENT_LOG_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._interval_s = interval_s
        self._clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if name == "samzapy" or name.startswith("samzapy.") or name == "py.warnings":
            return True
        library = name.split(".", 1)[0]
        if library == CLIENT_LOGGER and record.msg in TRANSIENT_MESSAGES:
            if record.levelno > logging.WARNING:
                record.levelno, record.levelname = logging.WARNING, "WARNING"
            key = (library, "transient connection errors")
        else:
            key = (name, str(record.msg))
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self._interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return False
        self._last[key] = (now, 0)
        if last is not None and last[1]:
            record.samzapy_repeats = last[1]
        return True


def _add_repeats(_logger: object, _name: str, event_dict: EventDict) -> EventDict:
    record = event_dict.get("_record")
    repeats = getattr(record, "samzapy_repeats", None)
    if repeats:
        event_dict["repeats"] = repeats
    return event_dict


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
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, _add_repeats],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = _SamzapyHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(ClientLogLimiter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SamzapyHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_number)
    logging.captureWarnings(True)


__all__ = [
    "CLIENT_LOG_INTERVAL_S",
    "FORMATS",
    "LEVELS",
    "ClientLogLimiter",
    "add_secrets",
    "configure_logging",
    "scrub",
]
