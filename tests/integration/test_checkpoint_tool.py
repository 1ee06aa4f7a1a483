"""`samzapy checkpoint show|set` against the real broker: reading a job's checkpoints and
moving its input offsets, and what a restart does after the move.

The tool always runs as the real command (a subprocess); the jobs run through `samzapy
run` where the coordinator matters (a live consumer group, the restart an operator does)
and in-process otherwise, which is faster.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from kafka_jobs import Tag  # noqa: E402
from state_jobs import WordCount  # noqa: E402
from test_kafka_jobs import (  # noqa: E402
    Job,
    _run_until,
    create_topic,
    name,
    output_count,
    outputs,
    produce,
    read_all,
    wait_for,
)
from test_kafka_jobs import job_file as kafka_job_file  # noqa: E402
from test_state_jobs import changelog_state  # noqa: E402

from samzapy import SystemStream, SystemStreamPartition, TaskName  # noqa: E402
from samzapy.checkpoint.file import FileCheckpointManager, task_file_name  # noqa: E402
from samzapy.checkpoint.ports import Checkpoint  # noqa: E402
from samzapy.checkpoint.stream import checkpoint_stream_name  # noqa: E402
from samzapy.config import load_config, resolve  # noqa: E402
from samzapy.container import SamzaContainer  # noqa: E402

pytestmark = pytest.mark.timeout(240)


def job_file(tmp_path: Path, bootstrap: str, inputs: list[str], **extra: Any) -> Path:
    """test_kafka_jobs' job (kafka_jobs:Tag, Kafka checkpoints) reading ``inputs``."""
    return kafka_job_file(
        tmp_path,
        bootstrap,
        inputs[0],
        **{
            "job.name": "checkpoint-tool-it",
            "task.inputs": [f"kafka.{s}" for s in inputs],
            **extra,
        },
    )


def tool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`samzapy checkpoint ARGS`, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "samzapy", "checkpoint", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def show(job: Path) -> dict[str, dict[str, Any]]:
    """`checkpoint show`'s lines, by task."""
    done = tool("show", str(job))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {line["task"]: line for line in lines}


def offsets(job: Path) -> dict[str, str]:
    """Every task's checkpointed offsets, by partition (``kafka.in#0``)."""
    return {ssp: o for line in show(job).values() for ssp, o in line["offsets"].items()}


def checkpoint_records(bootstrap: str, job: Path, suffix: str = "") -> int:
    """How many records the job's checkpoint stream holds: a write adds one."""
    cfg = json.loads(job.read_text())
    return output_count(bootstrap, checkpoint_stream_name(cfg["job.name"], cfg["job.id"]) + suffix)


def run_in_process(
    job: Path, factory: Callable[[], Any], done: Callable[[SamzaContainer], bool]
) -> SamzaContainer:
    """Run the job in this process until ``done(container)``, then stop it (it commits)."""
    container = SamzaContainer(resolve(load_config(job)), task_factory=factory)
    asyncio.run(_run_until(container, lambda: done(container), 60))
    return container


def tag_to(out: str) -> Callable[[], Tag]:
    def make() -> Tag:
        task = Tag()
        task.out = SystemStream("kafka", out)
        return task

    return make


def processed(n: int) -> Callable[[SamzaContainer], bool]:
    return lambda container: container.processed >= n


# -- the operator's round trip ----------------------------------------------------------------


def test_show_then_set_oldest_then_a_restart_processes_everything_again(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("ck-in"), name("ck-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(create_topic(kafka_bootstrap, out, 2))
    items = [(i % 2, None, f"v{i}".encode()) for i in range(100)]
    asyncio.run(produce(kafka_bootstrap, source, items))
    job_id = uuid.uuid4().hex[:8]
    first = job_file(tmp_path, kafka_bootstrap, [source], **{"job.id": job_id})
    run = Job(first, out, tmp_path / "first.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 100, 90, "100 outputs", run.proc)
    assert run.stop() == 0

    lines = show(first)
    assert {t: line["offsets"] for t, line in lines.items()} == {
        "Partition 0": {f"kafka.{source}#0": "49"},
        "Partition 1": {f"kafka.{source}#1": "49"},
    }
    epochs = {t: line["epoch"] for t, line in lines.items()}
    assert all(isinstance(e, int) and e >= 1 for e in epochs.values())
    [topic_id] = {line["topic_ids"][f"kafka.{source}"] for line in lines.values()}

    # The restart's offset default is upcoming: were the partitions left out of the
    # checkpoint instead of set to -1, it would read nothing.
    restart = job_file(
        tmp_path,
        kafka_bootstrap,
        [source],
        **{"job.id": job_id, "systems.kafka.default.stream.samza.offset.default": "upcoming"},
    )
    moved = tool("set", str(restart), "--to", "oldest")
    assert moved.returncode == 0, moved.stderr
    assert (  # the new offsets are the topic's as it is now, whose ID the restart records
        f"Partition 0  kafka.{source}#0  49 -> -1  (resumes at offset 0; topic ID {topic_id} "
        "dropped: the restart takes the offset as the current topic's)"
    ) in moved.stdout.splitlines()
    assert "wrote 2 checkpoint(s)" in moved.stdout
    after = show(restart)
    assert {t: line["offsets"] for t, line in after.items()} == {
        "Partition 0": {f"kafka.{source}#0": "-1"},
        "Partition 1": {f"kafka.{source}#1": "-1"},
    }
    # Two up: above the epoch a container that read the same checkpoints would claim.
    assert {t: line["epoch"] for t, line in after.items()} == {t: e + 2 for t, e in epochs.items()}
    # Kafka's tools see the move at once: the group's offsets are the next ones to read.
    assert group_offsets(kafka_bootstrap, restart) == {0: 0, 1: 0}

    again = Job(restart, out, tmp_path / "again.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 200, 90, "200 outputs", again.proc)
    assert again.stop() == 0
    got = Counter((r["p"], r["o"], r["v"]) for r in outputs(kafka_bootstrap, out))
    assert len(got) == 100 and set(got.values()) == {2}, "every message processed twice"
    assert group_offsets(kafka_bootstrap, restart) == {0: 50, 1: 50}


def group_offsets(bootstrap: str, job: Path) -> dict[int, int]:
    from test_group_offsets import group

    return group(bootstrap, job)[0]


def test_a_file_of_show_lines_moves_the_partitions_it_names(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = name("ck-file")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(p, None, b"x") for p in (0, 1) * 10]))
    job = job_file(tmp_path, kafka_bootstrap, [source])
    assert tool("set", str(job), "--to", "upcoming").returncode == 0
    assert offsets(job) == {f"kafka.{source}#0": "9", f"kafka.{source}#1": "9"}
    # show > file, edit one line, set --to file: only that task is written.
    before = tool("show", str(job)).stdout.splitlines()
    edited = before[0].replace('"9"', '"3"')
    written = checkpoint_records(kafka_bootstrap, job)
    done = tool("set", str(job), "--to", "-", stdin=edited + "\n")
    assert done.returncode == 0, done.stderr
    assert offsets(job) == {f"kafka.{source}#0": "3", f"kafka.{source}#1": "9"}
    assert checkpoint_records(kafka_bootstrap, job) == written + 1


def test_bad_lines_are_refused_by_line_and_nothing_is_written(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = name("ck-bad")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(p, None, b"x") for p in (0, 1) * 10]))
    job = job_file(tmp_path, kafka_bootstrap, [source])
    assert tool("set", str(job), "--to", "upcoming").returncode == 0
    shown, written = tool("show", str(job)).stdout, checkpoint_records(kafka_bootstrap, job)
    positions = tmp_path / "positions.jsonl"
    positions.write_text(
        "\n".join(
            [
                json.dumps({"task": "Partition 0", "offsets": {f"kafka.{source}#0": "2"}}),
                json.dumps({"task": "Partition 7", "offsets": {f"kafka.{source}#0": "1"}}),
                json.dumps({"task": "Partition 1", "offsets": {f"kafka.{source}#5": "1"}}),
                json.dumps({"task": "Partition 1", "offsets": {f"kafka.{source}#1": "10"}}),
                '{"task": "Partition 1", "offsets": ',
            ]
        )
        + "\n"
    )
    done = tool("set", str(job), "--to", str(positions))
    assert done.returncode == 2
    problems = done.stderr.splitlines()
    assert len(problems) == 4, done.stderr
    assert problems[:3] == [
        f"{positions}:2: unknown task 'Partition 7': the job's tasks are 'Partition 0', "
        "'Partition 1'",
        f"{positions}:3: partition 5 of kafka.{source} does not exist: the stream has "
        "partitions 0..1",
        f"{positions}:4: offset 10 of kafka.{source}#1 is past the partition's end: its high "
        "watermark is 10, so a checkpoint can hold at most 9 (the last processed offset)",
    ]
    assert problems[3].startswith(f"{positions}:5: not a JSON object: Expecting value")
    assert tool("show", str(job)).stdout == shown
    assert checkpoint_records(kafka_bootstrap, job) == written


def test_to_a_time_takes_the_brokers_offsets_for_it_and_dry_run_writes_nothing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = name("ck-time")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    start = 1_600_000_000_000  # 2020-09-13T12:26:40Z

    async def produce_at() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            for i in range(20):  # a message a minute
                await producer.send_and_wait(
                    source, b"x", partition=0, timestamp_ms=start + i * 60_000
                )
        finally:
            await producer.stop()

    asyncio.run(produce_at())
    job = job_file(tmp_path, kafka_bootstrap, [source])
    dry = tool("set", str(job), "--to", "2020-09-13T12:35:00Z", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    # The first message at or after 12:35 is offset 9, of 12:35:40 (offset 8 is of 12:34:40).
    assert f"Partition 0  kafka.{source}#0  none -> 8  (resumes at offset 9)" in dry.stdout
    assert "dry run: 1 checkpoint(s) would be written, none was" in dry.stdout
    assert show(job) == {}
    assert tool("set", str(job), "--to", "2020-09-13T14:35:00+02:00").returncode == 0
    assert offsets(job) == {f"kafka.{source}#0": "8"}
    # After the last message: nothing to read but what comes next.
    assert tool("set", str(job), "--to", "2030-01-01T00:00:00Z").returncode == 0
    assert offsets(job) == {f"kafka.{source}#0": "19"}


def test_set_is_refused_while_a_container_is_in_the_group(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("ck-live"), name("ck-live-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"x")] * 5))
    job = job_file(tmp_path, kafka_bootstrap, [source])  # kafka-group: every input on kafka
    run = Job(job, out, tmp_path / "live.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 5, 90, "5 outputs", run.proc)
    wait_for(lambda: offsets(job) == {f"kafka.{source}#0": "4"}, 30, "the checkpoint")
    refused = tool("set", str(job), "--to", "oldest")
    assert refused.returncode == 1
    cfg = json.loads(job.read_text())
    assert f"consumer group 'samzapy.{cfg['job.name']}.{cfg['job.id']}'" in refused.stderr
    assert "1 live member(s): samzapy-kafka-" in refused.stderr
    assert "stop every container of the job" in refused.stderr
    assert offsets(job) == {f"kafka.{source}#0": "4"}
    assert run.stop() == 0
    assert tool("set", str(job), "--to", "oldest").returncode == 0
    assert offsets(job) == {f"kafka.{source}#0": "-1"}


def test_a_refusal_after_a_static_member_stopped_says_it_stays_until_its_session_ends(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A container with job.container.id (the StatefulSet's pods) stays in the group after a
    clean stop, until its session times out: set's refusal must say so, rather than tell an
    operator who stopped every container to stop them."""
    source, out = name("ck-static"), name("ck-static-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"x")] * 3))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        [source],
        **{"job.container.id": "pod-0", "job.coordinator.session.timeout.ms": 6000},
    )
    run = Job(job, out, tmp_path / "static.log")
    wait_for(lambda: output_count(kafka_bootstrap, out) >= 3, 90, "3 outputs", run.proc)
    assert run.stop() == 0
    refused = tool("set", str(job), "--to", "oldest")
    assert refused.returncode == 1
    assert "1 live member(s): pod-0-" in refused.stderr
    assert (
        "stopped with job.container.id set, stays a member until its session times out: "
        "job.coordinator.session.timeout.ms, 6000 ms" in refused.stderr
    ), refused.stderr
    # As it says: once the session is over, the move goes through.
    wait_for(lambda: tool("set", str(job), "--to", "oldest").returncode == 0, 30, "the move")
    assert offsets(job) == {f"kafka.{source}#0": "-1"}


# -- what moving back does to the job's bookkeeping ---------------------------------------------


def test_a_writer_moved_back_sends_again_and_its_reader_takes_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The writer's records sent again carry the next epoch: the reader downstream, which
    applied the first ones, does not drop them as duplicates. A reader moved back reads
    what it had applied again."""
    source, mid, out = name("ck-src"), name("ck-mid"), name("ck-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, f"v{i}".encode()) for i in range(20)]))
    intermediate = {
        "streams.mid.samza.system": "kafka",
        "streams.mid.samza.physical.name": mid,
        "streams.mid.samza.intermediate": True,
        "streams.mid.partitions": 1,
    }
    writer = job_file(tmp_path, kafka_bootstrap, [source], **intermediate)
    reader = job_file(tmp_path, kafka_bootstrap, [mid], **intermediate)
    run_in_process(writer, tag_to(mid), processed(20))
    run_in_process(reader, tag_to(out), processed(20))
    assert output_count(kafka_bootstrap, out) == 20

    moved = tool("set", str(writer), "--to", "oldest")
    assert moved.returncode == 0, moved.stderr
    assert "19 -> -1  (resumes at offset 0; writer epoch 0 -> 1; topic ID " in moved.stdout
    run_in_process(writer, tag_to(mid), processed(20))
    run_in_process(reader, tag_to(out), processed(20))
    values = Counter(json.loads(r["v"])["v"] for r in outputs(kafka_bootstrap, out))
    assert values == {f"v{i}": 2 for i in range(20)}
    # The reader moved back forgets the origins it applied: it takes all 40 records again.
    # (A file of offsets: ``oldest`` and the like move an intermediate stream to its end.)
    (line,) = show(reader).values()
    back = json.dumps({"task": line["task"], "offsets": {f"kafka.{mid}#0": -1}})
    moved = tool("set", str(reader), "--to", "-", stdin=back)
    assert moved.returncode == 0, moved.stderr
    assert (
        "39 -> -1  (resumes at offset 0; its end-of-stream and watermark reports forgotten; "
        "the origins it applied forgotten; topic ID " in moved.stdout
    )
    run_in_process(reader, tag_to(out), processed(40))
    values = Counter(json.loads(r["v"])["v"] for r in outputs(kafka_bootstrap, out))
    assert values == {f"v{i}": 4 for i in range(20)}


class TwoStages(Tag):
    """Stage 1 tags each input message to ``mid``; stage 2 tags each of ``mid``'s to ``out``."""

    def __init__(self, mid: str, out: str) -> None:
        super().__init__()
        self.mid, self.final = SystemStream("kafka", mid), SystemStream("kafka", out)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        second = envelope.system_stream_partition.stream == self.mid.stream
        self.out = self.final if second else self.mid
        super().process(envelope, collector, coordinator)


def test_a_two_stage_job_moved_back_reads_its_input_again_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """``--to oldest`` moves the job's intermediate stream to its end, as Kafka Streams'
    reset tool does its repartition topics: stage 2 reads only what stage 1 writes again,
    so every input message reaches the output once more, not twice more."""
    source, mid, out = name("ck2-src"), name("ck2-mid"), name("ck2-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, f"v{i}".encode()) for i in range(20)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        [source, mid],
        **{
            "streams.mid.samza.system": "kafka",
            "streams.mid.samza.physical.name": mid,
            "streams.mid.samza.intermediate": True,
            "streams.mid.partitions": 1,
        },
    )
    run_in_process(job, lambda: TwoStages(mid, out), processed(40))
    assert offsets(job) == {f"kafka.{source}#0": "19", f"kafka.{mid}#0": "19"}
    moved = tool("set", str(job), "--to", "oldest")
    assert moved.returncode == 0, moved.stderr
    assert f"kafka.{mid}#0  19  (unchanged)" in moved.stdout
    run_in_process(job, lambda: TwoStages(mid, out), processed(40))
    values = Counter(json.loads(r["v"])["v"] for r in outputs(kafka_bootstrap, out))
    assert values == {f"v{i}": 2 for i in range(20)}


def test_stores_keep_their_state_unless_reset(kafka_bootstrap: str, tmp_path: Path) -> None:
    source, changelog = name("ck-words"), name("ck-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    words = [f"w{i}" for i in range(10)]
    asyncio.run(produce(kafka_bootstrap, source, [(0, w.encode(), w.encode()) for w in words]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        [source],
        **{
            "task.class": "state_jobs:WordCount",
            "job.logged.store.base.dir": str(tmp_path / "state"),
            "stores.counts.factory": "rocksdb",
            "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "long",
            "stores.counts.changelog": f"kafka.{changelog}",
        },
    )
    run_in_process(job, WordCount, processed(10))
    assert changelog_state(kafka_bootstrap, changelog) == dict.fromkeys(words, 1)
    # Moved back, the store keeps its counts: the messages read again count twice.
    assert tool("set", str(job), "--to", "oldest").returncode == 0
    run_in_process(job, WordCount, processed(10))
    assert changelog_state(kafka_bootstrap, changelog) == dict.fromkeys(words, 2)
    # With --reset-stores the restart empties the store first.
    reset = tool("set", str(job), "--to", "oldest", "--reset-stores")
    assert reset.returncode == 0, reset.stderr
    assert "Partition 0  stores counts: changelog offsets and snapshots dropped" in reset.stdout
    run_in_process(job, WordCount, processed(10))
    assert changelog_state(kafka_bootstrap, changelog) == dict.fromkeys(words, 1)


def test_exactly_once_checkpoints_move_through_the_tasks_transaction(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("ck-eos"), name("ck-eos-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(create_topic(kafka_bootstrap, out, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, f"v{i}".encode()) for i in range(10)]))
    job = job_file(
        tmp_path, kafka_bootstrap, [source], **{"task.processing.guarantee": "exactly-once"}
    )
    run_in_process(job, tag_to(out), processed(10))
    assert offsets(job) == {f"kafka.{source}#0": "9"}
    written = checkpoint_records(kafka_bootstrap, job, "-txn")
    assert tool("set", str(job), "--to", "oldest").returncode == 0
    assert checkpoint_records(kafka_bootstrap, job, "-txn") > written
    assert offsets(job) == {f"kafka.{source}#0": "-1"}
    run_in_process(job, tag_to(out), processed(10))
    committed = asyncio.run(read_all(kafka_bootstrap, out, committed=True))
    assert Counter(json.loads(r.value)["v"] for r in committed) == {f"v{i}": 2 for i in range(10)}


# -- refusals that need no broker ---------------------------------------------------------------


def test_what_the_tool_cannot_do_is_refused_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "data" / "lines").mkdir(parents=True)
    (tmp_path / "data" / "lines" / "0.jsonl").write_text('"a"\n"b"\n')

    def job(**extra: Any) -> str:
        cfg = {
            "job.name": "checkpoint-tool-file",
            "task.class": "kafka_jobs:Tag",
            "task.inputs": ["input.lines"],
            "systems.input.samza.factory": "file",
            "systems.input.path": str(tmp_path / "data"),
            **extra,
        }
        path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(json.dumps(cfg))
        return str(path)

    cases = [
        (("show", job()), "task.checkpoint.factory is not set: the job keeps no checkpoints"),
        (
            ("set", job(**{"task.checkpoint.factory": "memory"}), "--to", "oldest"),
            "task.checkpoint.factory is memory: the job's checkpoints live in its own process",
        ),
        (
            (
                "set",
                job(
                    **{
                        "task.checkpoint.factory": "file",
                        "task.checkpoint.dir": str(tmp_path / "cp"),
                    }
                ),
                "--to",
                "2020-01-01T00:00:00Z",
            ),
            "--to: system 'input' cannot find offsets by time (only kafka systems can)",
        ),
        (("show", str(tmp_path / "missing.yaml")), "missing.yaml' does not exist"),
        (  # not "create the input first": a memory job's streams are in its own process
            (
                "show",
                job(
                    **{
                        "task.inputs": ["mem.lines"],
                        "systems.mem.samza.factory": "memory",
                        "task.checkpoint.factory": "memory",
                    }
                ),
            ),
            "task.checkpoint.factory is memory: the job's checkpoints live in its own process",
        ),
    ]
    for args, expected in cases:
        done = tool(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert expected in done.stderr, (args, done.stderr)
        assert done.stdout == ""
    assert not (tmp_path / "cp").exists(), "nothing was written"


@pytest.mark.parametrize("command", ["show", "set"])
def test_checkpoints_it_cannot_reach_exit_1_saying_what_failed(
    tmp_path: Path, command: str
) -> None:
    """A broker down: the tool gives up after the system's connect timeout, says what it
    could not reach, and writes nothing."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = kafka_job_file(
        tmp_path, f"127.0.0.1:{port}", "lines", **{"systems.kafka.connect.timeout.ms": 1000}
    )
    args = ("set", str(job), "--to", "oldest") if command == "set" else ("show", str(job))
    done = tool(*args)
    assert done.returncode == 1, done.stderr
    assert f"cannot reach Kafka at 127.0.0.1:{port}" in done.stderr, done.stderr
    assert "systems.kafka.connect.timeout.ms" in done.stderr, done.stderr


def test_show_shows_the_readable_checkpoints_and_names_a_corrupt_one(tmp_path: Path) -> None:
    """One task's checkpoint file is corrupt: show prints the others and names it with the
    remedy (exit 1); set refuses and writes nothing."""
    data = tmp_path / "data" / "lines"
    data.mkdir(parents=True)
    for p in range(3):
        (data / f"{p}.jsonl").write_text('"a"\n"b"\n')
    checkpoints = tmp_path / "cp"
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "checkpoint-tool-corrupt",
                "task.class": "kafka_jobs:Tag",
                "task.inputs": ["input.lines"],
                "systems.input.samza.factory": "file",
                "systems.input.path": str(tmp_path / "data"),
                "task.checkpoint.factory": "file",
                "task.checkpoint.dir": str(checkpoints),
            }
        )
    )

    async def write() -> None:
        manager = FileCheckpointManager(checkpoints)
        await manager.start()
        for p in (0, 2):
            ssp = SystemStreamPartition("input", "lines", p)
            await manager.write(TaskName(f"Partition {p}"), Checkpoint({ssp: "0"}))

    asyncio.run(write())
    corrupt = checkpoints / task_file_name("Partition 1")
    corrupt.write_text('{"task": "Partition 1", "offs')
    done = tool("show", str(job))
    assert done.returncode == 1, done.stderr
    assert [json.loads(line)["task"] for line in done.stdout.splitlines()] == [
        "Partition 0",
        "Partition 2",
    ]
    assert "task 'Partition 1': corrupt checkpoint" in done.stderr
    assert "move it out of" in done.stderr  # the remedy
    before = {f.name: f.read_bytes() for f in checkpoints.iterdir()}
    refused = tool("set", str(job), "--to", "oldest")
    assert refused.returncode == 1, refused.stderr
    assert "corrupt checkpoint" in refused.stderr
    assert {f.name: f.read_bytes() for f in checkpoints.iterdir()} == before


def test_show_lines_of_an_application_with_memory_intermediate_streams_set_back(
    tmp_path: Path,
) -> None:
    """The README's application keeps its intermediate stream on the memory system, which
    lives in the job's process: the tool's copy is empty, and its end says nothing of the
    job's. `show | set --to -` takes the lines back unchanged (it refused every one, the
    memory partition's offset being past the empty copy's end)."""
    readme = (ROOT / "README.md").read_text()
    app = readme.split("<!-- file: pageviews_app.py -->\n```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pageviews_app.py").write_text(app)
    job = tmp_path / "app.yaml"
    job.write_text(
        json.dumps(
            {
                "job.name": "pageviews-app",
                "app.class": "pageviews_app:PageViewCounts",
                "task.checkpoint.factory": "file",
                "task.checkpoint.dir": str(tmp_path / "cp"),
                "systems.input.samza.factory": "file",
                "systems.input.path": str(ROOT / "examples" / "pageviews" / "data"),
                "systems.output.samza.factory": "file",
                "systems.output.path": str(tmp_path / "out"),
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    ran = subprocess.run(
        [sys.executable, "-m", "samzapy", "run", str(job)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr

    def checkpoint(
        command: str, *rest: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "samzapy", "checkpoint", command, str(job), *rest],
            cwd=tmp_path,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )

    shown = checkpoint("show")
    assert shown.returncode == 0, shown.stderr
    assert "memory.pageviews-app-1-partition_by-by-member" in shown.stdout
    moved = checkpoint("set", "--to", "-", "--dry-run", stdin=shown.stdout)
    assert moved.returncode == 0, moved.stderr
