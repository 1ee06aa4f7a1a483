"""Jobs over a real Kafka broker: outputs, restarts, kill -9, broker outages, offset rules.

Kafka inputs never end, so each job runs until the test has seen what it waits for and then
stops it (SIGTERM for `samzapy run`, request_stop in-process), as an operator would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

from samzapy import SerdeError
from samzapy.checkpoint.stream import checkpoint_stream_name
from samzapy.checkpoint.transactional import SUFFIX as TRANSACTIONAL_SUFFIX
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from kafka_jobs import Tag  # noqa: E402


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until the broker no longer lists it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        deadline = time.monotonic() + 30
        while topic in await admin.list_topics():
            assert time.monotonic() < deadline, f"{topic} still listed"
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, items: list[tuple[int, bytes | None, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=10)
    await producer.start()
    try:
        futures = [await producer.send(topic, v, key=k, partition=p) for p, k, v in items]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def read_all(bootstrap: str, topic: str, *, committed: bool = False) -> list[Any]:
    """Every record of ``topic``; ``committed``: only those of committed transactions (up
    to the partitions' last stable offsets)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        if not tps:
            return []
        consumer.assign(tps)
        # Explicit offsets: seek_to_beginning() is lazy, and a position() right after it can
        # report the end (seen with Kafka 4.3), which would make this read nothing.
        for tp, offset in (await consumer.beginning_offsets(tps)).items():
            consumer.seek(tp, offset)
        ends = await consumer.end_offsets(tps)
        records: list[Any] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                records.extend(batch)
        return records
    finally:
        await consumer.stop()


async def _end_total(bootstrap: str, topic: str, *, committed: bool = False) -> int:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        await consumer._client.force_metadata_update()
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in partitions]
        return sum((await consumer.end_offsets(tps)).values()) if tps else 0
    finally:
        await consumer.stop()


def output_count(bootstrap: str, topic: str) -> int:
    """How many records a topic holds (cheap: end offsets, nothing read)."""
    return asyncio.run(_end_total(bootstrap, topic))


def open_transaction(bootstrap: str, topic: str) -> bool:
    """Whether ``topic`` holds records of a transaction not yet committed or aborted (a
    high watermark past its partition's last stable offset; cheap: end offsets only)."""
    high = asyncio.run(_end_total(bootstrap, topic))
    return high > asyncio.run(_end_total(bootstrap, topic, committed=True))


def outputs(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in asyncio.run(read_all(bootstrap, topic))]


def wait_for(condition: Callable[[], bool], timeout: float, what: str, proc: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the job exited with {proc.returncode} while waiting for {what}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def job_file(tmp_path: Path, bootstrap: str, source: str, **extra: Any) -> Path:
    cfg = {
        "job.name": "kafka-it",
        "job.id": uuid.uuid4().hex[:8],
        "task.class": "kafka_jobs:Tag",
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 500,
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
        **extra,
    }
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(cfg))
    return path


RUNNING: list[subprocess.Popen[bytes]] = []


class Job:
    """`samzapy run` in the background, its JSON log in a file."""

    def __init__(
        self,
        job: Path,
        output: str,
        log: Path,
        delay_ms: float = 0,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        """``command``: what runs the job file instead of ``python -m samzapy run``."""
        self.log = log
        self.handle = open(log, "a")  # noqa: SIM115 - closed in stop() or wait()
        self.proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", "samzapy", "run"]), str(job)],
            cwd=ROOT,
            env={
                **os.environ,
                # The checkout's samzapy for a script too (``python -m`` finds it in cwd).
                "PYTHONPATH": os.pathsep.join((str(ROOT), str(HERE))),
                "SAMZAPY_TEST_OUTPUT": output,
                "SAMZAPY_TEST_DELAY_MS": str(delay_ms),
                **(env or {}),
            },
            stdout=self.handle,
            stderr=subprocess.STDOUT,
        )
        RUNNING.append(self.proc)
        self.asked_to_stop = False

    def ask_to_stop(self) -> None:
        """SIGTERM, not waited for: ``stop`` then waits for the process, sending nothing more
        (a second signal would force it out)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.asked_to_stop = True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None and not (sig == signal.SIGTERM and self.asked_to_stop):
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.handle.close()
        if sig == signal.SIGTERM and code == 0:  # a clean stop leaves nothing behind
            assert "was never retrieved" not in self.log.read_text(), self.log
        return code

    def wait(self, timeout: float = 180) -> int:
        """The exit code of a job that must finish by itself within ``timeout`` seconds."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the job did not finish by itself:\n{self.tail()}") from None
        self.handle.close()
        return code

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-15:])

    def events(self) -> list[dict[str, Any]]:
        """The log's JSON events so far: its complete lines (the last one may be half
        written while the process runs)."""
        text = self.log.read_text()
        lines = text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]
        return [json.loads(line) for line in lines if line.startswith("{")]


#: How long a run stopped with SIGSTOP stands still before kill_when looks at the broker: long
#: enough for the broker to finish what the run asked of it before it stopped (a write in
#: flight, or a commit whose markers the transaction coordinator writes by itself).
SETTLE_S = 0.5


def kill_when(
    run: Job, left: Callable[[], bool], what: str, timeout: float = 60, anyway: bool = False
) -> bool:
    """SIGKILL ``run`` at a moment when ``left`` holds of what it has left on the broker
    (``open_transaction``, say), by construction rather than by timing: ``left`` is looked at
    while the run stands still (SIGSTOP), once the broker has settled what the run asked of
    it, so what the look finds is what the kill leaves behind (a stopped producer can neither
    commit nor abort). When ``left`` does not hold, the run goes on (SIGCONT) for 50 ms and
    is looked at again, for at most ``timeout`` seconds (``what`` names the moment); then the
    test fails, or with ``anyway`` the run is killed all the same. Whether ``left`` held."""
    deadline = time.monotonic() + timeout
    while True:
        assert run.proc.poll() is None, f"the run exited before {what}:\n{run.tail()}"
        run.proc.send_signal(signal.SIGSTOP)
        time.sleep(SETTLE_S)
        if left():
            run.stop(signal.SIGKILL)
            return True
        if anyway and time.monotonic() >= deadline:
            run.stop(signal.SIGKILL)
            return False
        run.proc.send_signal(signal.SIGCONT)
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_job_output_then_restart_processes_nothing_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, 4))
    asyncio.run(create_topic(kafka_bootstrap, out, 4))
    items = [(i % 4, f"k{i}".encode(), f"v{i}".encode()) for i in range(2000)]
    asyncio.run(produce(kafka_bootstrap, source, items))
    job = job_file(tmp_path, kafka_bootstrap, source)
    first = Job(job, out, tmp_path / "first.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 2000, 90, "2000 outputs", first.proc)
    assert first.stop() == 0
    got = outputs(kafka_bootstrap, out)
    assert len(got) == 2000
    for p in range(4):
        values = [r["v"] for r in got if r["p"] == p]
        assert values == [v.decode() for q, _, v in items if q == p]
    # Restarted after a clean stop: it resumes after the final checkpoint and finds nothing.
    second = Job(job, out, tmp_path / "second.log")
    wait_for(
        lambda: any(e["event"] == "container_started" for e in second.events()),
        60,
        "the restart",
        second.proc,
    )
    time.sleep(2)
    assert second.stop() == 0
    assert len(outputs(kafka_bootstrap, out)) == 2000
    read = [e for e in second.events() if e["event"] == "checkpoint_read"]
    assert len(read) == 4


def checkpoint_documents(
    bootstrap: str, job: Path, *, exactly_once: bool = False
) -> dict[str, dict[str, Any]]:
    """The last record of each key of the job's checkpoint stream (a task's checkpoint, the
    job's owner record), by key; with ``exactly_once``, of the exactly-once checkpoints,
    read committed."""
    cfg = json.loads(job.read_text())
    topic = checkpoint_stream_name(cfg["job.name"], cfg["job.id"])
    if exactly_once:
        topic += TRANSACTIONAL_SUFFIX
    latest: dict[str, Any] = {}
    for record in asyncio.run(read_all(bootstrap, topic, committed=exactly_once)):
        latest[record.key.decode()] = json.loads(record.value) if record.value else None
    return {key: doc for key, doc in latest.items() if doc}


def checkpoint_entries(
    bootstrap: str, job: Path, *, exactly_once: bool = False
) -> list[dict[str, Any]]:
    """The offset entries (stream, partition, offset) of every task's last checkpoint; with
    ``exactly_once``, of the exactly-once checkpoints, read committed."""
    documents = checkpoint_documents(bootstrap, job, exactly_once=exactly_once)
    return [entry for doc in documents.values() for entry in doc.get("offsets", [])]


def checkpointed(
    bootstrap: str, job: Path, *, exactly_once: bool = False, stream: str | None = None
) -> dict[int, int]:
    """The last checkpointed (last processed) input offset of each partition (of ``stream``
    alone, when given); with ``exactly_once``, in the exactly-once checkpoints, read
    committed."""
    entries = checkpoint_entries(bootstrap, job, exactly_once=exactly_once)
    return {
        entry["partition"]: int(entry["offset"])
        for entry in entries
        if stream is None or entry["stream"] == stream
    }


def seconds_between(earlier: dict[str, Any], later: dict[str, Any]) -> float:
    """The time between two log events (``Job.events``), by their timestamps."""
    at = [datetime.fromisoformat(e["timestamp"]) for e in (earlier, later)]
    return (at[1] - at[0]).total_seconds()


@pytest.mark.timeout(400)
def test_kill_9_mid_run_loses_nothing_and_duplicates_only_after_the_checkpoint(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, 4))
    asyncio.run(create_topic(kafka_bootstrap, out, 4))
    n = 100_000
    asyncio.run(
        produce(kafka_bootstrap, source, [(i % 4, None, str(i).encode()) for i in range(n)])
    )
    job = job_file(tmp_path, kafka_bootstrap, source, **{"task.commit.ms": 200})
    first = Job(job, out, tmp_path / "first.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 30_000, 120, "30k outputs", first.proc)
    first.stop(signal.SIGKILL)
    at_kill = checkpointed(kafka_bootstrap, job)
    assert at_kill, "no checkpoint was written before the kill"
    second = Job(job, out, tmp_path / "second.log")

    def complete() -> bool:
        # Cheap first: every output is there only once the topic holds at least n records.
        if output_count(kafka_bootstrap, out) < n:
            return False
        return len({(r["p"], r["o"]) for r in outputs(kafka_bootstrap, out)}) >= n

    wait_for(complete, 180, "every input's output", second.proc)
    assert second.stop() == 0
    got = outputs(kafka_bootstrap, out)
    assert {int(r["v"]) for r in got} == set(range(n))
    dupes = [k for k, c in Counter((r["p"], r["o"]) for r in got).items() if c > 1]
    assert all(o > at_kill.get(p, -1) for p, o in dupes), "a duplicate precedes the checkpoint"


# test_outage_logs.py stops the broker at start-up and mid-run.


# -- in-process: offset rules, partition counts, deserialization ---------------------------------


def _config(bootstrap: str, source: str, **extra: Any) -> Any:
    cfg = {
        "job.name": "kafka-it",
        "job.id": extra.pop("job_id", uuid.uuid4().hex[:8]),
        "task.class": "kafka_jobs:Tag",
        "task.inputs": [f"kafka.{source}"],
        "task.checkpoint.factory": "kafka",
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        **extra,
    }
    return resolve(load_config(text=json.dumps(cfg)))


async def _run_until(
    container: SamzaContainer, done: Callable[[], bool], limit: float = 60
) -> None:
    job = asyncio.ensure_future(container.run())
    deadline = time.monotonic() + limit
    while not done():
        if job.done():
            job.result()
            raise AssertionError("the job ended early")
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
    container.request_stop("test done")
    await job


def _processed(container: SamzaContainer) -> int:
    return container.processed


async def test_upcoming_oldest_and_reset_offsets(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = name("in"), name("out")
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    await create_topic(kafka_bootstrap, source, 1)
    await create_topic(kafka_bootstrap, out, 1)
    await produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(5)])

    # upcoming (Samza's default for Kafka): what was there before the start is skipped.
    job_id = uuid.uuid4().hex[:8]
    upcoming = SamzaContainer(_config(kafka_bootstrap, source, job_id=job_id), task_factory=Tag)
    job = asyncio.ensure_future(upcoming.run())
    while not upcoming.started.is_set():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    await produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(3)])
    while _processed(upcoming) < 3:
        assert not job.done()
        await asyncio.sleep(0.05)
    upcoming.request_stop("test done")
    await job
    assert [
        r["v"] for r in (json.loads(x.value) for x in await read_all(kafka_bootstrap, out))
    ] == ["new0", "new1", "new2"]
    # The checkpoint wins over any default on restart: nothing is read again.
    again = SamzaContainer(
        _config(
            kafka_bootstrap,
            source,
            job_id=job_id,
            **{"systems.kafka.default.stream.samza.offset.default": "oldest"},
        ),
        task_factory=Tag,
    )
    await _run_until(again, again.started.is_set, 30)
    assert _processed(again) == 0
    # reset.offset ignores the checkpoint: oldest then means everything again.
    reset = SamzaContainer(
        _config(
            kafka_bootstrap,
            source,
            job_id=job_id,
            **{
                "systems.kafka.default.stream.samza.offset.default": "oldest",
                f"streams.{source}.samza.reset.offset": True,
            },
        ),
        task_factory=Tag,
    )
    await _run_until(reset, lambda: _processed(reset) >= 8)
    assert _processed(reset) == 8


async def test_changed_partition_count_stops_the_job(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = name("in"), name("out")
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    await create_topic(kafka_bootstrap, source, 2)
    await create_topic(kafka_bootstrap, out, 3)
    await produce(kafka_bootstrap, source, [(i % 2, None, b"x") for i in range(4)])
    job_id = uuid.uuid4().hex[:8]
    extra = {"job_id": job_id, "systems.kafka.default.stream.samza.offset.default": "oldest"}
    first = SamzaContainer(_config(kafka_bootstrap, source, **extra), task_factory=Tag)
    await _run_until(first, lambda: _processed(first) >= 4)
    await add_partitions(kafka_bootstrap, source, 3)
    second = SamzaContainer(_config(kafka_bootstrap, source, **extra), task_factory=Tag)
    with pytest.raises(Exception, match=rf"input kafka.{source} had 2 partitions .* has 3 now"):
        await second.run()


async def test_undeserializable_message_fails_or_is_dropped(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, out = name("in"), name("out")
    monkeypatch.setenv("SAMZAPY_TEST_OUTPUT", out)
    await create_topic(kafka_bootstrap, source, 1)
    await create_topic(kafka_bootstrap, out, 1)
    values = [b'{"n": 0}', b'{"n": 1}', b"not json", b'{"n": 3}']
    await produce(kafka_bootstrap, source, [(0, None, v) for v in values])
    common = {
        f"streams.{source}.samza.msg.serde": "json",
        "systems.kafka.default.stream.samza.offset.default": "oldest",
    }
    failing = SamzaContainer(_config(kafka_bootstrap, source, **common), task_factory=Tag)
    with pytest.raises(SerdeError, match=rf"offset 2 of kafka.{source}#0"):
        await failing.run()
    dropping = SamzaContainer(
        _config(kafka_bootstrap, source, **common, **{"task.drop.deserialization.errors": True}),
        task_factory=Tag,
    )
    await _run_until(dropping, lambda: _processed(dropping) >= 3)
    assert _processed(dropping) == 3
