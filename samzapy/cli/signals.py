"""What stops ``samzapy run``: SIGTERM, SIGINT and SIGHUP, and the loss of its log stream's
reader. The first asks the container to stop gracefully; a second signal exits at once.
SIGQUIT (``kill -3``) stops nothing: as a JVM does, it writes a thread dump to stderr
(``thread_dump``: every thread's stack and every asyncio task's) and the job runs on.

Until the container runs, the signals interrupt (``interrupt``: KeyboardInterrupt, which the
command logs as ``job_interrupted``); while it runs, ``SignalStopper`` takes them with plain
handlers rather than the event loop's, which run only when the loop does: a call that holds
the loop (a sync task's blocking call, a log line written to a pipe nobody reads) had kept a
second signal from exiting until it returned. A handler interrupts whatever the main thread
was doing, a log line's write included, whose lock it cannot take: what it logs goes through
another thread, waited for briefly (``_aside``). The kernel hands a signal to any thread of the
process, though, and only the main thread runs a handler: a signal another thread takes (one
sent while the main thread has another pending, or two pending at once when a stopped process
goes on) had waited for the call too; ``_Waker`` then interrupts the main thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import linecache
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from structlog.typing import FilteringBoundLogger

#: What stops a run gracefully. SIGHUP too (a closed terminal or ssh session), as the JVM's
#: shutdown hooks that stop Samza's container take it, unless it is ignored when the process
#: starts (`nohup samzapy run ...`): then it stays ignored.
_STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
#: The stop's reason when the reader of the log stream (stdout) closed it.
OUTPUT_CLOSED = "stdout_closed"
_EXIT_FORCED = 1  # main.EXIT_JOB_FAILED
#: How long a handler waits for its log line's thread (the line may be held up).
_LOG_WAIT_S = 0.5
#: What ``_Waker`` interrupts the main thread with: its handler does nothing, and the call it
#: interrupts runs the handlers pending first. Ignored by default and used by nothing else, so
#: harmless unasked (Go's runtime preempts its threads with it for the same reasons).
_NUDGE: int | None = getattr(signal, "SIGURG", None)
#: How far a thread dump follows one task's chain of awaits, and its longest "awaiting" line.
_MAX_DEPTH = 100
_MAX_LINE = 500


def interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def stop_signals() -> list[signal.Signals]:
    """The signals of ``_STOP_SIGNALS`` this platform has, SIGHUP left out while ignored."""
    found = []
    for name in _STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None or (name == "SIGHUP" and signal.getsignal(sig) == signal.SIG_IGN):
            continue
        found.append(sig)
    return found


class Stoppable(Protocol):
    def request_stop(self, reason: str) -> None: ...


class SignalStopper:
    """The first SIGTERM/SIGINT/SIGHUP asks the container to stop; a second one exits at
    once. So does the loss of the log stream's reader (``output_closed``), as SIGPIPE stops a
    Unix tool, but gracefully: the tasks close and commit what they processed."""

    def __init__(self, log: FilteringBoundLogger) -> None:
        self._log = log
        self.signal_name: str | None = None
        #: What asked the stop first: a signal's name or OUTPUT_CLOSED.
        self.reason: str | None = None
        self._after: str | None = None  # a first signal once the run had ended
        self._installed: list[signal.Signals] = []
        self._running: tuple[asyncio.AbstractEventLoop, Stoppable] | None = None
        self._ended = False
        self._waker: _Waker | None = None

    def output_closed(self) -> None:
        """From any thread: the reader of the log stream closed it. A stop not asked yet is
        asked now, or when the container is there to stop (``install``)."""
        if self.reason is not None or self._ended:
            return
        self.reason = OUTPUT_CLOSED
        running = self._running
        if running is not None:
            loop, container = running
            loop.call_soon_threadsafe(container.request_stop, OUTPUT_CLOSED)

    def install(self, loop: asyncio.AbstractEventLoop, container: Stoppable) -> None:
        self._running = (loop, container)
        if self.reason == OUTPUT_CLOSED:  # while the job's file was checked
            container.request_stop(OUTPUT_CLOSED)
        if self._waker is None and threading.current_thread() is threading.main_thread():
            self._waker = _Waker.started(loop)
        for sig in stop_signals():
            try:
                signal.signal(sig, self._signalled)
            except ValueError:
                continue  # not the main thread
            self._installed.append(sig)

    def uninstall(self, loop: asyncio.AbstractEventLoop) -> None:
        """The container's run ended: until the process exits a signal no longer reaches the
        loop, so a plain handler takes over, one that still exits at once on a second signal
        (the default one had killed the process, exit 143, or raised KeyboardInterrupt)."""
        self._running, self._ended = None, True
        if self._waker is not None:
            self._waker.ended()
        for sig in self._installed:
            signal.signal(sig, self._after_run)
        self._installed.clear()

    def _after_run(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is None and self._after is None:  # nothing is left to stop
            self._after = name
            _aside(lambda: self._log.info("signal_received", signal=name, action="exiting"))
            return
        self._force(name)

    def _signalled(self, signum: int, frame: Any) -> None:
        """The first signal hands the stop to the loop; a second one exits from here."""
        name = signal.Signals(signum).name
        running = self._running
        if self.signal_name is None and running is not None:
            self.signal_name = name
            self.reason = self.reason or name
            loop, container = running
            loop.call_soon_threadsafe(self._stop, name, container)
            return
        self._force(name)

    def _stop(self, name: str, container: Stoppable) -> None:
        self._log.info("signal_received", signal=name, action="graceful_stop")
        container.request_stop(name)

    def _force(self, name: str) -> None:
        # The graceful stop is stuck or the operator is impatient: leave without cleanup.
        first = self.signal_name or self._after
        _aside(
            lambda: self._log.error(
                "shutdown_forced", signal=name, first_signal=first, exit_code=_EXIT_FORCED
            )
        )
        for stream in (sys.stdout, sys.stderr):
            # closed, its reader gone, or in the middle of the write the signal interrupted
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                stream.flush()
        os._exit(_EXIT_FORCED)


class _Waker:
    """From ``install`` on, the signals' wakeup fd, which the thread that takes a signal writes
    its number to, is read by a thread of its own. For each signal it interrupts the main thread
    (with ``_NUDGE``: a blocking call there returns to run the pending handlers, this one's
    included) and wakes the loop (uvloop's poll, interrupted, does not return to run them).
    The numbers go on to the wakeup fd it replaced (uvloop's, whose loop runs the handlers a
    task gave ``add_signal_handler`` from it) until the run ends (``ended``): the loop then
    closes that fd. The thread stays for the process's life: after the run the main thread
    may still wait on a call or a thread, and a signal another thread takes must still reach
    it (under uvloop, whose end restores the wakeup fd it found, only until then)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, read_fd: int, nudge: int, replaced: int
    ) -> None:
        self._loop = loop
        self._read_fd = read_fd
        self._nudge = nudge
        self._main = threading.main_thread().ident or 0
        self._replaced = replaced if replaced >= 0 else None
        self._passing = threading.Lock()  # ``ended`` waits for a write under way

    @classmethod
    def started(cls, loop: asyncio.AbstractEventLoop) -> _Waker | None:
        """Set up from the main thread; None where the platform cannot (nor needs to)."""
        if _NUDGE is None or not hasattr(signal, "pthread_kill"):
            return None
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.signal(_NUDGE, lambda signum, frame: None)
        replaced = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        waker = cls(loop, read_fd, _NUDGE, replaced)
        threading.Thread(target=waker._read, name="signal-waker", daemon=True).start()
        return waker

    def ended(self) -> None:
        """The run ended: nothing more goes to the wakeup fd this one replaced."""
        with self._passing:
            self._replaced = None

    def _read(self) -> None:
        while numbers := os.read(self._read_fd, 64):
            signals = bytes(n for n in numbers if n != self._nudge)  # its own: else endless
            if signals:
                self._pass_on(signals)
                self._wake()

    def _pass_on(self, signals: bytes) -> None:
        with self._passing, contextlib.suppress(OSError):  # full, or closed
            if self._replaced is not None:
                os.write(self._replaced, signals)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # the main thread has ended
            signal.pthread_kill(self._main, self._nudge)
        with contextlib.suppress(RuntimeError):  # the loop is closed
            self._loop.call_soon_threadsafe(_nothing)


def _nothing() -> None:
    """A callback to wake the loop with: running Python code, it runs the handlers pending."""


def _aside(log_line: Callable[[], None]) -> None:
    """Log from a signal handler: on another thread, waited for ``_LOG_WAIT_S`` at most (the
    handler may have interrupted a write that holds the stream's lock, or one blocked on a
    pipe nobody reads)."""
    writer = threading.Thread(target=log_line, name="signal-log", daemon=True)
    try:
        writer.start()
    except RuntimeError:  # the interpreter is exiting (joining threads): no write is under way
        log_line()
        return
    writer.join(_LOG_WAIT_S)


def install_thread_dump(log: FilteringBoundLogger) -> None:
    """From now on SIGQUIT writes ``thread_dump`` to stderr (where the platform has it, and on
    the main thread only) instead of killing the process with a core dump."""
    sig = getattr(signal, "SIGQUIT", None)
    if sig is None:
        return
    # Replaces the entry point's faulthandler (``samzapy.cli``), which is not unregistered:
    # that would restore the default, and a SIGQUIT meanwhile would kill the process.
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(sig, lambda signum, frame: _dump(log))


def thread_dump() -> tuple[str, str, int]:
    """The dump's header, its asyncio part (each task of the running loop with its stack)
    and the number of tasks. The threads' stacks come between, from faulthandler."""
    threads = threading.enumerate()
    header = (
        f"===== samzapy thread dump (SIGQUIT) pid {os.getpid()} at "
        f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {len(threads)} threads =====\n"
        + "".join(
            f"thread 0x{t.ident or 0:016x} {t.name!r}{' (daemon)' if t.daemon else ''}\n"
            for t in threads
        )
    )
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # before the event loop runs, or after
        return header, "----- asyncio tasks: no event loop is running -----\n", 0
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    out = io.StringIO()
    out.write(f"----- asyncio tasks: {len(tasks)} (most recent call last) -----\n")
    for task in tasks:
        out.write(f"task {task.get_name()!r}:\n")
        out.writelines(_awaiting(task.get_coro()))
    return header, out.getvalue(), len(tasks)


def _awaiting(awaitable: Any) -> list[str]:
    """The frames of a task's coroutine and of what it awaits down the chain (a task's own
    ``print_stack`` shows only the outermost frame of a suspended coroutine), then the
    future or task it waits on."""
    lines: list[str] = []
    for _ in range(_MAX_DEPTH):
        frame = None
        for name in ("cr_frame", "gi_frame", "ag_frame"):
            frame = getattr(awaitable, name, None) or frame
        if frame is None:
            if type(awaitable).__name__ == "FutureIter":  # ``await future``: its iterator
                lines.append("  waiting on a future\n")
            elif awaitable is not None:
                lines.append(f"  waiting on {awaitable!r}"[:_MAX_LINE] + "\n")
            break
        lineno = frame.f_lineno
        code = frame.f_code
        lines.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
        if source := linecache.getline(code.co_filename, lineno).strip():
            lines.append(f"    {source}\n")
        awaitable = next(
            (
                a
                for n in ("cr_await", "gi_yieldfrom", "ag_await")
                if (a := getattr(awaitable, n, None))
            ),
            None,
        )
    return lines


def _dump(log: FilteringBoundLogger) -> None:
    """Take the dump here, then write it to stderr's file descriptor from another thread
    (``_aside``): the handler may have interrupted a write to ``sys.stderr``, whose lock it
    cannot take, and a stderr nobody reads would hold the event loop. faulthandler writes to
    a temporary file: it holds the interpreter's lock while it writes, so a full pipe would
    have held every thread."""
    header, tasks, count = thread_dump()
    try:
        with tempfile.TemporaryFile() as threads:
            faulthandler.dump_traceback(file=threads, all_threads=True)
            threads.seek(0)
            stacks = threads.read().decode(errors="replace")
    except OSError as exc:  # no temporary directory to write to
        stacks = f"(no thread stacks: {exc})\n"
    text = f"{header}----- threads -----\n{stacks}{tasks}===== end of samzapy thread dump =====\n"

    def write() -> None:
        try:
            _write(sys.stderr.fileno(), text)
        except (OSError, ValueError, AttributeError):  # stderr closed, or its reader gone
            return
        log.info("thread_dump_written", threads=header.count("\nthread 0x"), asyncio_tasks=count)

    _aside(write)


def _write(fd: int, text: str) -> None:
    data = text.encode(errors="replace")
    while data:
        data = data[os.write(fd, data) :]


__all__ = [
    "OUTPUT_CLOSED",
    "SignalStopper",
    "Stoppable",
    "install_thread_dump",
    "interrupt",
    "stop_signals",
    "thread_dump",
]
