"""The Docker image, built and run for real by ``make docker-test`` (scripts/docker.sh).

The script starts a private engine, builds the Dockerfile on a base image made from Debian's
packages and runs these tests with ``DOCKER_HOST`` and ``SAMZAPY_DOCKER_IMAGE`` set. Each test
runs a container as an operator would: the quick-start job on the file system (it finishes by
itself), and the Kafka page-view job against the session's broker on the host's network,
stopped with ``docker stop``. Nothing is pulled: the engine has no registry to reach.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from samzapy.checkpoint.owner import is_typed_key
from samzapy.checkpoint.stream import checkpoint_stream_name

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from test_kafka_jobs import read_all  # noqa: E402

IMAGE = os.environ.get("SAMZAPY_DOCKER_IMAGE", "")
UID = 10001  # the Dockerfile's USER
JOB_FILE = REPO / "configs" / "kafka-pageviews.yaml"

pytestmark = pytest.mark.timeout(300)


def docker(
    *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done


@pytest.fixture
def container() -> Iterator[str]:
    """A container name, removed after the test whatever became of it."""
    name = f"samzapy-test-{uuid.uuid4().hex[:8]}"
    yield name
    docker("rm", "-f", name, check=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object; a line that is not one fails the test."""
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            raise AssertionError(f"a log line is not JSON: {line!r}") from None
        assert isinstance(event, dict), line
        assert {"timestamp", "level", "event"} <= event.keys(), line
        events.append(event)
    return events


def main_process_uid(name: str) -> int:
    """The real uid of the container's main process, from its /proc/1/status."""
    status = docker("exec", name, "cat", "/proc/1/status").stdout
    line = next(x for x in status.splitlines() if x.startswith("Uid:"))
    return int(line.split()[1])


def wait_for(condition: Callable[[], bool], timeout: float, what: str, name: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        running = docker("inspect", "--format", "{{.State.Running}}", name).stdout.strip()
        if running != "true":
            logs = docker("logs", name, check=False)
            raise AssertionError(f"the container stopped while waiting for {what}:\n{logs.stdout}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def http_get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- the file-system job ----------------------------------------------------------------------


def test_the_default_command_runs_the_quickstart_as_the_image_user(
    container: str, tmp_path: Path
) -> None:
    assert IMAGE, "run by `make docker-test`, which builds the image and sets SAMZAPY_DOCKER_IMAGE"
    assert docker("image", "inspect", "--format", "{{.Config.User}}", IMAGE).stdout.strip() == (
        f"{UID}:{UID}"
    )
    # The image's own default: `samzapy run /etc/samzapy/job.yaml`, the quick-start job.
    docker("run", "--name", container, "--network", "host", IMAGE, timeout=120)
    assert docker("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip() == "0"
    logs = docker("logs", container)
    assert logs.stderr == ""
    events = json_lines(logs.stdout)
    finished = [e for e in events if e["event"] == "job_finished"]
    assert finished and finished[0]["processed"] == 6000, logs.stdout[-2000:]
    assert events[-1]["event"] == "container_exited" and events[-1]["exit_code"] == 0
    # KV's C constructor was built into the image, and its compiler removed after the build.
    started = next(e for e in events if e["event"] == "container_started")
    assert started["kv_speedups"] is True
    compilers = docker("run", "--rm", "--entrypoint", "sh", IMAGE, "-c", "command -v gcc cc || :")
    assert compilers.stdout == ""

    docker("cp", f"{container}:/var/lib/samzapy", str(tmp_path))
    out = tmp_path / "samzapy" / "output" / "quickstart" / "page-view-counts"
    views = [json.loads(line)["views"] for f in out.glob("*.jsonl") for line in f.open()]
    dead = tmp_path / "samzapy" / "output" / "quickstart" / "dead-letters" / "0.jsonl"
    rejected = len(dead.read_text().splitlines()) if dead.exists() else 0
    assert sum(views) + rejected == 6000
    # The final checkpoint: every partition checkpointed at its last line.
    checkpoints = tmp_path / "samzapy" / "state" / "quickstart" / "checkpoints"
    documents = [json.loads(p.read_text()) for p in sorted(checkpoints.glob("*.json"))]
    offsets = {o["partition"]: o["offset"] for d in documents for o in d["offsets"]}
    source = REPO / "examples" / "pageviews" / "data" / "page-views"
    last_lines = {int(f.stem): str(len(f.read_text().splitlines()) - 1) for f in source.iterdir()}
    assert offsets == last_lines


# -- the Kafka job ----------------------------------------------------------------------------


async def _create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, members: list[str]) -> dict[str, int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=10)
    await producer.start()
    try:
        sent = [
            await producer.send(
                topic, json.dumps({"member_id": m, "page": "/"}).encode(), key=m.encode()
            )
            for m in members
        ]
        records = await asyncio.gather(*sent)
    finally:
        await producer.stop()
    ends: dict[str, int] = {}
    for record in records:
        key = str(record.partition)
        ends[key] = max(ends.get(key, 0), record.offset + 1)
    return ends


def latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in asyncio.run(read_all(bootstrap, topic)):
        value = json.loads(record.value)
        counts[value["member_id"]] = value["views"]
    return counts


def checkpointed_offsets(bootstrap: str, job: str, job_id: str) -> dict[str, int]:
    """partition -> the offset of the last message the final checkpoints cover."""
    latest: dict[bytes, Any] = {}
    for record in asyncio.run(read_all(bootstrap, checkpoint_stream_name(job, job_id))):
        if not is_typed_key(record.key):  # the owner record is no task's
            latest[record.key] = record.value
    offsets: dict[str, int] = {}
    for value in latest.values():
        for entry in json.loads(value)["offsets"]:
            offsets[str(entry["partition"])] = int(entry["offset"])
    return offsets


def test_the_kafka_job_answers_its_probes_and_stops_cleanly_on_docker_stop(
    container: str, kafka_bootstrap: str
) -> None:
    assert IMAGE, "run by `make docker-test`, which builds the image and sets SAMZAPY_DOCKER_IMAGE"
    job_id = uuid.uuid4().hex[:8]
    views, counts = f"page-views-{job_id}", f"page-view-counts-{job_id}"
    asyncio.run(_create_topics(kafka_bootstrap, {views: 3, counts: 3}))
    members = [f"member-{i % 7}" for i in range(500)]
    ends = asyncio.run(_produce(kafka_bootstrap, views, members))
    port = free_port()
    # The container as docker-compose.yml runs it: the repository's job file mounted, the
    # broker named by KAFKA_BOOTSTRAP, Prometheus on every address.
    docker(
        "run", "--detach", "--name", container, "--network", "host",
        "--env", f"KAFKA_BOOTSTRAP={kafka_bootstrap}",
        "--volume", f"{JOB_FILE}:/etc/samzapy/job.yaml:ro",
        IMAGE, "run", "/etc/samzapy/job.yaml",
        "--set", f"job.id={job_id}",
        "--set", f"task.inputs=[kafka.{views}]",
        "--set", f"app.output=kafka.{counts}",
        "--set", "task.window.ms=500",
        "--set", "metrics.reporters=[log,prometheus]",
        "--set", "metrics.prometheus.host=0.0.0.0",
        "--set", f"metrics.prometheus.port={port}",
        "--set", "job.logged.store.base.dir=/var/lib/samzapy/state",
        "--set", f"stores.counts.changelog=kafka.page-view-counts-changelog-{job_id}",
    )  # fmt: skip
    expected = {m: members.count(m) for m in set(members)}
    wait_for(
        lambda: latest_counts(kafka_bootstrap, counts) == expected, 120, "every count", container
    )
    assert main_process_uid(container) == UID

    assert http_get(port, "/healthz") == (200, b'{"status": "ok"}\n')
    assert http_get(port, "/readyz") == (200, b'{"status": "ready"}\n')
    status, body = http_get(port, "/metrics")
    assert status == 200
    assert b"# TYPE samzapy_task_process_latency_seconds histogram" in body

    started = time.monotonic()
    docker("stop", "--time", "30", container, timeout=60)
    assert time.monotonic() - started < 25, "docker stop had to wait for its SIGKILL"
    state = json.loads(docker("inspect", "--format", "{{json .State}}", container).stdout)
    assert (state["ExitCode"], state["OOMKilled"]) == (0, False)
    logs = docker("logs", container)
    assert logs.stderr == ""
    events = json_lines(logs.stdout)
    names = [e["event"] for e in events]
    assert "signal_received" in names
    assert events[-1]["event"] == "container_exited", names[-5:]
    assert events[-1]["stopped_by"] == "SIGTERM"
    assert all(e.get("job") == "kafka-pageviews" for e in events[1:]), "job context missing"
    # The last checkpoint covers every message: the last offset of each partition (-1 for a
    # partition no member's key went to: nothing processed, a restart starts it at 0).
    assert checkpointed_offsets(kafka_bootstrap, "kafka-pageviews", job_id) == {
        str(p): ends.get(str(p), 0) - 1 for p in range(3)
    }
