"""Every command but ``run`` given a job file that is no job: one line on stderr, exit 2.

docs/configuration.md: "`validate` prints them on stderr, one per line [...] both exit with
code 2"; docs/api.md (samzapy plan): "a problem in the file or the application, exits 2 with
the problems on stderr, as `samzapy validate` does"; samzapy/cli/checkpoint_tool.py and
docs/deploy.md: exit 2 for "a configuration or usage problem (the job file, ...)"; tail's
module docstring: "Only JSON goes to stdout, problems to stderr". The file is read the same
way by all four, so each odd file gets the same line from each, and never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_run import samzapy

COMMANDS = {
    "validate": ("validate", "{job}"),
    "plan": ("plan", "{job}", "--format", "json"),
    "checkpoint show": ("checkpoint", "show", "{job}"),
    "checkpoint set": ("checkpoint", "set", "{job}", "--to", "oldest"),
    "tail": ("tail", "{job}", "in"),
}

# file name -> (how to make it, the line every command prints)
ODD_FILES = {
    "list.yaml": (
        lambda path: path.write_text("- job.name: a\n- task.class: b\n"),
        "{path}: the top level must be a mapping of keys to values, got list",
    ),
    "latin1.yaml": (
        lambda path: path.write_bytes("job.name: caf\xe9\n".encode("latin-1")),
        "config file '{path}' is not UTF-8 text: 'utf-8' codec can't decode byte 0xe9 in "
        "position 13: invalid continuation byte",
    ),
    "a-directory.yaml": (
        lambda path: path.mkdir(),
        "job file '{path}' does not exist or is not a file",
    ),
    "absent.yaml": (lambda path: None, "job file '{path}' does not exist or is not a file"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", ODD_FILES)
def test_a_file_that_is_no_job_is_one_line_and_exit_2(
    tmp_path: Path, command: str, name: str
) -> None:
    make, line = ODD_FILES[name]
    path = tmp_path / name
    make(path)
    args = [arg.format(job=path) for arg in COMMANDS[command]]
    proc = samzapy(*args, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [line.format(path=path)]


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_file_names_every_key_a_job_needs(tmp_path: Path, command: str) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    proc = samzapy(*[arg.format(job=path) for arg in COMMANDS[command]], cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == [
        "job.name is required",
        "task.inputs is required (a list of 'system.stream')",
        "task.class is required (a task class, 'module:Class'), or app.class for an application",
    ]
