"""Tables across a failure and a restart, through TestRunner.of on inputs fed while the job
runs: a remote write that fails for good, and a local table crashed between a write and the
commit that would have covered it."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any, ClassVar

import pytest
from test_apps import Lambda

from samzapy import (
    KV,
    InMemoryTableDescriptor,
    KafkaSystemDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    RocksDbTableDescriptor,
    StreamApplicationDescriptor,
    TableRetryPolicy,
    TaskError,
)
from samzapy.checkpoint.memory import InMemoryCheckpointManager
from samzapy.testing import ManualClock, TestRunner

KAFKA = KafkaSystemDescriptor("kafka")
UPDATES = KAFKA.get_input_descriptor("updates", KVSerde("string", "json"))


class Running:
    """A job of ``describe`` over UPDATES (one partition), fed while it runs."""

    def __init__(self, describe: Any, config: dict[str, Any], **runner: Any) -> None:
        self.runner = TestRunner.of(Lambda(describe), config, **runner)
        self.runner.add_input_stream(UPDATES, {})
        if self.runner.broker.partition_count(UPDATES.physical_name) is None:
            self.runner.broker.create_stream(UPDATES.physical_name, 1)
        self.job = asyncio.ensure_future(self.runner.run_async(timeout=10))

    def send(self, *messages: KV) -> None:
        for kv in messages:
            self.runner.broker.append(UPDATES.physical_name, 0, kv.key, kv.value)

    def checkpoint(self) -> int | None:
        """The input offset the last checkpoint covers (None: no checkpoint yet)."""
        container = self.runner.container
        if container is None:
            return None
        found = InMemoryCheckpointManager.checkpoints_for(container.checkpoint_namespace)
        offsets = [int(o) for cp in found.values() for o in cp.offsets.values()]
        return max(offsets, default=None)

    async def until(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + 5
        while not done():
            if self.job.done():
                self.job.result()  # the job failed: its error
                raise AssertionError(f"the job finished before {what}")
            assert time.monotonic() < deadline, f"no {what} within 5 s"
            await asyncio.sleep(0.005)

    async def crash(self) -> None:
        """Cancel the job: no end-of-stream, no last commit (as kill -9 would)."""
        self.job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.job

    async def end(self) -> Any:
        self.runner.broker.end_stream(UPDATES.physical_name)
        return await self.job


class Service:
    """A remote key-value service, read and write function in one; every task's copy shares
    the class's state: the writes that landed, in order, and the keys whose writes fail."""

    landed: ClassVar[list[tuple[str, Any]]] = []
    failing: ClassVar[set[str]] = set()

    async def get_async(self, key: str) -> Any:
        return None

    async def put_async(self, key: str, value: Any) -> None:
        if key in Service.failing:
            await asyncio.sleep(0.02)  # the writes of the messages after it land meanwhile
            raise ConnectionError("service unavailable")
        Service.landed.append((key, value))

    async def delete_async(self, key: str) -> None:
        Service.landed.append((key, None))


def write_to_service(d: StreamApplicationDescriptor) -> None:
    service = Service()
    retried = TableRetryPolicy().with_fixed_backoff(timedelta(milliseconds=1))
    remote = (
        RemoteTableDescriptor("state")
        .with_read_function(service)
        .with_write_function(service)
        .with_write_retry_policy(retried.with_stop_after_attempts(2))
    )
    d.get_input_stream(UPDATES).send_to(d.get_table(remote))


async def test_a_remote_write_that_fails_for_good_fails_the_task_before_its_checkpoint() -> None:
    """docs/tables.md, Errors: "At run time the task fails (exit 1, nothing after the message
    checkpointed) naming the operator, task, partition and offset: a remote call that failed
    after its retries (a TableError naming the table, the call and the key)"; Guarantees: "A
    remote table's writes are the service's: at least once (a message replayed after a crash
    writes again)". Four messages in flight, commits every 5 ms: the write of offset 12 fails
    twice while those of 13.. land. The checkpoint stays before 12; the restart writes 12
    and, again, what landed after the checkpoint."""
    Service.landed, Service.failing = [], set()
    config = {"task.max.concurrency": 4, "task.commit.ms": 5}
    first = Running(write_to_service, config)
    first.send(*[KV(f"k{i}", i) for i in range(10)])
    await first.until(lambda: first.checkpoint() == 9, "checkpoint of offset 9")
    Service.failing = {"k12"}
    first.send(*[KV(f"k{i}", i) for i in range(10, 20)])
    with pytest.raises(TaskError) as failed:
        await first.job
    error, cause = failed.value, failed.value.__cause__
    assert cause is not None
    chain = f"{error} | {cause} | {cause.__cause__}"
    assert "Partition 0" in chain and "kafka.updates#0 at offset 12" in chain, chain
    assert "operator 'send_to_table-1' (send_to_table)" in chain, chain
    assert "table 'state': put of key 'k12' failed after 2 attempts" in chain, chain
    checkpointed = first.checkpoint()
    assert checkpointed is not None and 9 <= checkpointed < 12
    assert ("k13", 13) in Service.landed  # landed after the failed write began

    Service.failing = set()
    landed_first = list(Service.landed)
    again = Running(write_to_service, config, namespace=first.runner.namespace)
    await again.until(lambda: ("k19", 19) in Service.landed, "the last write")
    result = await again.end()
    (positions,) = result.checkpoints.values()
    assert list(positions.values()) == ["19"]
    replayed = Service.landed[len(landed_first) :]
    assert sorted(replayed, key=lambda kv: kv[1]) == [
        (f"k{i}", i) for i in range(checkpointed + 1, 20)
    ]
    assert ("k12", 12) not in landed_first
    assert landed_first.count(("k13", 13)) == replayed.count(("k13", 13)) == 1


class Probe:
    """A map function that notes, at init, what the table holds (after its restore and
    before any message), then passes the messages on."""

    at_init: ClassVar[list[dict[str, Any]]] = []

    def init(self, context: Any) -> None:
        table = context.get_table("profiles")
        Probe.at_init.append(table.get_all(["a", "b", "c"]))

    def __call__(self, message: KV) -> KV:
        return message


@pytest.mark.parametrize("kind", [InMemoryTableDescriptor, RocksDbTableDescriptor])
async def test_a_local_table_restored_after_a_crash_holds_what_its_checkpoint_covers(
    kind: Any,
) -> None:
    """docs/tables.md: "with_changelog_enabled(): a changelog <job.name>-<job.id>-table-
    <table_id> ..., so a restarted or moved task restores the table, exact after kill -9 as
    any store"; README, State: "changelog records written after the checkpoint are dropped,
    and the keys they touched are written back with their checkpointed values". A commit
    covers a=1 and b=2; then a=3, b deleted and c=4 reach the table and its changelog (no
    write buffer) and the job crashes before the next commit. The restarted task's table
    holds a=1 and b=2 when the task starts; the replay then writes the rest again."""
    Probe.at_init = []
    clock = ManualClock(1_000.0)
    processed: list[Any] = []

    def describe(d: StreamApplicationDescriptor) -> None:
        table = d.get_table(
            kind("profiles", KVSerde("string", "json"))
            .with_changelog_enabled()
            .with_config("write.buffer.max.bytes", 0)
        )
        stream = d.get_input_stream(UPDATES)
        stream.send_to(table)
        stream.map(Probe()).sink(lambda m, c, k: processed.append(m))

    config = {"task.commit.ms": 1000}
    first = Running(describe, config, clock=clock)
    first.send(KV("a", 1), KV("b", 2))
    await first.until(lambda: len(processed) == 2, "the first two messages")
    clock.advance(1.0)  # the only commit: the clock moves no further
    await first.until(lambda: first.checkpoint() == 1, "the checkpoint of offset 1")
    first.send(KV("a", 3), KV("b", None), KV("c", 4))
    await first.until(lambda: len(processed) == 5, "the next three messages")
    await first.crash()
    assert first.checkpoint() == 1
    changelog = f"test-job-{first.runner.namespace}-table-profiles"
    logged = [(k.decode(), v) for k, v in first.runner.broker.records(changelog, 0)]
    assert [k for k, _ in logged][-3:] == ["a", "b", "c"]  # past the checkpoint
    assert logged[-2][1] is None  # b's deletion

    processed.clear()
    again = Running(describe, config, clock=ManualClock(2_000.0), namespace=first.runner.namespace)
    await again.until(lambda: len(processed) == 3, "the replay of offsets 2 to 4")
    await again.end()
    assert Probe.at_init == [{}, {"a": 1, "b": 2}]
    assert processed == [KV("a", 3), KV("b", None), KV("c", 4)]
