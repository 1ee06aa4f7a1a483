"""What a job's own code prints never mixes with a command's output on stdout.

docs/configuration.md: "`samzapy validate` prints every key with its effective value [...]
as YAML" (docs/api.md: `samzapy validate pageview-app.yaml > /dev/null`); docs/api.md (samzapy
plan): "`--format json` prints the same as one JSON document and nothing else on stdout";
docs/deploy.md (samzapy tail): "one JSON object per line on stdout"; docs/deploy.md (samzapy
checkpoint): "`samzapy checkpoint show JOB_YAML` prints each task's last checkpoint as one
JSON object per line on stdout". A debugging print left in an application's ``describe``, a
task module or a serde goes to stderr instead.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from test_run import job_yaml, samzapy, write_partitions
from test_run_apps import app_yaml

from samzapy import SystemStreamPartition, TaskName
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.ports import Checkpoint

LOUD_MODULE = """\
import json

from samzapy import StreamTask

print("importing the task module")


class Copy(StreamTask):
    def process(self, envelope, collector, coordinator):
        pass


class LoudJson:
    def to_bytes(self, obj):
        return json.dumps(obj).encode()

    def from_bytes(self, data):
        print("decoding a message")
        return json.loads(data)
"""


@pytest.fixture
def jobs(tmp_path: Path) -> dict[str, Path]:
    """An application that prints in describe (with a checkpoint to show), and a task job
    whose task module prints as it imports and whose input's serde prints as it decodes."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}, {"n": 1}]})
    (tmp_path / "loud.py").write_text(LOUD_MODULE)
    task = job_yaml(
        tmp_path,
        "Copy",
        **{
            "task.class": "loud:Copy",
            "serializers.registry.loud.class": "loud:LoudJson",
            "streams.in.samza.system": "files",
            "streams.in.samza.msg.serde": "loud",
        },
    )

    async def checkpointed() -> None:
        manager = FileCheckpointManager(tmp_path / "checkpoints")
        await manager.start()
        ssp = SystemStreamPartition("files", "in", 0)
        await manager.write(TaskName("Partition 0"), Checkpoint({ssp: "1"}, epoch=1))

    asyncio.run(checkpointed())
    return {"app": app_yaml(tmp_path, "ChattyCountByKey"), "task": task}


def test_validate_prints_only_the_yaml(jobs: dict[str, Path]) -> None:
    for kind, printed in (("app", "describing the graph"), ("task", "importing the task module")):
        proc = samzapy("validate", str(jobs[kind]), cwd=jobs[kind].parent)
        assert proc.returncode == 0, proc.stderr
        assert isinstance(yaml.safe_load(proc.stdout), dict)
        assert printed not in proc.stdout
        assert printed in proc.stderr


@pytest.mark.parametrize(
    ("kind", "command", "printed"),
    [
        ("app", ("tail", "{job}", "in"), "describing the graph"),
        ("task", ("tail", "{job}", "in"), "decoding a message"),
        ("app", ("checkpoint", "show", "{job}"), "describing the graph"),
        ("app", ("checkpoint", "set", "{job}", "--to", "oldest", "--dry-run"), None),
        ("app", ("plan", "{job}", "--format", "json"), "describing the graph"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else str(value),
)
def test_json_commands_print_only_their_lines(
    jobs: dict[str, Path], kind: str, command: tuple[str, ...], printed: str | None
) -> None:
    job = jobs[kind]
    proc = samzapy(*(arg.format(job=job) for arg in command), cwd=job.parent)
    assert proc.returncode == 0, proc.stderr
    assert "describing the graph" in proc.stderr or kind != "app"
    if printed is None:  # set's lines are text: the print is not among them
        assert "describing the graph" not in proc.stdout
        assert proc.stdout.splitlines()[-1].startswith("dry run: ")
        return
    assert printed in proc.stderr
    if command[0] == "plan":
        assert json.loads(proc.stdout)["app"] == "apps:ChattyCountByKey"
    else:
        assert [json.loads(line) for line in proc.stdout.splitlines()]
