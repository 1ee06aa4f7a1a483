"""What every command does with its process: find classes where it was started, keep stdout
for the command's own output, leave quietly once its reader has closed the pipe (``samzapy
tail ... | head``; ``run``'s log stream: ``LogOutput``), and leave without waiting for the
calls a stop gave up on a task thread pool."""

from __future__ import annotations

import contextlib
import logging
import os
import select
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TextIO


def add_working_directory_to_path() -> None:
    """Like `python -m`, find task, application and serde classes relative to the directory
    the command is started from."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


@contextlib.contextmanager
def command_output() -> Iterator[TextIO]:
    """Stdout, for the command's own output (YAML, JSON lines), while whatever else prints
    meanwhile goes to stderr: an application's module or ``describe``, a task, serde or
    system module as it imports, a serde as it decodes. So ``validate``'s stdout is YAML and
    ``plan --format json``'s, ``tail``'s and ``checkpoint show``'s JSON, whatever those print."""
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        yield out


def write_output(out: TextIO, text: str) -> bool:
    """Write ``text`` to ``out`` and flush it. False once the reader has closed the pipe
    (``| head``): ``out`` then goes to /dev/null, and the command stops quietly or carries on
    as it sees fit, its exit code its own (not 120 from a last flush at exit that failed)."""
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        stdout_closed(out)
        return False
    return True


def reader_gone(out: TextIO) -> bool:
    """Whether ``out`` is a pipe whose reader has closed it (``| head`` has its lines), found
    without writing: for a command that may have nothing to write for a long while (``tail
    --follow``), which would otherwise hold the shell's pipeline until its next line."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):  # not a file (a test's StringIO), or closed
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR (a pipe's reader gone) and POLLHUP are always reported
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def stdout_closed(stream: TextIO | None = None) -> None:
    """Call on BrokenPipeError: point stdout (or ``stream``) at /dev/null, so that the
    interpreter's last flush at exit does not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, (sys.stdout if stream is None else stream).fileno())
    os.close(devnull)


class LogOutput:
    """The stream ``run`` logs to (stdout), which tells ``on_closed`` once its reader has
    closed the pipe (``samzapy run job.yaml | head``, a log collector gone): the write that
    found it out and every later one go to /dev/null, so no log call raises (an event loop's
    callback that logged had died of it, and the signal handlers with it: the job went on,
    unlogged and unstoppable but by SIGKILL). Writes come from any thread. Every command's
    stderr is one too (``samzapy.cli:main``): a problem it could not print no longer turned
    its exit code into 1."""

    def __init__(self, stream: TextIO, on_closed: Callable[[], None]) -> None:
        self._stream = stream
        self._on_closed = on_closed
        self._lock = threading.Lock()
        self.closed = False

    def write(self, text: str) -> int:
        if not self.closed:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> object:  # encoding, errors, buffer...
        return getattr(self._stream, name)

    def fileno(self) -> int:
        return self._stream.fileno()

    def _reader_gone(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            stdout_closed(self._stream)  # also for the interpreter's last flush
        self._on_closed()


def leave_unless_calls_ended(code: int) -> None:
    """Exit the process with ``code`` now if a call on a task thread pool still runs (a stop
    gave it up at ``task.shutdown.ms``): CPython would join its thread at exit, waiting for
    the call to return after the run logged its last line. By then the tasks are closed and
    committed, the producers flushed and stopped, the outcome logged: what is left to flush
    is the logging handlers' and the standard streams' (exit handlers are not run)."""
    if "samzapy.container.pool" not in sys.modules:
        return  # no container ran
    from samzapy.container.pool import threads_left_running

    if not threads_left_running():
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or its reader gone
            stream.flush()
    os._exit(code)


__all__ = [
    "LogOutput",
    "add_working_directory_to_path",
    "command_output",
    "leave_unless_calls_ended",
    "reader_gone",
    "stdout_closed",
    "write_output",
]
