"""Releasing some tasks of a running container (an incremental rebalance moved them): they
are drained, closed, committed and their stores closed clean, while the others go on. And
giving them all up (the member was fenced, its lease lost): nothing claimed, processed or
written from then on."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from leases import SwitchedLease
from structlog.testing import capture_logs

from samzapy import InitableTask, RequestScope, StreamTask, TaskName
from samzapy.api.errors import TaskFencedError
from samzapy.checkpoint.ports import Checkpoint
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.coordinator.job_runner import JobRunner
from samzapy.coordinator.lease import Lease
from samzapy.storage.task_stores import CLEAN_MARKER
from samzapy.system.inmemory import InMemoryBroker


class Tally(InitableTask, StreamTask):
    """Counts each partition's messages, and each word in the store ``counts``."""

    seen: ClassVar[Counter[int]] = Counter()

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Tally.seen[envelope.system_stream_partition.partition] += 1
        self.store.put(envelope.message, (self.store.get(envelope.message) or 0) + 1)


def config(tmp_path: Path, namespace: str, extra: str = "") -> Any:
    text = f"""
job.name: release
job.id: '{namespace}'
task.class: {__name__}:Tally
task.inputs: [mem.in]
task.commit.ms: -1
task.checkpoint.factory: file
task.checkpoint.dir: {tmp_path / "checkpoints"}
job.logged.store.base.dir: {tmp_path / "state"}
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
stores.counts.factory: rocksdb
stores.counts.key.serde: string
stores.counts.msg.serde: long
stores.counts.changelog: mem.counts-changelog
{extra}"""
    return resolve(load_config(text=text, env={}))


def checkpointed(tmp_path: Path, task: int) -> str | None:
    path = tmp_path / "checkpoints" / f"Partition_{task}.json"
    if not path.exists():
        return None
    offsets = json.loads(path.read_text())["offsets"]
    return str(offsets[0]["offset"]) if offsets else None


def words(namespace: str, partitions: int) -> InMemoryBroker:
    """The memory system's stream ``in``: ten words on each partition (three distinct)."""
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", partitions)
    for p in range(partitions):
        for i in range(10):
            broker.append("in", p, None, f"w{i % 3}")
    return broker


async def until(condition: Any, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


async def test_released_tasks_commit_and_stop_while_the_others_go_on(tmp_path: Path) -> None:
    namespace = f"release-{uuid.uuid4().hex[:8]}"
    broker = words(namespace, 4)
    Tally.seen = Counter()
    container = SamzaContainer(config(tmp_path, namespace))
    run = asyncio.ensure_future(container.run())
    try:
        await until(lambda: container.processed == 40, "the first 40 messages")
        groups = set(container.metrics.snapshot())
        assert "task.Partition 1" in groups and "partition.mem.in#1" in groups

        released = await container.release([TaskName("Partition 1"), TaskName("Partition 3")])
        assert released
        assert [str(t.name) for t in container.tasks] == ["Partition 0", "Partition 2"]
        # Their final checkpoints cover everything they processed, and their stores were
        # closed clean at it (a restart here keeps them).
        assert [checkpointed(tmp_path, k) for k in range(4)] == [None, "9", None, "9"]
        stores = tmp_path / "state" / "release" / "counts"
        assert sorted(p.parent.name for p in stores.glob(f"*/{CLEAN_MARKER}")) == [
            "Partition_1",
            "Partition_3",
        ]
        groups = set(container.metrics.snapshot())
        assert "task.Partition 1" not in groups and "partition.mem.in#1" not in groups
        assert "task.Partition 0" in groups

        # The others go on; the released tasks' partitions are read no more.
        for p in range(4):
            for _ in range(5):
                broker.append("in", p, None, "later")
        await until(lambda: Tally.seen[0] == Tally.seen[2] == 15, "the kept tasks' new input")
        await asyncio.sleep(0.05)
        assert [Tally.seen[k] for k in range(4)] == [15, 10, 15, 10]
        assert container.processed == 50  # released tasks' counts are kept: it only grows
        assert not run.done()
    finally:
        container.request_stop("test done")
        await run
    assert [checkpointed(tmp_path, k) for k in range(4)] == ["14", "9", "14", "9"]


async def test_a_stopping_container_releases_nothing(tmp_path: Path) -> None:
    namespace = f"release-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    broker.append("in", 0, None, "w")
    container = SamzaContainer(config(tmp_path, namespace))
    run = asyncio.ensure_future(container.run())
    await container.started.wait()
    container.request_stop("stopping")
    assert not await container.release([TaskName("Partition 0")])
    await run
    # The stop committed it, as every other task.
    assert (tmp_path / "checkpoints" / "Partition_0.json").exists()


# -- a container that gives its tasks up (fenced, its lease lost) -------------------------------


class Member:
    """What ``JobRunner._take`` uses of the group membership."""

    member_id = "member-1"
    heartbeat_interval_s = 0.25

    def released(self, tasks: Any, at: float) -> None:
        raise AssertionError("nothing to release")

    def rejoin(self, reason: str = "") -> None:
        raise AssertionError(f"nothing to rejoin for, asked for: {reason}")


def _checkpoints(tmp_path: Path) -> list[str]:
    return [p.read_text() for p in sorted((tmp_path / "checkpoints").glob("*.json"))]


@pytest.mark.parametrize(
    "fenced_after_s", [0.0, 0.3], ids=["before it claims", "in the fence wait"]
)
async def test_a_member_fenced_while_its_tasks_start_claims_processes_and_writes_nothing(
    tmp_path: Path, fenced_after_s: float
) -> None:
    """``member_fenced`` during a static member's first start-up (reading checkpoints, the
    fence wait, a restore): the start stops where it is, the tasks are dropped as fenced,
    and nothing is claimed, processed, committed or written to a changelog under the lease,
    which stays broken."""
    namespace = f"fenced-{uuid.uuid4().hex[:8]}"
    broker = words(namespace, 2)
    first = SamzaContainer(config(tmp_path, namespace))  # the predecessor
    ran = asyncio.ensure_future(first.run())
    await until(lambda: first.processed == 20, "the predecessor's messages")
    first.request_stop("the predecessor is done")
    await ran
    before = _checkpoints(tmp_path)
    changelog = [len(broker.records("counts-changelog", p)) for p in range(2)]
    assert len(before) == 2 and all(changelog)

    runner = JobRunner(config(tmp_path, namespace, "job.container.id: '0'\n"))
    lease = runner._lease = Lease(10_000, on_lost=runner._shares.abandon)
    asyncio.get_running_loop().call_later(fenced_after_s, runner._member_fenced)
    with capture_logs() as logs:
        await asyncio.wait_for(runner._take(Member(), [0, 1], {}), 20)  # type: ignore[arg-type]
        for p in range(2):  # what arrives after the fence must not be processed
            broker.append("in", p, None, "late")
        await asyncio.sleep(0.3)
        (share,) = runner._shares.shares
        assert share.run.done() and isinstance(share.run.exception(), TaskFencedError)
        runner._check_shares()  # dropped as fenced, not a failure of the job
    events = [e["event"] for e in logs]
    assert "member_fenced" in events and "task_fenced" in events
    assert not {"store_restored", "checkpoint_written"} & set(events), events
    assert share.container.processed == 0
    assert _checkpoints(tmp_path) == before
    assert [len(broker.records("counts-changelog", p)) for p in range(2)] == changelog
    lease.renew()
    assert not lease.valid(), "a fenced member's lease stays broken"


async def test_a_container_that_gave_its_tasks_up_writes_nothing_while_the_group_lease_holds(
    tmp_path: Path,
) -> None:
    """Abandoned (fenced, or its lease lost), a container stays fenced even once the group's
    lease is renewed for the next assignment: a share still closing writes no checkpoint and
    its producers hand nothing over."""
    namespace = f"gave-up-{uuid.uuid4().hex[:8]}"
    words(namespace, 2)
    container = SamzaContainer(config(tmp_path, namespace), lease=SwitchedLease())
    ran = asyncio.ensure_future(container.run())
    await until(lambda: container.processed == 20, "the messages")
    container.abandon("the group fenced this member")
    with pytest.raises(TaskFencedError):
        await ran
    assert _checkpoints(tmp_path) == [], "nothing committed"
    writer = container._checkpoints.writers[0]  # type: ignore[union-attr]
    with pytest.raises(TaskFencedError, match="may belong to another container"):
        await writer.write(Checkpoint(offsets={}))


async def test_a_held_lease_holds_the_tasks_and_their_commits_until_it_is_settled(
    tmp_path: Path,
) -> None:
    """While the group lease is held the tasks take no new message and a commit waits; once
    it resumes they go on and the commit is written, as if nothing happened."""
    namespace = f"held-{uuid.uuid4().hex[:8]}"
    broker = words(namespace, 2)
    lease = SwitchedLease()
    container = SamzaContainer(config(tmp_path, namespace), lease=lease)
    ran = asyncio.ensure_future(container.run())
    await until(lambda: container.processed == 20, "the messages")
    lease.hold()
    for p in range(2):
        for _ in range(5):
            broker.append("in", p, None, "late")
    container.run_loop.request_commit(TaskName("Partition 0"), RequestScope.CURRENT_TASK)  # type: ignore[union-attr]
    await asyncio.sleep(0.3)
    assert container.processed == 20, "no message taken while the lease is held"
    assert checkpointed(tmp_path, 0) is None, "no checkpoint written while it is held"
    lease.resume()
    await until(lambda: container.processed == 30, "the late messages")
    await until(lambda: checkpointed(tmp_path, 0) is not None, "the commit")
    container.request_stop("done")
    await ran
    assert [checkpointed(tmp_path, k) for k in range(2)] == ["14", "14"]
