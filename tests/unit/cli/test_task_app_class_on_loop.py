"""A TaskApplication whose task factory is a task class: `samzapy validate`, `plan` and `run`
check it as `task.class` is, without creating it, so that each instance is created in the job,
on its event loop, as a `task.class` job's are."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from samzapy.cli.problems import check_job

APP = textwrap.dedent(
    """
    import asyncio

    from samzapy import AsyncStreamTask, FileSystemDescriptor, TaskApplication

    FILES = FileSystemDescriptor("files")
    MADE = []


    class LoopTask(AsyncStreamTask):
        def __init__(self):
            self.loop = asyncio.get_running_loop()  # the loop it runs on, as task.class's
            MADE.append(self)

        async def process_async(self, envelope, collector, coordinator):
            pass


    class LoopApp(TaskApplication):
        def describe(self, app_desc):
            app_desc.with_input_stream(FILES.get_input_descriptor("in", "json"))
            app_desc.with_task_factory(LoopTask)
    """
)


def test_a_task_class_factory_is_checked_without_an_instance_made_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "loop_task_app.py").write_text(APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    job = tmp_path / "app.yaml"
    config = {
        "job.name": "looptest",
        "app.class": "loop_task_app:LoopApp",
        "task.checkpoint.factory": "file",
        "task.checkpoint.dir": str(tmp_path / "checkpoints"),
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "data"),
    }
    job.write_text(json.dumps(config))
    check = check_job(str(job), [])
    assert not check.errors, check.errors
    import loop_task_app

    assert check.task_class is loop_task_app.LoopTask
    assert loop_task_app.MADE == []  # nothing made before the job's loop runs
    factory = check.task_factory
    assert factory is not None

    async def make() -> None:
        task = factory()
        assert task.loop is asyncio.get_running_loop()

    asyncio.run(make())
    assert len(loop_task_app.MADE) == 1
