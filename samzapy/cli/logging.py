"""Logging set-up for the ``samzapy`` process: structlog events, JSON lines or console text.

Every event carries ``timestamp`` (ISO 8601, UTC), ``level`` and ``event``, plus the context
bound with ``structlog.contextvars.bind_contextvars`` (the CLI binds ``job`` and ``container``;
the container binds ``task``, ``ssp``, ``offset`` where they apply). Records of the standard
``logging`` module at WARNING and above (asyncio, client libraries such as aiokafka, py4j,
``warnings.warn``, and Python's reports of exceptions in ``__del__`` and in threads, which it
would print raw) go through the same renderer to the same stream, with the same context, so
the process never prints an unstructured line.

A library's record (any logger outside ``samzapy``) becomes one ``library_log`` event with its
``logger``, its ``message`` and its own level as ``library_level``; it is logged at warning at
most (at info the normal course of a rebalance) until the job is failing (one of samzapy's
``FAILURE_EVENTS`` was logged), and rate-limited per logger and message template, what was
left out reported as ``suppressed`` (``samzapy.cli.library_logs``; ``LibraryLogFilter``
applies it). aiokafka's transient connection errors count as one template, so a broker
outage shows as samzapy's ``broker_unreachable`` / ``broker_reachable`` pair and a line or
two from the client.

Secrets never reach the stream: tracebacks are rendered without their frames' local variables
(in both formats), and every line written has the values given to ``add_secrets`` replaced by
``<redacted>``, in plain, JSON-escaped and ``repr`` form.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, TextIO

import structlog
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, Processor

from samzapy.api.errors import ConfigError
from samzapy.cli.library_logs import (
    LIBRARY_LOG_INTERVAL_S,
    LibraryLogLimiter,
    emitted_level,
    is_library,
    library_fields,
    library_key,
    routine,
    suppressed_fields,
)
from samzapy.config.secrets import REDACTED

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
    """The root handler this module installs; recognised so reconfiguring replaces it.

    Before each record it writes the reports of the rate limit's windows that have closed.
    """

    def __init__(self, stream: TextIO, library: LibraryLogFilter) -> None:
        super().__init__(stream)
        self.library = library
        self.addFilter(library)

    def handle(self, record: logging.LogRecord) -> bool:
        self.report_left_out()
        return super().handle(record)

    def report_left_out(self, *, final: bool = False) -> None:
        for report in self.library.reports(final=final):
            super().handle(report)


def configure_logging(
    fmt: str = "json",
    level: str = "info",
    stream: TextIO | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Send structlog events at ``level`` and above to ``stream`` (default: stdout) as ``fmt``.

    ``fmt`` is ``json`` (one JSON object per line, tracebacks as structured data) or
    ``console`` (aligned, coloured when ``stream`` is a terminal). Calling it again replaces
    the previous set-up for loggers used afterwards; loggers are cached on first use (a
    filtered-out call then costs a few hundred ns), so call it before anything logs.
    ``clock`` times the rate limit of libraries' records.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if level not in _LEVEL_NUMBERS:
        raise ConfigError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    out = sys.stdout if stream is None else stream
    level_number = _LEVEL_NUMBERS[level]

    library = LibraryLogFilter(
        max(level_number, logging.WARNING),
        routine_threshold=level_number,
        keep_traceback=level_number <= logging.DEBUG,
        clock=clock,
    )
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
            library.watch,
            structlog.processors.StackInfoRenderer(),
            *renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level_number),
        context_class=dict,
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    _route_stdlib_logging(out, level_number, library, shared, renderer)


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


# -- libraries --------------------------------------------------------------------------------

#: samzapy's events that mean the job is failing: from then on a library's records keep their
#: own level (an error is an error), instead of being capped at warning.
FAILURE_EVENTS: Final = frozenset(
    {"task_failed", "job_failed", "shutdown_forced", "config_invalid", "input_missing"}
)


class LibraryLogFilter(logging.Filter):
    """Maps a library's records to ``library_log`` events and rate-limits them
    (``samzapy.cli.library_logs``); samzapy's own records pass unchanged.

    A record below ``threshold`` once levelled is left out; a routine one (the course of a
    rebalance, ``library_logs.routine``) below ``routine_threshold``. ``watch`` is a
    structlog processor that notes samzapy's ``FAILURE_EVENTS``; ``reports`` makes the
    records that report what the rate limit left out.
    """

    def __init__(
        self,
        threshold: int = logging.WARNING,
        *,
        routine_threshold: int | None = None,
        interval_s: float = LIBRARY_LOG_INTERVAL_S,
        keep_traceback: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.failing = False
        self._threshold = threshold
        self._routine_threshold = threshold if routine_threshold is None else routine_threshold
        self._keep_traceback = keep_traceback
        self._clock = clock
        self._limiter = LibraryLogLimiter(interval_s)
        # Records also come from other threads; reentrant: a signal handler that logs may
        # interrupt this thread while it holds the lock.
        self._lock = threading.RLock()

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, _FIELDS) or not is_library(record.name):
            return True
        usual = routine(record)
        threshold = self._routine_threshold if usual else self._threshold
        if emitted_level(record.levelno, failing=self.failing, routine=usual) < threshold:
            return False
        with self._lock:
            suppressed = self._limiter.admit(
                library_key(record), record.levelno, self._clock(), routine=usual
            )
        if suppressed is None:
            return False
        fields = library_fields(
            record,
            failing=self.failing,
            suppressed=suppressed,
            keep_traceback=self._keep_traceback,
        )
        setattr(record, _FIELDS, fields)
        try:
            record.getMessage()
        except Exception:  # arguments that do not fit: the renderer would print raw lines
            record.msg, record.args = fields["message"], ()
        return True

    def reports(self, *, final: bool = False) -> list[logging.LogRecord]:
        """Records of ``library_log_suppressed`` events: for the windows that have closed
        with records left out, or, when ``final``, for every window."""
        with self._lock:
            left_out = self._limiter.drain() if final else self._limiter.due(self._clock())
        records = []
        for summary in left_out:
            fields = suppressed_fields(
                summary, failing=self.failing, window_s=self._limiter.interval_s
            )
            levelno = emitted_level(summary.levelno, failing=self.failing, routine=summary.routine)
            if levelno < (self._routine_threshold if summary.routine else self._threshold):
                continue
            record = logging.LogRecord(summary.logger, levelno, "", 0, summary.template, None, None)
            setattr(record, _FIELDS, fields)
            records.append(record)
        return records

    def watch(self, _logger: object, _name: str, event_dict: EventDict) -> EventDict:
        """A structlog processor: the job is failing once one of ``FAILURE_EVENTS`` is logged."""
        if event_dict.get("event") in FAILURE_EVENTS:
            self.failing = True
        return event_dict


_FIELDS: Final = "samzapy_library"


def _library_event(_logger: object, _name: str, event_dict: EventDict) -> EventDict:
    """The foreign records' last pre-processor: a library's record becomes its event."""
    fields = getattr(event_dict.get("_record"), _FIELDS, None)
    if fields is None:
        return event_dict
    for key in ("event", "level", "logger", "exc_info", "stack_info"):
        event_dict.pop(key, None)
    return {**fields, **event_dict}


def flush_library_logs() -> None:
    """Report what the rate limit left out and has not reported yet (at exit)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, _SamzapyHandler):
            handler.report_left_out(final=True)


def _essentials_first(_logger: object, _name: str, event_dict: EventDict) -> EventDict:
    """Put ``timestamp``, ``level`` and ``event`` first, so JSON lines read well when tailed."""
    ordered = {key: event_dict.pop(key) for key in _ESSENTIALS if key in event_dict}
    ordered.update(event_dict)
    return ordered


def _route_stdlib_logging(
    out: TextIO,
    level_number: int,
    library: LibraryLogFilter,
    shared: list[Processor],
    renderer: list[Processor],
) -> None:
    """Render the standard library's records with structlog's processors, to ``out``."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, _library_event],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = _SamzapyHandler(out, library)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SamzapyHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(max(level_number, logging.WARNING))
    logging.captureWarnings(True)
    # Python's own printers of errors nobody could catch write raw lines to stderr: log them
    # instead, where they are still in place (a test runner's hooks are left alone).
    if sys.unraisablehook is sys.__unraisablehook__:
        sys.unraisablehook = _log_unraisable
    if threading.excepthook is threading.__excepthook__:
        threading.excepthook = _log_thread_exception


def _log_unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook``: an exception raised in ``__del__``, a finalizer, a callback."""
    try:
        what = repr(unraisable.object)
    except Exception:
        what = f"<{type(unraisable.object).__name__} object>"
    logging.getLogger("py.unraisable").error(
        "%s: %s",
        unraisable.err_msg or "Exception ignored in",
        what,
        exc_info=(unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback),
    )


def _log_thread_exception(args: Any) -> None:
    """``threading.excepthook``: a thread ended by an exception (SystemExit ends it quietly)."""
    if args.exc_type is SystemExit:
        return
    logging.getLogger("py.threading").error(
        "Exception in thread %s",
        args.thread.name if args.thread is not None else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
    )


__all__ = [
    "FAILURE_EVENTS",
    "FORMATS",
    "LEVELS",
    "LibraryLogFilter",
    "add_secrets",
    "configure_logging",
    "flush_library_logs",
    "scrub",
]
