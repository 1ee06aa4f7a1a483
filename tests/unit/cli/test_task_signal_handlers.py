"""A task's own ``loop.add_signal_handler`` still runs while ``samzapy run``'s stopper is
installed. The stopper reads the signals' wakeup fd itself (``signals._Waker``), replacing the
one uvloop reads to run such handlers: uvloop's never ran until the stopper passed each
signal's number on to it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys

    import structlog
    import uvloop

    from samzapy.cli.logging import configure_logging
    from samzapy.cli.signals import SignalStopper

    configure_logging("json", "info")


    class Container:
        def request_stop(self, reason):
            pass


    async def run():
        loop = asyncio.get_running_loop()
        stopper = SignalStopper(structlog.get_logger("samzapy.cli"))
        stopper.install(loop, Container())
        got = asyncio.Event()
        loop.add_signal_handler(signal.SIGUSR1, got.set)
        os.kill(os.getpid(), signal.SIGUSR1)
        try:
            await asyncio.wait_for(got.wait(), 20)
        finally:
            stopper.uninstall(loop)
        print("handled", flush=True)


    factory = uvloop.new_event_loop if sys.argv[1] == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(run())
    """
)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_tasks_loop_signal_handler_runs_beside_the_stopper(tmp_path: Path, loop: str) -> None:
    script = tmp_path / "handler.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), loop],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "handled", done.stdout
