"""`samzapy checkpoint show|set` on file checkpoints (no broker): what docs/deploy.md ("Moving
a job's position") says of tasks without a checkpoint, of a job moved while it runs, and of
checkpoints that change while ``set`` plans."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest
from test_run import events, job_yaml, read_jsonl, samzapy, started, write_partitions

from samzapy import SystemStreamPartition, TaskName
from samzapy.api.errors import CheckpointError
from samzapy.checkpoint.file import FileCheckpointManager
from samzapy.checkpoint.owner import JobIdentity
from samzapy.checkpoint.owner_file import CHECKPOINT_DIRECTORY, OWNER_FILE, claim_directory
from samzapy.checkpoint.ports import Checkpoint
from samzapy.cli.checkpoint_plan import plan_task
from samzapy.cli.checkpoint_tool import _Job, _write
from samzapy.config import load_config, resolve

P0 = TaskName("Partition 0")
IN_0 = SystemStreamPartition("files", "in", 0)


def read_checkpoint(tmp_path: Path, task: TaskName = P0) -> Checkpoint | None:
    return asyncio.run(FileCheckpointManager(tmp_path / "checkpoints").read_last(task))


async def write_checkpoint(tmp_path: Path, checkpoint: Checkpoint, task: TaskName = P0) -> None:
    manager = FileCheckpointManager(tmp_path / "checkpoints")
    await manager.start()
    await manager.write(task, checkpoint)


def test_show_leaves_out_the_tasks_without_a_checkpoint_and_names_them_on_stderr(
    tmp_path: Path,
) -> None:
    """ "Tasks without a checkpoint are left out (and named on stderr)": stdout stays the JSON
    lines of the others, and having none yet is no failure (exit 0)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}], 1: [{"n": 1}], 2: []})
    job = job_yaml(tmp_path, "Copy", **{"streams.out.partitions": 3})
    none_yet = samzapy("checkpoint", "show", str(job), cwd=tmp_path)
    assert (none_yet.returncode, none_yet.stdout) == (0, ""), none_yet.stderr
    assert none_yet.stderr == "no checkpoint yet: Partition 0, Partition 1, Partition 2\n"
    asyncio.run(write_checkpoint(tmp_path, Checkpoint({IN_0: "0"}, epoch=1)))
    one = samzapy("checkpoint", "show", str(job), cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert [json.loads(line)["task"] for line in one.stdout.splitlines()] == ["Partition 0"]
    assert one.stderr == "no checkpoint yet: Partition 1, Partition 2\n"


@pytest.mark.parametrize("before", ["a checkpoint", "no checkpoint"])
def test_a_file_job_moved_while_it_runs_stops_at_its_next_commit_and_the_move_stands(
    tmp_path: Path, before: str
) -> None:
    """docs/deploy.md: "with `file` checkpoints, a container still running fails at its next
    commit rather than write over the move: `checkpoint ... was written under epoch N`, exit
    1". With a checkpoint when it started (which it claimed under the next epoch), and with
    none, when it owns its task under epoch 1 but has written nothing ``set`` could read."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(3)]})
    once = job_yaml(tmp_path, "Copy")
    if before == "a checkpoint":
        assert samzapy("run", str(once), cwd=tmp_path).returncode == 0
        write_partitions(tmp_path / "data", "in", {0: [{"n": i} for i in range(4)]})
    job = job_yaml(
        tmp_path, "CountSignals", **{"systems.files.follow": True, "task.commit.ms": 600000}
    )
    ready_after = "1" if before == "a checkpoint" else "3"
    proc = started(job, tmp_path / "ready", {"SAMZAPY_TEST_READY_AFTER": ready_after})
    try:
        moved = samzapy("checkpoint", "set", str(job), "--to", "oldest", cwd=tmp_path)
        assert moved.returncode == 0, moved.stderr
        move = read_checkpoint(tmp_path)
        assert move is not None and move.offsets == {IN_0: "-1"}
        with open(tmp_path / "data" / "in" / "0.jsonl", "a") as partition:
            partition.write('{"n": 99}\n')  # processed, so the stop has a checkpoint to write
        out_file = tmp_path / "data" / "out" / "0.jsonl"
        deadline = time.monotonic() + 30
        while {"n": 99} not in read_jsonl(out_file):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the new message was never processed"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, out + err
    (failed,) = [e for e in events(out) if e["event"] == "job_failed"]
    assert f"was written under epoch {move.epoch}, after this container took" in failed["error"]
    # Not fenced by an owner (deploy.md): the job fails, no container_fenced.
    assert "container_fenced" not in [e["event"] for e in events(out)]
    assert read_checkpoint(tmp_path) == move


def test_set_writes_nothing_when_the_checkpoints_changed_while_it_planned(
    tmp_path: Path,
) -> None:
    """samzapy/cli/checkpoint_tool.py, step 5: "If the checkpoints read again there differ
    from those planned from, nothing is written" (something runs the job)."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}, {"n": 1}]})
    config = resolve(load_config(job_yaml(tmp_path, "Copy")))
    asyncio.run(write_checkpoint(tmp_path, Checkpoint({IN_0: "0"}, epoch=1)))

    async def plan_then_write() -> None:
        job = _Job(config)
        await job.start()
        try:
            found = await job.read_checkpoints()
        finally:
            await job.stop()
        moves = [plan_task(P0, found.get(P0), {IN_0: "-1"}, job.counts)]
        # Meanwhile a container commits.
        await write_checkpoint(tmp_path, Checkpoint({IN_0: "1"}, epoch=2))
        await _write(job, found, moves)

    with pytest.raises(
        CheckpointError,
        match=r"^the checkpoints of Partition 0 changed while this tool planned: something "
        r"runs the job; nothing was written$",
    ):
        asyncio.run(plan_then_write())
    assert read_checkpoint(tmp_path) == Checkpoint({IN_0: "1"}, epoch=2)


@pytest.mark.parametrize("command", [("show",), ("set", "--to", "oldest")], ids=" ".join)
def test_a_checkpoint_dir_that_is_a_file_is_exit_1_naming_it(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """docs/deploy.md: "checkpoints or streams it cannot reach [...], exit 1, saying what
    failed", as the job itself fails to start: not "no checkpoint yet" and exit 0."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}]})
    (tmp_path / "checkpoints").write_text("not a directory")
    job = job_yaml(tmp_path, "Copy")
    proc = samzapy("checkpoint", command[0], str(job), *command[1:], cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
    assert proc.stderr == (
        f"samzapy checkpoint {command[0]}: checkpoint directory {tmp_path / 'checkpoints'} is "
        "not a directory: move it away or set task.checkpoint.dir to a directory\n"
    )


def test_set_to_a_directory_says_it_is_one_and_writes_nothing(tmp_path: Path) -> None:
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}]})
    job = job_yaml(tmp_path, "Copy")
    (tmp_path / "moves").mkdir()
    refused = samzapy("checkpoint", "set", str(job), "--to", "moves", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "--to: 'moves' is a directory: give a file of JSON lines" in refused.stderr
    assert read_checkpoint(tmp_path) is None


def test_show_claims_no_directory_and_show_and_set_refuse_another_job_s(tmp_path: Path) -> None:
    """As for the checkpoint topic (docs/configuration.md, "Two jobs, one set of names"):
    ``show`` writes no owner file; both refuse a directory another job (here the same
    job.name, job.id 2) claimed, exit 1, and ``set`` writes nothing there."""
    write_partitions(tmp_path / "data", "in", {0: [{"n": 0}]})
    job = job_yaml(tmp_path, "Copy")
    asyncio.run(write_checkpoint(tmp_path, Checkpoint({IN_0: "0"}, epoch=1)))
    shown = samzapy("checkpoint", "show", str(job), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert not (tmp_path / "checkpoints" / OWNER_FILE).exists()
    directory = tmp_path / "checkpoints"
    claim_directory(directory, JobIdentity("clitest", "2"), CHECKPOINT_DIRECTORY)
    for command in (("show",), ("set", "--to", "oldest")):
        proc = samzapy("checkpoint", *command, str(job), cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        assert proc.stderr.startswith(
            f"samzapy checkpoint {command[0]}: task.checkpoint.dir: checkpoint directory "
            f"{directory} belongs to another job (job.name 'clitest' job.id '2')"
        )
        assert "this job (job.name 'clitest' job.id '1')" in proc.stderr
    assert read_checkpoint(tmp_path) == Checkpoint({IN_0: "0"}, epoch=1)
