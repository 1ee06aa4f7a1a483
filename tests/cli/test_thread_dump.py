"""`samzapy run` on SIGQUIT (kill -3): a thread dump on stderr, and the job runs on, as a JVM
does. Python's default had killed the process with a core dump and no log line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_interrupted_commands import SIGNAL_AT_AN_IMPORT
from test_run import (
    HERE,
    ROOT,
    events,
    job_yaml,
    signal_masks,
    started,
    taken,
    write_partitions,
)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_sigquit_writes_every_thread_and_task_stack_to_stderr_and_the_job_runs_on(
    tmp_path: Path, loop: str
) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    # HangOnFirst's first call waits 60 s in process_async: the dump must show where.
    job = job_yaml(tmp_path, "HangOnFirst", **{"job.loop": loop, "task.shutdown.ms": 500})
    proc = started(job, tmp_path / "ready", {})
    try:
        for _ in range(2):  # a second one too: the first changed nothing
            proc.send_signal(signal.SIGQUIT)
            taken(proc, signal.SIGQUIT)  # else the second would merge into it: one dump
            time.sleep(1)
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    dumps = err.split("===== samzapy thread dump (SIGQUIT) pid ")[1:]
    assert len(dumps) == 2, err
    for dump in dumps:
        assert dump.rstrip().endswith("===== end of samzapy thread dump ====="), dump
        threads, tasks = dump.split("----- asyncio tasks: ")
        assert "thread 0x" in threads and "'MainThread'" in threads, threads
        assert "Current thread 0x" in threads, threads  # faulthandler's part
        # The slot of the hanging call, down to the call's own line.
        slot = tasks.split("task 'Partition 0-slot-0':\n")[1].split("\ntask ")[0]
        assert "in process_async\n    await asyncio.sleep(60)" in slot, slot
    written = [e for e in events(out) if e["event"] == "thread_dump_written"]
    assert len(written) == 2 and all(e["asyncio_tasks"] >= 3 for e in written), out
    assert [e["event"] for e in events(out)][-1] == "container_exited"


def test_sigquit_with_a_stderr_nobody_reads_does_not_hold_the_job(tmp_path: Path) -> None:
    """Dumps enough to fill stderr's pipe, which the test does not read: the job goes on
    and stops on SIGTERM. The dump written from the signal handler itself had blocked the
    event loop on the full pipe, for good."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    job = job_yaml(tmp_path, "HangOnFirst", **{"task.shutdown.ms": 500})
    proc = started(job, tmp_path / "ready", {})
    try:
        for _ in range(40):  # a dump is a few kB; a pipe holds 64 kB
            proc.send_signal(signal.SIGQUIT)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        out = proc.stdout.read()  # until the process closes it: it exits
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert [e["event"] for e in events(out)][-1] == "container_exited", out


def _quit_default() -> None:
    # SIGQUIT as a container's process gets it, also when the suite runs as a background job
    # (whose children start with SIGQUIT ignored, which the entry point leaves as it is).
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.mark.parametrize("entry", ["console-script", "python-m"])
@pytest.mark.parametrize("trigger", ["samzapy.cli.process", "samzapy.cli.main"])
def test_sigquit_while_the_command_imports_writes_the_threads_and_the_job_runs(
    tmp_path: Path, trigger: str, entry: str
) -> None:
    """A SIGQUIT in the first instants of the process, while the command's modules import
    (before ``_run`` takes SIGQUIT over): Python's default had killed the process with a
    core dump. From the entry point on it writes the threads' stacks (faulthandler's) and
    the job runs to its end."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_AT_AN_IMPORT, "SIGQUIT", trigger, entry, str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_quit_default,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "most recent call first" in proc.stderr, proc.stderr  # faulthandler's stacks
    assert [e["event"] for e in events(proc.stdout)][-1] == "container_exited", proc.stdout
    assert (tmp_path / "data" / "out" / "0.jsonl").read_text().strip() == '{"n":1}'


def _catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler of its own for ``sig`` (the SigCgt mask of its
    /proc/<pid>/status)."""
    return bool(signal_masks(pid)["SigCgt"] >> (sig - 1) & 1)


def test_sigquit_right_after_the_process_starts_does_not_kill_it(tmp_path: Path) -> None:
    """The signal as soon as the process exists: the interpreter's own start is the only
    window left, so the test waits for the end of that, the first moment the process
    catches SIGQUIT, and sends it then. A fixed wait (0.15 s, a few times the start on an
    idle machine) landed inside the start on a loaded one: the default killed the process."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_quit_default,
    )
    try:
        deadline = time.monotonic() + 60
        while not _catches(proc.pid, signal.SIGQUIT):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the process never took SIGQUIT over"
            time.sleep(0.002)
        proc.send_signal(signal.SIGQUIT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
