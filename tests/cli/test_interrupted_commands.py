"""Ctrl-C stops validate, plan and checkpoint with one line on stderr and exit 1.

samzapy/cli/main.py: "Exit codes: 0 finished or stopped cleanly, 1 job failure, 2
configuration or usage error. Ctrl-C stops ``validate``, ``plan`` and ``checkpoint`` with one
line on stderr and exit 1" (as `samzapy run` interrupted before its loop runs: one
`job_interrupted` line, exit 1), never a KeyboardInterrupt traceback. Each command is caught
where it waits: on a task module that takes its time to import, or on a broker that is down.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_run import HERE, ROOT, job_yaml, write_partitions
from test_run_apps import app_yaml

SLOW_MODULE = """\
import os
import time

open(os.environ["SAMZAPY_TEST_READY_FILE"], "w").close()
time.sleep(60)
"""


def closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def kafka_down() -> dict[str, object]:
    return {
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": f"127.0.0.1:{closed_port()}",
        "systems.kafka.connect.timeout.ms": 60000,
    }


def _sigint_default() -> None:
    # Ctrl-C as at a terminal, also when the suite runs as a background job (whose children
    # start with SIGINT ignored).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    ("command", "waits_on"),
    [("validate", "module"), ("plan", "broker"), ("show", "broker"), ("set", "broker")],
)
def test_ctrl_c_is_one_line_and_exit_1(tmp_path: Path, command: str, waits_on: str) -> None:
    ready, err_file = tmp_path / "ready", tmp_path / "stderr"
    write_partitions(tmp_path / "data", "in", {0: []})
    if waits_on == "module":
        (tmp_path / "slowtask.py").write_text(SLOW_MODULE)
        job = job_yaml(tmp_path, "Copy", **{"task.class": "slowtask:Task"})
    elif command == "plan":
        job = app_yaml(tmp_path, "CountByKeyOnKafka", **kafka_down())
    else:
        job = job_yaml(tmp_path, "Copy", **{"task.inputs": ["kafka.in"], **kafka_down()})
    args = {
        "show": ["checkpoint", "show", str(job)],
        "set": ["checkpoint", "set", str(job), "--to", "oldest"],
    }.get(command, [command, str(job)])
    with open(err_file, "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "samzapy", *args],
            cwd=tmp_path,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT))),
                "SAMZAPY_TEST_READY_FILE": str(ready),
            },
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=_sigint_default,
        )
    try:
        deadline = time.monotonic() + 30
        while not (ready.exists() or "broker_unreachable" in err_file.read_text()):
            assert proc.poll() is None, (proc.communicate(), err_file.read_text())
            assert time.monotonic() < deadline, "the command never got to wait"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = err_file.read_text()
    assert (proc.returncode, out) == (1, ""), err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == {
        "show": "samzapy checkpoint show: interrupted",
        "set": "samzapy checkpoint set: interrupted; what it wrote before stays (samzapy "
        "checkpoint show)",
    }.get(command, f"samzapy {command}: interrupted")


#: `python -m samzapy run JOB` whose import of the command's module is interrupted by a
#: signal, as a `docker stop` or a pod's deletion right after the container started sends it.
SIGNAL_WHILE_IMPORTING = """\
import importlib.abc
import os
import runpy
import signal
import sys


class SignalOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "samzapy.cli.main":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIGNAL)
        return None


SIGNAL = getattr(signal, sys.argv[1])
sys.meta_path.insert(0, SignalOnImport())
sys.argv[1:] = ["run", sys.argv[2]]
runpy.run_module("samzapy", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_command_itself_imports_is_one_line_and_exit_1(
    tmp_path: Path, sig: str
) -> None:
    """The first instants of the process: a SIGTERM that arrived while the command's modules
    imported (most of a second) killed it (143), and a container's PID 1 drops a signal it has
    no handler for, so `docker stop` waited out its grace period and killed the job then,
    uncommitted; SIGINT printed a KeyboardInterrupt traceback."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_WHILE_IMPORTING, sig, str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_sigint_default,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["event"], e["stage"], e["exit_code"]) for e in lines] == [
        ("job_interrupted", "start-up", 1)
    ]
    assert not (tmp_path / "data" / "out").exists()


def test_the_console_script_is_the_entry_point_that_takes_signals_first() -> None:
    """pyproject's console script (the image's entry point) is the light samzapy.cli:main, as
    `python -m samzapy` runs it, not samzapy.cli.main's main behind its imports."""
    text = (ROOT / "pyproject.toml").read_text()
    assert 'samzapy = "samzapy.cli:main"' in text


#: A signal at the first import of ``TRIGGER``, through either of the command's entry points:
#: pip's console script for `samzapy = "samzapy.cli:main"` (the image's entry point) and
#: `python -m samzapy`. A finder without importlib.abc, which would import typing first.
SIGNAL_AT_AN_IMPORT = """\
import os
import runpy
import signal
import sys


class SignalOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == TRIGGER:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIGNAL)
        return None


SIGNAL, TRIGGER, ENTRY = getattr(signal, sys.argv[1]), sys.argv[2], sys.argv[3]
if TRIGGER in sys.modules:
    print(TRIGGER, "was imported before the command started", file=sys.stderr)
    sys.exit(3)
sys.meta_path.insert(0, SignalOnImport())
sys.argv[1:] = ["run", sys.argv[4]]
if ENTRY == "console-script":
    from samzapy.cli import main

    sys.exit(main())
runpy.run_module("samzapy", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("entry", ["console-script", "python-m"])
@pytest.mark.parametrize("trigger", ["samzapy.api", "json"])
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_the_handlers_are_set_before_anything_heavy_imports(
    tmp_path: Path, sig: str, trigger: str, entry: str
) -> None:
    """The window before samzapy takes SIGTERM over is the interpreter's start alone (about
    0.05 s on a loaded machine): the ``samzapy`` package imported ``samzapy.api`` (the task
    interfaces, typing, inspect...) and ``samzapy.cli`` json before ``main`` set the handlers,
    so a `docker stop` in the first 0.1 s killed the process (143; dropped for a container's
    PID 1, then SIGKILL after the grace period), and a Ctrl-C printed a traceback."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 1}]})
    job = job_yaml(tmp_path, "Copy")
    proc = subprocess.run(
        [sys.executable, "-c", SIGNAL_AT_AN_IMPORT, sig, trigger, entry, str(job)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(HERE), str(ROOT)))},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_sigint_default,
    )
    assert (proc.returncode, proc.stderr) == (1, ""), proc.stdout + proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(e["event"], e["stage"]) for e in lines] == [("job_interrupted", "start-up")]
