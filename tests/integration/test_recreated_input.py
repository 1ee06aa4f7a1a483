"""An input topic deleted and made again between two runs of a job, through `samzapy run` on
the real broker (docs/deploy.md, "Deleting an input topic"): each checkpoint records its
inputs' topic IDs, and a restart that finds another ID logs ``input_topic_recreated`` and
reads the new topic from its offset default, whether it holds fewer messages than the
checkpointed offset or more. It neither fails nor resumes in the middle of the new topic."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpoint_documents,
    checkpointed,
    create_topic,
    delete_topic,
    job_file,
    name,
    outputs,
    produce,
    read_all,
    wait_for,
)


async def recreate(bootstrap: str, topic: str) -> None:
    await delete_topic(bootstrap, topic)
    deadline = time.monotonic() + 30
    while True:  # the broker deletes a topic in the background
        try:
            await create_topic(bootstrap, topic, 1)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.25)


@pytest.mark.timeout(120)
def test_a_recreated_input_is_read_from_its_offset_default(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, output = name("recreated-src"), name("recreated-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(10)]))
    job = job_file(tmp_path, kafka_bootstrap, source)  # offset default: oldest
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 9}, 60, "the first run", first.proc)
    assert first.stop() == 0

    asyncio.run(recreate(kafka_bootstrap, source))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(3)]))
    again = Job(job, output, tmp_path / "again.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 2}, 60, "the rerun", again.proc)
    assert again.stop() == 0

    [recreated] = [e for e in again.events() if e["event"] == "input_topic_recreated"]
    assert (recreated["stream"], recreated["partitions"]) == (f"kafka.{source}", [0])
    assert not [e for e in again.events() if e["event"] == "stream_went_back"]
    values = [o["v"] for o in outputs(kafka_bootstrap, output)]
    assert values == [f"old{i}" for i in range(10)] + [f"new{i}" for i in range(3)]
    assert not [e for e in again.events() if e["level"] == "error"]


@pytest.mark.timeout(120)
def test_a_recreated_input_that_outgrew_the_checkpoint_is_read_from_its_offset_default(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The new topic holds more messages than the old one's checkpointed offset: the offset
    is not past its end, only its topic ID (recorded in the checkpoint) tells that it belongs
    to the old topic. The restart logs ``input_topic_recreated`` and reads every new message
    from the offset default, instead of resuming after the old offset in the new topic."""
    source, output = name("outgrown-src"), name("outgrown-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(5)]))
    job = job_file(tmp_path, kafka_bootstrap, source)  # offset default: oldest
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 4}, 60, "the first run", first.proc)
    assert first.stop() == 0

    asyncio.run(recreate(kafka_bootstrap, source))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(8)]))
    again = Job(job, output, tmp_path / "again.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 7}, 60, "the rerun", again.proc)
    assert again.stop() == 0

    values = [o["v"] for o in outputs(kafka_bootstrap, output)]
    assert values == [f"old{i}" for i in range(5)] + [f"new{i}" for i in range(8)]
    [recreated] = [e for e in again.events() if e["event"] == "input_topic_recreated"]
    assert recreated["level"] == "warning"
    assert (recreated["stream"], recreated["partitions"], recreated["tasks"]) == (
        f"kafka.{source}",
        [0],
        ["Partition 0"],
    )
    assert recreated["checkpointed_topic_id"] != recreated["topic_id"]
    assert not [e for e in again.events() if e["event"] == "stream_went_back"]
    task = checkpoint_documents(kafka_bootstrap, job)["Partition 0"]
    assert task["extra"]["topic_ids"] == {f"kafka.{source}": recreated["topic_id"]}


@pytest.mark.timeout(120)
def test_what_a_recreated_input_sends_through_an_intermediate_stream_is_taken_as_new(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Stage 1 of an application reads the recreated input from its start, so its records in
    the intermediate stream have positions (offsets) that stage 2 applied already, from the
    old topic. The recreated input moves stage 1 to its next writer epoch, as
    ``samza.reset.offset`` would: stage 2 takes the records as new instead of dropping the
    first five as copies of the old ones."""
    source, output = name("relayed-src"), name("relayed-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(5)]))
    config = {
        "job.name": "recreated-it",
        "job.id": uuid.uuid4().hex[:8],
        "app.class": "app_jobs:RelayedLines",
        "app.lines": source,
        "app.relayed": output,
        "task.checkpoint.factory": "kafka",
        "task.commit.ms": 200,
        "systems.kafka.bootstrap.servers": kafka_bootstrap,
        "systems.kafka.default.stream.samza.offset.default": "oldest",
    }
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(config))

    def relayed() -> list[str]:
        return [r.value.decode() for r in asyncio.run(read_all(kafka_bootstrap, output))]

    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: len(relayed()) == 5, 60, "the first run", first.proc)
    assert first.stop() == 0

    asyncio.run(recreate(kafka_bootstrap, source))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(8)]))
    again = Job(job, output, tmp_path / "again.log")
    wait_for(lambda: len(relayed()) == 13, 60, "the rerun", again.proc)
    assert again.stop() == 0
    assert relayed() == [f"old{i}" for i in range(5)] + [f"new{i}" for i in range(8)]
    assert [e["partitions"] for e in again.events() if e["event"] == "input_topic_recreated"] == [
        [0]
    ]


def checkpoint_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samzapy", "checkpoint", *args],
        cwd=HERE.parent.parent,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.timeout(120)
def test_checkpoint_set_before_the_restart_is_taken_as_it_is(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The operator moves the job on the recreated input with `samzapy checkpoint set --to
    oldest` before restarting it, under the offset default upcoming: the offsets set are the
    new topic's, so the restart resumes at them and reads every new message, instead of
    taking them for the old topic's and starting after the last one."""
    source, output = name("set-src"), name("set-out")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"old%d" % i) for i in range(5)]))
    job = job_file(tmp_path, kafka_bootstrap, source)  # offset default: oldest
    first = Job(job, output, tmp_path / "first.log")
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == {0: 4}, 60, "the first run", first.proc)
    assert first.stop() == 0

    asyncio.run(recreate(kafka_bootstrap, source))
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new%d" % i) for i in range(8)]))
    shown = checkpoint_command("show", str(job))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    old_id = json.loads(shown.stdout)["topic_ids"][f"kafka.{source}"]  # what show prints
    moved = checkpoint_command("set", str(job), "--to", "oldest")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert (  # set says that it dropped the old topic's ID
        f"Partition 0  kafka.{source}#0  4 -> -1  (resumes at offset 0; topic ID {old_id} "
        "dropped: the restart takes the offset as the current topic's)"
    ) in moved.stdout.splitlines()
    config = json.loads(job.read_text())
    config["systems.kafka.default.stream.samza.offset.default"] = "upcoming"
    job.write_text(json.dumps(config))
    again = Job(job, output, tmp_path / "again.log")
    wait_for(lambda: len(outputs(kafka_bootstrap, output)) >= 13, 60, "the rerun", again.proc)
    assert again.stop() == 0
    values = [o["v"] for o in outputs(kafka_bootstrap, output)]
    assert values == [f"old{i}" for i in range(5)] + [f"new{i}" for i in range(8)]
    assert not [e for e in again.events() if e["event"] == "input_topic_recreated"]
