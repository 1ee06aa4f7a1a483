"""Loading ``task.class`` through the real command: every failure is exit 2 and one line.

``samzapy run`` logs one ``config_invalid`` event naming ``task.class``, the module and the
cause (the traceback only at ``--log-level debug``); ``samzapy validate`` imports the class and
checks that it is a task just as ``run`` does, printing the same line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

JOB = """\
job.name: tasktest
task.class: {task_class}
task.inputs: [files.in]
systems.files.samza.factory: file
systems.files.path: data
"""

TASK = """\
from samzapy import StreamTask


class Copy(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass


class NotATask:
    pass


def copy():
    pass
"""

# (source of mytasks.py, task.class, the line the user sees)
CASES = {
    "missing module": (
        None,
        "nosuchtasks:Copy",
        r"task\.class: cannot import module 'nosuchtasks' \(from 'nosuchtasks:Copy'\): No module "
        r"named 'nosuchtasks'; it must be importable from the job's Python path \(the working "
        r"directory, then PYTHONPATH\)",
    ),
    "missing class": (
        TASK,
        "mytasks:NoSuchTask",
        r"task\.class: module 'mytasks' has no attribute 'NoSuchTask' \(from "
        r"'mytasks:NoSuchTask'\)",
    ),
    "module raises while importing": (
        "import json\nSETTINGS = json.loads('{not json')\n",
        "mytasks:Copy",
        r"task\.class: importing module 'mytasks' \(from 'mytasks:Copy'\) failed: "
        r"JSONDecodeError: .* \(mytasks\.py, line 2\)",
    ),
    "module imports a missing package": (
        "import no_such_dependency_zz\n",
        "mytasks:Copy",
        r"task\.class: importing module 'mytasks' \(from 'mytasks:Copy'\) failed: "
        r"ModuleNotFoundError: No module named 'no_such_dependency_zz' \(mytasks\.py, line 1\)",
    ),
    "syntax error": (
        "class Copy(StreamTask)\n    pass\n",
        "mytasks:Copy",
        r"task\.class: importing module 'mytasks' \(from 'mytasks:Copy'\) failed: SyntaxError: "
        r".*\(mytasks\.py, line 1\)",
    ),
    "not a task": (
        TASK,
        "mytasks:NotATask",
        r"task\.class: 'mytasks:NotATask' is not a task: it must subclass samzapy\.StreamTask "
        r"or samzapy\.AsyncStreamTask",
    ),
    "not a class": (
        TASK,
        "mytasks:copy",
        r"task\.class: 'mytasks:copy' is a function, expected a class",
    ),
}


def job_dir(tmp_path: Path, source: str | None, task_class: str) -> Path:
    (tmp_path / "data" / "in").mkdir(parents=True)
    (tmp_path / "data" / "in" / "0.jsonl").write_text('{"n": 1}\n')
    (tmp_path / "job.yaml").write_text(JOB.format(task_class=task_class))
    if source is not None:
        (tmp_path / "mytasks.py").write_text(source)
    return tmp_path


def samzapy(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samzapy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("case", CASES)
def test_run_exits_2_with_one_line_naming_task_class(tmp_path: Path, case: str) -> None:
    source, task_class, line = CASES[case]
    proc = samzapy(job_dir(tmp_path, source, task_class), "run", "job.yaml")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == ""
    (event,) = [json.loads(text) for text in proc.stdout.splitlines()]
    assert event["event"] == "config_invalid"
    assert event["exit_code"] == 2
    assert event["job"] == "tasktest"
    (problem,) = event["problems"]
    assert re.fullmatch(line, problem), problem
    assert "exception" not in event


@pytest.mark.parametrize("case", CASES)
def test_validate_imports_and_checks_the_task_class(tmp_path: Path, case: str) -> None:
    source, task_class, line = CASES[case]
    proc = samzapy(job_dir(tmp_path, source, task_class), "validate", "job.yaml")

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    (problem,) = proc.stderr.splitlines()
    assert re.fullmatch(line, problem), problem


def test_validate_accepts_a_task_class_from_the_working_directory(tmp_path: Path) -> None:
    proc = samzapy(job_dir(tmp_path, TASK, "mytasks:Copy"), "validate", "job.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "task.class: mytasks:Copy" in proc.stdout


def test_validate_lists_a_task_class_problem_with_the_other_problems(tmp_path: Path) -> None:
    cwd = job_dir(tmp_path, TASK, "mytasks:NotATask")
    proc = samzapy(cwd, "validate", "job.yaml", "--set", "task.comit.ms=5")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "unknown key 'task.comit.ms'; did you mean 'task.commit.ms'?",
        "task.class: 'mytasks:NotATask' is not a task: it must subclass samzapy.StreamTask or "
        "samzapy.AsyncStreamTask",
    ]


def test_console_format_shows_one_line_and_the_traceback_only_at_debug(tmp_path: Path) -> None:
    source, task_class, _ = CASES["module raises while importing"]
    cwd = job_dir(tmp_path, source, task_class)

    info = samzapy(cwd, "run", "job.yaml", "--log-format", "console")
    assert info.returncode == 2
    (line,) = info.stdout.splitlines()
    assert "config_invalid" in line and "JSONDecodeError" in line and "task.class" in line

    debug = samzapy(cwd, "run", "job.yaml", "--log-format", "console", "--log-level", "debug")
    assert debug.returncode == 2
    assert "Traceback" in debug.stdout
    assert "mytasks.py" in debug.stdout
    assert "config_invalid" in debug.stdout.splitlines()[-1]
