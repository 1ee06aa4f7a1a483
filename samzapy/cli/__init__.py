"""The `samzapy` command: argument parsing, logging set-up, signals and exit codes.

``main`` here is the console script and ``python -m samzapy``: it makes SIGTERM (and SIGHUP,
unless ignored) interrupt before it imports the command (``main.py``, most of a second), so a
stop that arrives meanwhile is one ``job_interrupted`` line (``run``) or one line on stderr and
exit 1. Without a handler, the signal's default had killed the process (143), and a
container's PID 1 drops a signal it has no handler for: ``docker stop`` then waited out its
grace period and killed the job that had started meanwhile. What is left before this runs is
the interpreter's start (a few hundredths of a second): the ``samzapy`` package and this module
import nothing more until then (``samzapy/__init__.py``).

SIGQUIT too: from here it writes the threads' stacks to stderr (``faulthandler``, built in)
instead of killing the process with a core dump, until ``run`` takes it over with its thread
dump (``signals.install_thread_dump``).
"""

from __future__ import annotations

import faulthandler
import signal
import sys

# Nothing else before the handlers are set: each import here widens the window (json, typing).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

_EXIT_INTERRUPTED = 1  # main.EXIT_JOB_FAILED, as for a signal while the task's module imports


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, _interrupt)
    _stacks_on_quit()
    stderr = sys.stderr
    try:
        from samzapy.cli.process import LogOutput

        if stderr is not None:  # its reader gone (`2>&1 | head`), the exit code stays the same
            sys.stderr = LogOutput(stderr, lambda: None)
        from samzapy.cli.main import main as command

        return command(args)
    except KeyboardInterrupt:  # before the command took the signals over
        if args[:1] == ["run"]:
            import json
            from datetime import UTC, datetime

            line = {
                "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "level": "warning",
                "event": "job_interrupted",
                "stage": "start-up",
                "exit_code": _EXIT_INTERRUPTED,
            }
            print(json.dumps(line), flush=True)
        else:
            print("samzapy: interrupted", file=sys.stderr)
        return _EXIT_INTERRUPTED
    finally:
        sys.stderr = stderr


def run() -> None:
    """Console-script style entry point: exit the process with ``main()``'s code."""
    sys.exit(main())


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _stacks_on_quit() -> None:
    """SIGQUIT writes every thread's stack to stderr, and the process goes on."""
    sig = getattr(signal, "SIGQUIT", None)
    if sig is None or signal.getsignal(sig) != signal.SIG_DFL:
        return
    try:
        faulthandler.register(sig, all_threads=True)
    except (RuntimeError, ValueError, OSError, AttributeError):  # no stderr: not killed either
        signal.signal(sig, signal.SIG_IGN)


__all__ = ["main", "run"]
