"""What every command does with its process: find classes where it was started, and leave
quietly once its reader has closed the pipe (``samzapy tail ... | head``)."""

from __future__ import annotations

import os
import sys


def add_working_directory_to_path() -> None:
    """Like `python -m`, find task, application and serde classes relative to the directory
    the command is started from."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def stdout_closed() -> None:
    """Call on BrokenPipeError: point stdout at /dev/null, so that the interpreter's last
    flush at exit does not fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


__all__ = ["add_working_directory_to_path", "stdout_closed"]
