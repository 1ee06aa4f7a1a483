"""Ctrl-C stops validate, plan and checkpoint with one line on stderr and exit 1.

samzapy/cli/main.py: "Exit codes: 0 finished or stopped cleanly, 1 job failure, 2
configuration or usage error. Ctrl-C stops ``validate``, ``plan`` and ``checkpoint`` with one
line on stderr and exit 1" (as `samzapy run` interrupted before its loop runs: one
`job_interrupted` line, exit 1), never a KeyboardInterrupt traceback. Each command is caught
where it waits: on a task module that takes its time to import, or on a broker that is down.
"""

from __future__ import annotations

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
