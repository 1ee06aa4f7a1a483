"""The real ``samzapy`` command: validate, usage errors, --version, and run's config errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import samzapy

VALID_JOB = """\
job:
  name: wordcount
task:
  class: wordcount:WordCount
  inputs: [memory.words]
systems:
  memory:
    samza.factory: memory
"""

TYPO_JOB = VALID_JOB.replace("  inputs:", "  comit.ms: 5000\n  inputs:")

# The job's task module, written next to the job file (the commands run from that directory).
WORDCOUNT = """\
from samzapy import StreamTask


class WordCount(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass
"""


def samzapy_command() -> list[str]:
    return [sys.executable, "-m", "samzapy"]


def console_script() -> Path:
    """The installed ``samzapy`` script of the venv running these tests."""
    script = Path(sys.executable).parent / "samzapy"
    if not script.exists():
        found = shutil.which("samzapy")
        assert found is not None, f"no samzapy console script next to {sys.executable}"
        script = Path(found)
    return script


def run(
    *args: str, cwd: Path, command: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(command or samzapy_command()), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a YAML tree, whether the output nests mappings or not."""
    if not isinstance(tree, dict):
        return {prefix: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


@pytest.fixture(autouse=True)
def wordcount_module(tmp_path: Path) -> Path:
    path = tmp_path / "wordcount.py"
    path.write_text(WORDCOUNT)
    return path


@pytest.fixture
def job_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(VALID_JOB)
    return path


@pytest.fixture
def typo_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "typo.yaml"
    path.write_text(TYPO_JOB)
    return path


class TestValidate:
    def test_valid_job_prints_resolved_config_with_defaults(
        self, job_yaml: Path, tmp_path: Path
    ) -> None:
        result = run("validate", str(job_yaml), cwd=tmp_path)

        assert result.returncode == 0, result.stderr
        resolved = flat(yaml.safe_load(result.stdout))
        assert resolved["job.name"] == "wordcount"
        assert resolved["task.class"] == "wordcount:WordCount"
        assert resolved["task.inputs"] == ["memory.words"]
        # defaults are filled in
        assert resolved["task.commit.ms"] == 60000
        assert resolved["task.max.concurrency"] == 1
        assert resolved["job.loop"] == "uvloop"

    def test_output_is_sorted_yaml(self, job_yaml: Path, tmp_path: Path) -> None:
        result = run("validate", str(job_yaml), cwd=tmp_path)
        top_level = [
            line.split(":", 1)[0] for line in result.stdout.splitlines() if line[:1].isalpha()
        ]
        assert top_level == sorted(top_level)
        assert len(top_level) > 1

    def test_set_overrides_are_visible(self, job_yaml: Path, tmp_path: Path) -> None:
        result = run(
            "validate",
            str(job_yaml),
            "--set",
            "task.commit.ms=5000",
            "--set",
            "job.loop=asyncio",
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        resolved = flat(yaml.safe_load(result.stdout))
        assert resolved["task.commit.ms"] == 5000
        assert resolved["job.loop"] == "asyncio"

    def test_typo_names_the_key_and_the_suggestion(self, typo_yaml: Path, tmp_path: Path) -> None:
        result = run("validate", str(typo_yaml), cwd=tmp_path)

        assert result.returncode == 2
        assert result.stdout == ""
        assert "task.comit.ms" in result.stderr
        assert "did you mean 'task.commit.ms'" in result.stderr

    def test_every_problem_gets_its_own_line(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.yaml"
        path.write_text(TYPO_JOB.replace("  inputs:", "  max.concurrency: lots\n  inputs:"))
        result = run("validate", str(path), cwd=tmp_path)

        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 2
        assert any("task.comit.ms" in line for line in lines)
        assert any("task.max.concurrency" in line and "'lots'" in line for line in lines)

    def test_bad_override_value_is_a_config_error(self, job_yaml: Path, tmp_path: Path) -> None:
        result = run("validate", str(job_yaml), "--set", "task.max.concurrency=0", cwd=tmp_path)
        assert result.returncode == 2
        assert "task.max.concurrency" in result.stderr

    def test_missing_file(self, tmp_path: Path) -> None:
        result = run("validate", str(tmp_path / "absent.yaml"), cwd=tmp_path)
        assert result.returncode == 2
        assert "absent.yaml" in result.stderr
        assert "does not exist" in result.stderr

    def test_console_script_is_installed_and_works(self, job_yaml: Path, tmp_path: Path) -> None:
        result = run("validate", str(job_yaml), cwd=tmp_path, command=[str(console_script())])
        assert result.returncode == 0, result.stderr
        assert flat(yaml.safe_load(result.stdout))["job.name"] == "wordcount"

    def test_what_run_builds_before_it_starts_is_checked_too(self, tmp_path: Path) -> None:
        """Reporters, serdes, stores and the checkpoint manager: built by ``run`` before the
        job processes anything, so their problems are validate's too."""
        path = tmp_path / "built.yaml"
        path.write_text(
            VALID_JOB
            + "metrics.reporters: [log, nosuchreporters:Reporter]\n"
            + "serializers.registry.fancy.class: nosuchserdes:Fancy\n"
            + "stores.counts.key.serde: string\n"
            + "task.checkpoint.factory: stream\n"
        )
        result = run("validate", str(path), cwd=tmp_path)

        assert result.returncode == 2
        assert [line.split(" ")[0] for line in result.stderr.splitlines()] == [
            "metrics.reporters:",
            "serializers.registry.fancy.class:",
            "stores.counts.factory",
            "task.checkpoint.factory",
        ]
        assert "stores.counts.factory is required for store 'counts'" in result.stderr


class TestUsage:
    @pytest.mark.parametrize(
        "args",
        [
            (),
            ("frobnicate",),
            ("validate",),
            ("run",),
            ("run", "job.yaml", "--log-format", "xml"),
            ("validate", "job.yaml", "--set", "no-equals-sign"),
            ("plan",),
            ("plan", "job.yaml", "--format", "yaml"),
            ("checkpoint",),
            ("checkpoint", "show"),
            ("tail", "job.yaml"),
            ("tail", "job.yaml", "in", "--partition", "x"),
        ],
    )
    def test_usage_errors_exit_2(self, args: tuple[str, ...], tmp_path: Path) -> None:
        result = run(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert "usage: samzapy" in result.stderr

    def test_version(self, tmp_path: Path) -> None:
        result = run("--version", cwd=tmp_path)
        assert result.returncode == 0
        assert result.stdout.strip() == f"samzapy {samzapy.__version__}"

    def test_version_through_the_console_script(self, tmp_path: Path) -> None:
        result = run("--version", cwd=tmp_path, command=[str(console_script())])
        assert result.returncode == 0
        assert result.stdout.strip() == f"samzapy {samzapy.__version__}"

    def test_python_m_samzapy_cli(self, tmp_path: Path) -> None:
        result = run("--version", cwd=tmp_path, command=[sys.executable, "-m", "samzapy.cli"])
        assert result.returncode == 0
        assert result.stdout.startswith("samzapy ")


class TestRunConfigErrors:
    """``samzapy run`` reports configuration problems as one JSON log event and exits 2."""

    def json_events(self, stdout: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in stdout.splitlines() if line.strip()]

    def test_invalid_config_is_logged_as_json_and_exits_2(
        self, typo_yaml: Path, tmp_path: Path
    ) -> None:
        result = run("run", str(typo_yaml), cwd=tmp_path)

        assert result.returncode == 2
        assert result.stderr == ""
        events = self.json_events(result.stdout)
        assert [e["event"] for e in events] == ["config_invalid"]
        event = events[0]
        assert event["level"] == "error"
        assert event["exit_code"] == 2
        assert event["timestamp"].endswith("Z")
        assert any("did you mean 'task.commit.ms'" in p for p in event["problems"])

    def test_missing_file_exits_2(self, tmp_path: Path) -> None:
        result = run("run", str(tmp_path / "absent.yaml"), cwd=tmp_path)
        assert result.returncode == 2
        (event,) = self.json_events(result.stdout)
        assert event["event"] == "config_invalid"
        assert "absent.yaml" in event["problems"][0]

    def test_console_format_is_for_people(self, typo_yaml: Path, tmp_path: Path) -> None:
        result = run("run", str(typo_yaml), "--log-format", "console", cwd=tmp_path)
        assert result.returncode == 2
        assert "config_invalid" in result.stdout
        assert not result.stdout.lstrip().startswith("{")


def test_a_key_in_a_misspelt_namespace_is_warned_of_and_kept(tmp_path: Path) -> None:
    """metric.reporters is the job's own key (outside samzapy's namespaces), so it is not an
    error; but samzapy would never read it: validate says which key it looks like, once per
    misspelt namespace, on stderr (stdout stays the YAML), and exits 0."""
    job = tmp_path / "job.yaml"
    job.write_text(
        VALID_JOB + "metric.reporters: [log]\nmetric.x: 1\nTask.commit.ms: 5\napp.y: 2\n"
    )
    proc = run("validate", str(job), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "key_outside_namespaces" in line]
    assert len(warnings) == 2, proc.stderr
    assert "did_you_mean=metrics.reporters" in warnings[0]
    assert "did_you_mean=task.commit.ms" in warnings[1]
    assert flat(yaml.safe_load(proc.stdout))["metric.reporters"] == ["log"]
