"""A tool (every command but ``run``) takes SIGTERM as Ctrl-C only while it runs: called
in-process (a test, a wrapper script) it puts the caller's handler back, and off the main
thread, where Python refuses to set handlers, it runs without one."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from samzapy.cli.logging import configure_logging
from samzapy.cli.main import main


@pytest.fixture(autouse=True)
def _logging_as_the_suite_has_it() -> Iterator[None]:
    """``validate`` logs at warning to stderr: the later tests' info events come back after."""
    yield
    configure_logging("json", "info")


def _caller_handler(signum: int, frame: object) -> None:
    raise AssertionError("not called")


def test_a_tool_called_in_process_puts_the_callers_sigterm_handler_back(tmp_path: Path) -> None:
    before = signal.signal(signal.SIGTERM, _caller_handler)
    try:
        assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
        assert signal.getsignal(signal.SIGTERM) is _caller_handler
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_tool_called_off_the_main_thread_runs(tmp_path: Path) -> None:
    codes: list[int] = []
    errors: list[BaseException] = []

    def call() -> None:
        try:
            codes.append(main(["validate", str(tmp_path / "missing.yaml")]))
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(30)
    assert (codes, errors) == ([2], [])
