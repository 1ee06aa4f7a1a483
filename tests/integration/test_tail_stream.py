"""`samzapy tail` on the real broker: an intermediate stream as a real upstream job wrote it
(messages with their origins, then every upstream task's end-of-stream), an application's
planned intermediate stream decoded with its serdes (bad records, tombstones, watermarks and
transactions included), --follow until Ctrl-C, and the streams it refuses with exit 2."""

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
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from samzapy.cli.tail import SILENCE_S
from samzapy.control import EndOfStreamMessage, WatermarkMessage, encode_control, frame
from samzapy.control.wire import frame_with_origin, origin_prefix, source_id

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from app_jobs import BY_WORD  # noqa: E402
from test_control_jobs import config, framed_source, lines, run_job, streams  # noqa: E402
from test_kafka_jobs import create_topic, name, produce  # noqa: E402

pytestmark = pytest.mark.timeout(300)

SPLIT_TASKS = 3
WORDS_PARTITIONS = 2


def tail(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`samzapy tail ARGS` as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "samzapy", "tail", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(HERE)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def json_lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def write_job(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / f"job-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(json.dumps(cfg))
    return path


# -- an intermediate stream written by a real upstream job ------------------------------------


def test_tail_of_an_intermediate_stream_shows_its_messages_and_every_upstream_end(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, words = name("tail-lines"), name("tail-words")
    asyncio.run(create_topic(kafka_bootstrap, source, SPLIT_TASKS))
    placed = {p: lines(40 + p, 60) for p in range(SPLIT_TASKS)}
    asyncio.run(produce(kafka_bootstrap, source, framed_source(placed)))
    cfg = config(
        kafka_bootstrap,
        "tail-split",
        [source],
        **{"task.class": "control_jobs:Split"},
        **streams(source, words, None, tmp_path),
    )
    upstream = run_job(cfg, tmp_path, {"SAMZAPY_TEST_WORDS": words})
    assert upstream.wait() == 0, upstream.tail()
    job = write_job(tmp_path, cfg)

    printed = json_lines(tail(str(job), "words"))  # by its stream id

    assert {line["stream"] for line in printed} == {f"kafka.{words}"}
    # By partition, then offset.
    places = [(line["partition"], line["offset"]) for line in printed]
    assert places == sorted(places)
    assert {p for p, _ in places} == set(range(WORDS_PARTITIONS))
    messages = [line for line in printed if "control" not in line]
    assert all("error" not in line for line in printed), printed
    # Every word the upstream job split, once, decoded (no serde: UTF-8 text), key = word.
    expected = Counter(w for texts in placed.values() for t in texts for w in t.split())
    assert Counter(line["value"] for line in messages) == expected
    assert all(line["key"] == line["value"] for line in messages)
    assert all(isinstance(line["timestamp"], int) for line in printed)
    # Each upstream task's messages carry their origin, and its end-of-stream follows them on
    # every partition of the stream.
    writer = f"{cfg['job.name']}-{cfg['job.id']}"
    task_of = {
        source_id(f"{writer}/Partition {p}", f"kafka.{source}.{p}").hex(): f"Partition {p}"
        for p in range(SPLIT_TASKS)
    }
    for partition in range(WORDS_PARTITIONS):
        ended: set[str] = set()
        for line in (x for x in printed if x["partition"] == partition):
            if "control" in line:
                assert line["control"] == "end-of-stream"
                assert line["task_count"] == SPLIT_TASKS
                ended.add(line["task"])
                continue
            origin = line["origin"]
            assert set(origin) == {"source", "epoch", "offset", "ordinal"}
            assert task_of[origin["source"]] not in ended, f"a message after its task's end: {line}"
        assert ended == set(task_of.values())

    # The same stream by its physical name and as system.stream, from an offset of one
    # partition, with a limit.
    first = [line for line in printed if line["partition"] == 1][:5]
    by_name = json_lines(
        tail(str(job), words, "--partition", "1", "--from", str(first[2]["offset"]))
    )
    assert by_name[:3] == first[2:5]
    limited = json_lines(tail(str(job), f"kafka.{words}", "--partition", "1", "--limit", "2"))
    assert limited == first[:2]


# -- an application's planned intermediate stream, filled by hand -----------------------------


async def _transactions(bootstrap: str, topic: str, committed: bytes, aborted: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=name("tail-tx"))
    await producer.start()
    try:
        for value, commit in ((aborted, False), (committed, True)):
            await producer.begin_transaction()
            await producer.send_and_wait(topic, value, key=b"tx", partition=0)
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    finally:
        await producer.stop()


def test_tail_of_an_applications_intermediate_stream_decodes_it_as_the_job_would(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """WordTotals' partition_by stream: string key and message serdes, framed, read
    committed. Not run: the records are written here, so that every kind is there."""
    job_id = uuid.uuid4().hex[:8]
    job = write_job(
        tmp_path,
        {
            "job.name": "tail-app",
            "job.id": job_id,
            "app.class": "app_jobs:WordTotals",
            "app.words": name("tail-app-words"),
            "app.totals": name("tail-app-totals"),
            "systems.kafka.bootstrap.servers": kafka_bootstrap,
        },
    )
    stream_id = f"tail-app-{job_id}-partition_by-{BY_WORD}"

    missing = tail(str(job), stream_id)
    assert missing.returncode == 2
    assert missing.stdout == ""
    assert f"kafka.{stream_id} does not exist" in missing.stderr

    asyncio.run(create_topic(kafka_bootstrap, stream_id, 1))
    prefix = origin_prefix(source_id("writer/Partition 0", "kafka.words.0"), 3)
    asyncio.run(
        produce(
            kafka_bootstrap,
            stream_id,
            [
                (0, b"fox", frame(b"fox")),
                (0, b"dog", frame_with_origin(prefix, 41, 2, b"dog")),
                (0, b"\xff\xfe", frame(b"cat")),  # a key the string serde refuses
                (0, None, b"\x09junk"),  # no such frame type
                (0, b"owl", frame(b"\xc3\x28")),  # a body the string serde refuses
                (0, None, encode_control(WatermarkMessage("Partition 0", 2, 1_700_000_000_000))),
                (0, None, encode_control(EndOfStreamMessage("Partition 0", 2))),
            ],
        )
    )
    asyncio.run(_transactions(kafka_bootstrap, stream_id, frame(b"kept"), frame(b"dropped")))

    started = time.monotonic()
    done = tail(str(job), stream_id)
    # Done at the end it found, the commit marker after the last record included, not after
    # waiting for records that never come.
    assert time.monotonic() - started < SILENCE_S
    assert done.stderr == ""
    printed = json_lines(done)

    def strip(line: dict[str, Any]) -> dict[str, Any]:
        assert line.pop("stream") == f"kafka.{stream_id}"
        assert line.pop("partition") == 0
        assert isinstance(line.pop("timestamp"), int)
        return line

    got = [strip(line) for line in printed]
    assert got[:7] == [
        {"offset": 0, "key": "fox", "value": "fox"},
        {
            "offset": 1,
            "key": "dog",
            "value": "dog",
            "origin": {"source": prefix[1:9].hex(), "epoch": 3, "offset": 41, "ordinal": 2},
        },
        {
            "offset": 2,
            "error": got[2]["error"],
            "hex": "fffe",
        },
        {"offset": 3, "error": got[3]["error"], "hex": b"\x09junk".hex()},
        {"offset": 4, "key": "owl", "error": got[4]["error"], "hex": "00c328"},
        {
            "offset": 5,
            "control": "watermark",
            "task": "Partition 0",
            "task_count": 2,
            "watermark": 1_700_000_000_000,
        },
        {"offset": 6, "control": "end-of-stream", "task": "Partition 0", "task_count": 2},
    ]
    assert got[2]["error"].startswith("key: string serde")
    assert got[3]["error"].startswith("framed record: unknown type byte 9")
    assert got[4]["error"].startswith("message: string serde")
    # The aborted transaction's record is skipped, as the job's read_committed reader does.
    assert [(line["key"], line["value"]) for line in got[7:]] == [("tx", "kept")]


# -- following, and what tail refuses ---------------------------------------------------------


def test_tail_follow_prints_new_messages_until_ctrl_c(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = name("tail-follow")
    asyncio.run(create_topic(kafka_bootstrap, topic, 2))
    asyncio.run(produce(kafka_bootstrap, topic, [(0, None, b"old")]))
    job = write_job(
        tmp_path, config(kafka_bootstrap, "tail-follow", [topic], **{"task.class": "x:Y"})
    )
    out = tmp_path / "follow.out"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "samzapy",
                "tail",
                str(job),
                topic,
                "--follow",
                "--from",
                "upcoming",
            ],
            cwd=ROOT,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C as at a terminal, also when the suite itself runs as a background job
            # (whose children start with SIGINT ignored, so Python's KeyboardInterrupt is off).
            preexec_fn=_sigint_default,
        )
    try:
        # Until the consumer is in place nothing new is read: keep sending until it shows.
        deadline = time.monotonic() + 60
        sent = 0
        while "new" not in out.read_text():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "tail --follow printed nothing new"
            asyncio.run(produce(kafka_bootstrap, topic, [(sent % 2, b"k", b"new")]))
            sent += 1
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert err == ""  # quietly
    printed = [json.loads(line) for line in out.read_text().splitlines()]
    assert printed and all(line["value"] == "new" and line["key"] == "k" for line in printed)


def test_tail_of_a_topic_that_does_not_exist_exits_2_naming_it(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = name("tail-present")
    asyncio.run(create_topic(kafka_bootstrap, topic, 1))
    job = write_job(
        tmp_path, config(kafka_bootstrap, "tail-missing", [topic], **{"task.class": "x:Y"})
    )
    absent = name("tail-absent")
    done = tail(str(job), f"kafka.{absent}")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip() == f"stream kafka.{absent} does not exist on system 'kafka'"
    done = tail(str(job), absent)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"stream {absent!r} is not a stream of the job" in done.stderr
    assert f"kafka.{topic}" in done.stderr  # the streams it has


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
