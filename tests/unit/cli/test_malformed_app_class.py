"""A malformed ``app.class`` is one problem of `samzapy validate`, `plan` and `run`, said once,
as a malformed ``task.class`` is: not once by the application's loading and again, in other
words, by the file's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.cli.problems import check_job


@pytest.mark.parametrize("value", ["pageviews", "pageviews:", ":Counts", "a:b:c"])
def test_a_malformed_app_class_is_reported_once(tmp_path: Path, value: str) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(f"job.name: app\napp.class: '{value}'\n")
    problems = [p for p in check_job(str(job), []).problems if "app.class" in p]
    assert problems == [f"app.class must be 'module:Class' or 'dotted.path.Class', got {value!r}"]


def test_a_malformed_task_class_is_reported_once_too(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("job.name: task\ntask.class: pageviews\ntask.inputs: [files.in]\n")
    problems = [p for p in check_job(str(job), []).problems if "task.class" in p]
    assert problems == ["task.class must be 'module:Class' or 'dotted.path.Class', got 'pageviews'"]


def test_nor_does_it_ask_for_the_inputs_the_application_would_have_given(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("job.name: app\napp.class: pageviews\n")
    assert check_job(str(job), []).problems == [
        "app.class must be 'module:Class' or 'dotted.path.Class', got 'pageviews'"
    ]
