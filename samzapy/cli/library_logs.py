"""What a third-party library's log record becomes: one ``library_log`` event, levelled and
rate-limited.

Every record of a logger outside ``samzapy`` (aiokafka, asyncio, py4j, ``py.warnings``, ...)
that the logging set-up (``samzapy.cli.logging``) lets through is mapped by ``library_fields``
to one event::

    {"event": "library_log", "logger": "aiokafka.consumer.group_coordinator",
     "level": "warning", "library_level": "error", "message": "Heartbeat failed ..."}

1. ``level`` is the record's own level capped at warning (``emitted_level``): a library's
   error is rarely the job's, and samzapy reports what matters as its own events. aiokafka's
   messages that are the normal course of a rebalance or of a group's first start
   (``is_routine``) are capped at info. Once the job is failing (``failing=True``) the
   record keeps its own level. ``library_level`` is always the record's own level.
2. ``LibraryLogLimiter`` lets through the first record of each (logger, template) per
   ``LIBRARY_LOG_INTERVAL_S`` and counts the others; the template is the unformatted message
   (``library_key``), and aiokafka's transient connection errors (``TRANSIENT_MESSAGES``)
   that are not routine count as one template of the ``aiokafka`` logger. A window that
   closes with records left out is reported once, as a ``library_log_suppressed`` event
   (``suppressed_fields``) or as ``suppressed`` on the template's next ``library_log``,
   whichever comes first.
3. An exception is three short fields (``error_type``, ``error``, ``error_at``: the innermost
   frame), not a traceback; the traceback is kept only when asked (``--log-level debug``).

Pure: the caller passes the clock's reading and whether the job is failing.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Final

from samzapy.system.kafka.client_logs import CLIENT_LOGGER, TRANSIENT_MESSAGES, is_routine

LIBRARY_EVENT: Final = "library_log"
SUPPRESSED_EVENT: Final = "library_log_suppressed"

#: How long a template's later records are left out after one was logged (and counted).
LIBRARY_LOG_INTERVAL_S: Final = 60.0
#: The highest level a library's record is logged at while the job is not failing.
LIBRARY_LEVEL_CAP: Final = logging.WARNING
#: The highest level of a routine record (``is_routine``) while the job is not failing.
ROUTINE_LEVEL_CAP: Final = logging.INFO
#: Longer messages are cut (asyncio's describe whole tasks and their coroutines).
MAX_MESSAGE_CHARS: Final = 2000
#: Templates remembered at most; beyond, the oldest windows are forgotten.
MAX_TEMPLATES: Final = 1000

#: The template aiokafka's transient connection errors share.
TRANSIENT_TEMPLATE: Final = "transient connection errors"


def is_library(logger_name: str) -> bool:
    """Whether a record of ``logger_name`` is a library's (anything but ``samzapy[.*]``)."""
    return not (logger_name == "samzapy" or logger_name.startswith("samzapy."))


def level_name(levelno: int) -> str:
    """``logging``'s name of a level, lower case (``"warning"``, ``"level 25"``)."""
    return logging.getLevelName(levelno).lower()


def emitted_level(levelno: int, *, failing: bool, routine: bool = False) -> int:
    """The level a library's record is logged at: its own capped at warning (at info when
    ``routine``), unless failing."""
    if failing:
        return levelno
    return min(levelno, ROUTINE_LEVEL_CAP if routine else LIBRARY_LEVEL_CAP)


def routine(record: logging.LogRecord) -> bool:
    """Whether ``record`` is the normal course of a rebalance or a group's first start
    (``samzapy.system.kafka.client_logs.is_routine``)."""
    return is_routine(record.name, record.msg if isinstance(record.msg, str) else "", record.args)


def library_key(record: logging.LogRecord) -> tuple[str, str]:
    """(logger, template) the rate limit counts ``record`` under.

    The template is the first line of the unformatted message, or of the formatted one when
    the template is a bare placeholder (``py.warnings`` logs ``"%s"``).
    """
    name = record.name
    template = record.msg if isinstance(record.msg, str) else str(record.msg)
    if (
        name.split(".", 1)[0] == CLIENT_LOGGER
        and template in TRANSIENT_MESSAGES
        and not routine(record)
    ):
        return CLIENT_LOGGER, TRANSIENT_TEMPLATE
    if record.args and template.strip() in ("%s", "%r"):
        template = _message(record)
    return name, template.split("\n", 1)[0]


def library_fields(
    record: logging.LogRecord,
    *,
    failing: bool,
    suppressed: int = 0,
    keep_traceback: bool = False,
) -> dict[str, Any]:
    """The ``library_log`` event of ``record`` (without timestamp and context).

    With ``keep_traceback`` the record's ``exc_info`` is kept for the renderer as well.
    """
    fields: dict[str, Any] = {
        "event": LIBRARY_EVENT,
        "level": level_name(
            emitted_level(record.levelno, failing=failing, routine=routine(record))
        ),
        "logger": record.name,
        "library_level": level_name(record.levelno),
        "message": _cut(_message(record).rstrip()),
    }
    if suppressed:
        fields["suppressed"] = suppressed
    exc_info = record.exc_info
    if exc_info and exc_info[1] is not None:
        exc = exc_info[1]
        fields["error_type"] = type(exc).__name__
        fields["error"] = _cut(str(exc))
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            last = frames[-1]
            fields["error_at"] = f"{short_path(last.filename)}:{last.lineno} in {last.name}"
        if keep_traceback:
            fields["exc_info"] = exc_info
    return fields


@dataclass(frozen=True)
class Suppressed:
    """Records of one template left out during a window that has closed."""

    logger: str
    template: str
    count: int
    levelno: int  # the highest level among them
    routine: bool = False  # all of them routine (``routine``)


def suppressed_fields(left_out: Suppressed, *, failing: bool, window_s: float) -> dict[str, Any]:
    """The ``library_log_suppressed`` event reporting ``left_out``."""
    return {
        "event": SUPPRESSED_EVENT,
        "level": level_name(
            emitted_level(left_out.levelno, failing=failing, routine=left_out.routine)
        ),
        "logger": left_out.logger,
        "library_level": level_name(left_out.levelno),
        "template": _cut(left_out.template),
        "suppressed": left_out.count,
        "window_s": window_s,
    }


@dataclass
class _Window:
    opened: float
    count: int = 0
    levelno: int = 0
    routine: bool = True  # every record left out was routine


class LibraryLogLimiter:
    """Per (logger, template): the first record of each ``interval_s`` window passes, the
    others are counted and reported once the window has closed (see the module docstring)."""

    def __init__(self, interval_s: float = LIBRARY_LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._windows: dict[tuple[str, str], _Window] = {}
        self._next_due = float("inf")  # the earliest close of a window with records left out

    def admit(
        self, key: tuple[str, str], levelno: int, now: float, *, routine: bool = False
    ) -> int | None:
        """None when the record is left out; else how many of its template were left out
        since the last one logged and not reported yet (0 mostly)."""
        window = self._windows.get(key)
        if window is not None and now - window.opened < self.interval_s:
            window.count += 1
            window.levelno = max(window.levelno, levelno)
            window.routine = window.routine and routine
            self._next_due = min(self._next_due, window.opened + self.interval_s)
            return None
        self._windows.pop(key, None)  # re-inserted last: the dict stays in opening order
        self._windows[key] = _Window(now)
        if len(self._windows) > MAX_TEMPLATES:
            del self._windows[next(iter(self._windows))]
        return window.count if window is not None else 0

    def due(self, now: float) -> list[Suppressed]:
        """The windows closed by ``now`` with records left out, to report once; forgotten."""
        if now < self._next_due:
            return []
        closed = [
            key
            for key, window in self._windows.items()
            if window.count and now - window.opened >= self.interval_s
        ]
        reported = [self._forget(key) for key in closed]
        self._next_due = min(
            (w.opened + self.interval_s for w in self._windows.values() if w.count),
            default=float("inf"),
        )
        return reported

    def drain(self) -> list[Suppressed]:
        """Every window's records left out, closed or not (at exit); all forgotten."""
        reported = [self._forget(key) for key, w in list(self._windows.items()) if w.count]
        self._windows.clear()
        self._next_due = float("inf")
        return reported

    def _forget(self, key: tuple[str, str]) -> Suppressed:
        window = self._windows.pop(key)
        return Suppressed(key[0], key[1], window.count, window.levelno, window.routine)


def short_path(filename: str) -> str:
    """``filename`` relative to the longest ``sys.path`` entry holding it
    (``aiokafka/conn.py``, not ``/usr/lib/python3.12/site-packages/aiokafka/conn.py``); as
    it is once the interpreter is finalizing (``sys.path`` None: asyncio's last warnings)."""
    for entry in sorted((p for p in sys.path or () if p), key=len, reverse=True):
        prefix = entry.rstrip(os.sep) + os.sep
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    return filename


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:  # arguments that do not fit the template: show both
        return f"{record.msg!s} {record.args!r}"


def _cut(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return f"{text[:MAX_MESSAGE_CHARS]}... ({len(text) - MAX_MESSAGE_CHARS} more characters)"


__all__ = [
    "LIBRARY_EVENT",
    "LIBRARY_LEVEL_CAP",
    "LIBRARY_LOG_INTERVAL_S",
    "SUPPRESSED_EVENT",
    "LibraryLogLimiter",
    "Suppressed",
    "emitted_level",
    "is_library",
    "library_fields",
    "library_key",
    "routine",
    "short_path",
    "suppressed_fields",
]
