"""README, "Running": "a second signal exits at once with 1", also once the container's run
has ended and its loop no longer takes signals, while the process still waits to exit (here
for a thread the interpreter joins at exit, as it did for a call a stop left running on the
thread pool): the default handler had killed the process by the signal (exit 143)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = textwrap.dedent(
    """
    import asyncio, signal, sys, threading, time

    import structlog

    from samzapy.cli.logging import configure_logging
    from samzapy.cli.signals import SignalStopper

    configure_logging("json", "info")


    class Container:
        def request_stop(self, reason):
            pass


    stopper = SignalStopper(structlog.get_logger("samzapy.cli"))


    async def run():
        loop = asyncio.get_running_loop()
        stopper.install(loop, Container())
        if sys.argv[1] == "stopped":
            signal.raise_signal(signal.SIGTERM)  # the first: the graceful stop
            await asyncio.sleep(0.1)
        stopper.uninstall(loop)


    asyncio.run(run())
    threading.Thread(target=time.sleep, args=(30,)).start()  # joined at exit
    print("leaving", flush=True)
    """
)


def leaving(tmp_path: Path, first: str) -> subprocess.Popen[str]:
    script = tmp_path / "leaving.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), first],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    while (line := proc.stdout.readline()) != "leaving\n":
        assert line, proc.communicate()
    return proc


def finished(proc: subprocess.Popen[str]) -> tuple[list[dict[str, object]], float]:
    signalled_at = time.monotonic()
    try:
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in err, err
    found = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return found, time.monotonic() - signalled_at


def test_a_second_signal_once_the_run_ended_exits_1_at_once(tmp_path: Path) -> None:
    proc = leaving(tmp_path, "stopped")
    proc.send_signal(signal.SIGTERM)
    found, took = finished(proc)
    assert proc.returncode == 1
    assert took < 5
    assert found[-1]["event"] == "shutdown_forced"
    assert found[-1]["first_signal"] == "SIGTERM"


def test_a_first_signal_once_the_run_ended_lets_it_exit_and_a_second_forces_it(
    tmp_path: Path,
) -> None:
    """Nothing is left to stop: the first is logged, the process goes on leaving."""
    proc = leaving(tmp_path, "ran")
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    found, took = finished(proc)
    assert proc.returncode == 1
    assert took < 5
    assert [(e["event"], e["signal"]) for e in found[-2:]] == [
        ("signal_received", "SIGINT"),
        ("shutdown_forced", "SIGTERM"),
    ]
    assert found[-2]["action"] == "exiting"
