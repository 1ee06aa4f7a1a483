"""README, "Running": "a second signal exits at once with 1", also while a call holds the
event loop: a sync task's blocking call (the default pool size runs it on the loop), or a log
line written to a pipe nobody reads. The loop's own signal handlers ran only once the call
returned, so neither the first signal nor the second did anything meanwhile; only SIGKILL
ended the process."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_run import events, job_yaml, started, taken, write_partitions


def second_signal_while_held(
    tmp_path: Path,
    loop: str,
    second: Callable[[subprocess.Popen[str]], None],
    pause_s: float = 0.0,
) -> tuple[subprocess.Popen[str], str, str, float]:
    """A job whose call holds its loop for 60 s, sent SIGTERM (taken), then after ``pause_s``
    ``second``: the process, its output and errors, and how long it took to exit from
    ``second``."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    job = job_yaml(tmp_path, "BlockFirstOnPool", **{"job.loop": loop})
    proc = started(job, tmp_path / "ready", {"SAMZAPY_TEST_BLOCK_S": "60"})
    try:
        proc.send_signal(signal.SIGTERM)
        taken(proc, signal.SIGTERM)  # else both pending, SIGINT would be taken first
        time.sleep(pause_s)
        forced_at = time.monotonic()
        second(proc)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, out, err, time.monotonic() - forced_at


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_second_signal_exits_at_once_while_a_call_holds_the_loop(
    tmp_path: Path, loop: str
) -> None:
    proc, out, err, took = second_signal_while_held(
        tmp_path, loop, lambda proc: proc.send_signal(signal.SIGINT), pause_s=0.5
    )
    assert proc.returncode == 1, out + err
    assert took < 5, "the second signal waited for the call"
    forced = [e for e in events(out) if e["event"] == "shutdown_forced"]
    assert [(e["signal"], e["first_signal"]) for e in forced] == [("SIGINT", "SIGTERM")], out
    assert "Traceback" not in err, err


def _to_a_thread_but_the_main_one(pid: int, sig: signal.Signals) -> None:
    """``sig`` to one thread of ``pid`` but its main one, as the kernel hands a process's
    signal to another thread when the main thread has a signal pending already (two sent at
    once, or a stopped process that goes on): there only the main thread runs a handler."""
    tgkill = getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)
    if tgkill is None:
        pytest.skip("no tgkill in this C library")
    others = sorted(int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid)
    for tid in others:  # the first that is still there
        if tgkill(pid, tid, sig) == 0:
            return
    raise AssertionError(f"no thread but the main one took {sig.name}: {others}")


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_second_signal_another_thread_takes_exits_at_once_while_a_call_holds_the_loop(
    tmp_path: Path, loop: str
) -> None:
    """The handler had run only once the call returned, 60 s later."""
    proc, out, err, took = second_signal_while_held(
        tmp_path, loop, lambda proc: _to_a_thread_but_the_main_one(proc.pid, signal.SIGINT)
    )
    assert proc.returncode == 1, out + err
    # Far below the call's 60 s, with room for a loaded machine.
    assert took < 15, "the second signal waited for the call"
    forced = [e for e in events(out) if e["event"] == "shutdown_forced"]
    # Both taken by then, SIGINT's handler may run first: the pair is what matters.
    assert [sorted((e["signal"], e["first_signal"])) for e in forced] == [["SIGINT", "SIGTERM"]]
    assert "Traceback" not in err, err
