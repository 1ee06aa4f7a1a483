"""A TestRunner's logs, with structlog on its defaults: a failing task's traceback shows no
frame's local variables (rich would print them), and a test's own set-up is left alone.

The runs happen in a fresh interpreter: loggers cached on first use by an earlier test's
set-up (``samzapy run``'s, in-process) would keep writing where that set-up said."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SECRET = "hunter2-in-a-local"

SCRIPT = textwrap.dedent(
    f"""
    import io
    import pytest
    import structlog
    import structlog.testing

    from samzapy import StreamTask
    from samzapy.api.errors import TaskError
    from samzapy.testing import TestRunner


    class FailsWithALocal(StreamTask):
        def process(self, envelope, collector, coordinator):
            password = {SECRET!r}  # what a frame's locals would show
            raise ValueError(f"cannot process {{envelope.message}} ({{len(password)}})")


    def run():
        runner = TestRunner(FailsWithALocal, {{"task.max.concurrency": 1}})
        with pytest.raises(TaskError, match="cannot process a"):
            runner.add_input("in", {{0: ["a"]}}).run(timeout=10)


    before = list(structlog.get_config()["processors"])
    print("== defaults", flush=True)
    run()
    print("== put back", structlog.get_config()["processors"] == before, flush=True)
    with structlog.testing.capture_logs():  # configured since, on the built-in defaults
        pass
    print("== after capture_logs", structlog.is_configured(), flush=True)
    run()
    sink = io.StringIO()
    try:
        import rich  # noqa: F401
    except ImportError:  # no renderer shows locals then: nothing to tell
        formatter = structlog.dev.plain_traceback
    else:
        formatter = structlog.dev.RichTracebackFormatter()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=formatter),
        ],
        logger_factory=structlog.PrintLoggerFactory(sink),
    )
    run()
    print("== own set-up", {SECRET!r} in sink.getvalue(), flush=True)
    """
)


def test_structlogs_defaults_render_tracebacks_without_locals_and_a_set_up_stays() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**_without_colour(), "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    defaults, rest = proc.stdout.split("== put back True\n")
    after_capture, own = rest.split("== own set-up")
    for output in (defaults, after_capture):
        assert "ValueError: cannot process a" in output  # the traceback is there
        assert SECRET not in output
    assert after_capture.startswith("== after capture_logs True")
    has_rich = importlib.util.find_spec("rich") is not None
    assert own.strip() == str(has_rich)  # its choice: locals shown (rich renders them)


def _without_colour() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
