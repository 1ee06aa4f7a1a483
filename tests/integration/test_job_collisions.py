"""Two jobs whose (job.name, job.id) map to one checkpoint topic, on the real broker: the
topic's owner record lets the first run and refuses the second before it reads or writes a
checkpoint."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from kafka_jobs import Tag  # noqa: E402
from test_checkpoint_tool import tool  # noqa: E402
from test_idle_member import assigned  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    _config,
    _run_until,
    checkpoint_entries,
    create_topic,
    job_file,
    name,
    output_count,
    produce,
    wait_for,
)

from samzapy import SystemStreamPartition, TaskName  # noqa: E402
from samzapy.api.errors import JobCollisionError  # noqa: E402
from samzapy.checkpoint.ports import Checkpoint  # noqa: E402
from samzapy.checkpoint.registry import checkpoint_manager  # noqa: E402
from samzapy.checkpoint.stream import StreamCheckpointManager, checkpoint_stream_name  # noqa: E402
from samzapy.config import ResolvedConfig  # noqa: E402
from samzapy.container import SamzaContainer  # noqa: E402
from samzapy.container.checkpoints import ContainerCheckpoints  # noqa: E402
from samzapy.container.systems import system_factory  # noqa: E402

pytestmark = pytest.mark.timeout(120)

TASK = TaskName.for_partition(0)


def colliding() -> tuple[dict[str, str], dict[str, str]]:
    """Job ``<x>_b`` id ``1`` and job ``<x>`` id ``b_1``: one checkpoint topic."""
    base = f"collide{uuid.uuid4().hex[:6]}"
    first, second = {"job.name": f"{base}_b", "job.id": "1"}, {"job.name": base, "job.id": "b_1"}
    assert checkpoint_stream_name(*first.values()) == checkpoint_stream_name(*second.values())
    return first, second


async def start(cfg: ResolvedConfig) -> StreamCheckpointManager:
    manager = checkpoint_manager(cfg, {"kafka": system_factory(cfg, "kafka")}, "test")
    assert isinstance(manager, StreamCheckpointManager)
    manager.register(TASK)
    await manager.start()
    return manager


async def test_the_second_job_on_a_topic_is_refused_and_an_older_topic_is_adopted(
    kafka_bootstrap: str,
) -> None:
    first, second = colliding()
    a = _config(kafka_bootstrap, "in", job_id=first["job.id"], **{"job.name": first["job.name"]})
    b = _config(kafka_bootstrap, "in", job_id=second["job.id"], **{"job.name": second["job.name"]})
    checkpoint = Checkpoint({SystemStreamPartition("kafka", "in", 0): "41"})
    # The topic as an older samzapy left it: a checkpoint, no owner record.
    stream = checkpoint_stream_name(a.job.name, a.job.id)
    older = StreamCheckpointManager(system_factory(a, "kafka"), stream)
    await older.start()
    await older.write(TASK, checkpoint)
    await older.stop()
    # The first job to start adopts it, and reads its checkpoint.
    manager = await start(a)
    assert await manager.read_last(TASK) == checkpoint
    await manager.stop()
    with pytest.raises(JobCollisionError) as caught:
        await start(b)
    for text in (f"'{a.job.name}'", f"'{b.job.name}'", "'b_1'", f"kafka.{stream}"):
        assert text in str(caught.value)
    again = await start(a)
    assert await again.read_last(TASK) == checkpoint
    await again.stop()


def test_samzapy_run_of_the_colliding_job_exits_1_and_leaves_the_first_ones_checkpoints(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = colliding()
    source, out = name("collide-in"), name("collide-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, None, b"x") for i in range(20)]))
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    owner = job_file(tmp_path, kafka_bootstrap, source, **first)
    oldest = {"systems.kafka.default.stream.samza.offset.default": "oldest"}
    container = SamzaContainer(
        _config(kafka_bootstrap, source, **_ids(first), **oldest), task_factory=Tag
    )
    asyncio.run(_run_until(container, lambda: container.processed >= 20))
    before = checkpoint_entries(kafka_bootstrap, owner)
    assert {e["partition"]: e["offset"] for e in before} == {0: "9", 1: "9"}
    written = output_count(kafka_bootstrap, out)

    refused = job_file(tmp_path, kafka_bootstrap, source, **second)
    run = Job(refused, out, tmp_path / "second.log")
    assert run.wait(60) == 1, run.tail()
    failed = [e for e in run.events() if e["event"] == "job_failed"]
    assert failed, run.tail()
    message = failed[0]["error"]
    assert f"job.name '{first['job.name']}' job.id '1'" in message
    assert f"job.name '{second['job.name']}' job.id 'b_1'" in message
    assert "change job.name or job.id" in message
    assert not [e for e in run.events() if e["event"] in ("checkpoint_read", "container_started")]
    assert checkpoint_entries(kafka_bootstrap, owner) == before
    assert output_count(kafka_bootstrap, out) == written
    # `samzapy checkpoint show` of the colliding job refuses too (it shows the other's
    # checkpoints as no one's), and of the owner shows its own.
    shown = tool("show", str(refused))
    assert shown.returncode == 1 and "belongs to another job" in shown.stderr, shown.stderr
    assert tool("show", str(owner)).stdout.count('"task"') == 2
    assert checkpoint_entries(kafka_bootstrap, owner) == before


def _ids(job: dict[str, str]) -> dict[str, str]:
    """``_config``'s keywords for ``job``."""
    return {"job_id": job["job.id"], "job.name": job["job.name"]}


@pytest.mark.timeout(120)
def test_a_job_whose_consumer_group_is_another_running_jobs_is_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    base = f"collide{uuid.uuid4().hex[:6]}"
    first, second = {"job.name": f"{base}.b", "job.id": "1"}, {"job.name": base, "job.id": "b.1"}
    group = f"samzapy.{base}.b.1"  # both jobs'
    out = name("collide-out")
    jobs = []
    for n, ids in enumerate((first, second)):
        source = name(f"collide-group{n}")
        asyncio.run(create_topic(kafka_bootstrap, source, 2))
        # File checkpoints: these two jobs' checkpoint topics differ only by '.' against
        # '_', which the broker refuses; the group is the one thing they share.
        checkpoints = {
            "task.checkpoint.factory": "file",
            "task.checkpoint.dir": str(tmp_path / str(n)),
        }
        jobs.append(job_file(tmp_path, kafka_bootstrap, source, **ids, **checkpoints))
    running = Job(jobs[0], out, tmp_path / "first.log")
    both = ["Partition 0", "Partition 1"]
    wait_for(lambda: assigned(running) == both, 60, "the first job's tasks", running.proc)

    refused = Job(jobs[1], out, tmp_path / "second.log")
    assert refused.wait(60) == 1, refused.tail()
    failed = [e for e in refused.events() if e["event"] == "job_failed"]
    assert failed and failed[0]["error_type"] == "JobCollisionError", refused.tail()
    for text in (repr(group), f"job.name '{base}.b' job.id '1'", f"job.name '{base}' job.id 'b.1'"):
        assert text in failed[0]["error"]
    assert not [e for e in refused.events() if e["event"] == "container_started"]
    # The first job kept both its tasks all along.
    assert running.proc.poll() is None
    assert assigned(running) == both
    assert [e for e in running.events() if e["event"] == "group_members_refused"]
    assert running.stop() == 0


async def test_under_exactly_once_the_colliding_job_is_refused_and_reads_nothing(
    kafka_bootstrap: str,
) -> None:
    first, second = colliding()
    exactly_once = {"task.processing.guarantee": "exactly-once"}
    configs = [
        _config(kafka_bootstrap, "in", **_ids(job), **exactly_once) for job in (first, second)
    ]
    checkpoint = Checkpoint({SystemStreamPartition("kafka", "in", 0): "3"})

    def checkpoints(n: int) -> ContainerCheckpoints:
        factories = {"kafka": system_factory(configs[n], "kafka")}
        return ContainerCheckpoints(configs[n], factories, str(n), task_count=1)

    running = checkpoints(0)
    try:
        writer = running.writer(TASK, (await running.start([TASK])).get(TASK))
        assert await writer.write(checkpoint)  # one transaction, committed
    finally:
        await running.stop()
    # The second job would read the first one's checkpoint from the same -txn topic.
    refused = checkpoints(1)
    with pytest.raises(JobCollisionError, match="belongs to another job"):
        await refused.start([TASK])
    await refused.stop()
    again = checkpoints(0)
    try:
        found = await again.start([TASK])
        assert found[TASK].offsets == checkpoint.offsets
    finally:
        await again.stop()
