"""Broker outages at start-up and mid-run: ridden out with exact output, and a quiet log.

The tests stop and start a broker of their own (``own_kafka_broker``). Whatever the job was
doing when the broker went away (connecting, describing topics, reading offsets, producing),
it must wait for the broker up to ``connect.timeout.ms`` and then carry on, every input's output
written once (an outage longer than the group's session holds the tasks until the broker is
back, then resumes them); and the log must hold a handful of lines for
the outage: samzapy's ``broker_unreachable`` / ``broker_reachable`` pair and a rate-limited
``library_log`` line or two from the client library (a warning at most), not one line per
attempt, and no raw line.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from structlog.testing import capture_logs
from test_kafka_jobs import (
    Job,
    create_topic,
    job_file,
    name,
    output_count,
    outputs,
    produce,
    seconds_between,
    wait_for,
)

from samzapy.system.kafka import KafkaSystemFactory
from samzapy.system.kafka.connection import REMIND_S

if TYPE_CHECKING:
    from conftest import ScriptBroker

pytestmark = pytest.mark.timeout(400)

#: The most warning and error lines one outage may add to the log.
HANDFUL = 6


def noisy(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["level"] in ("warning", "error", "critical")]


def reminders_allowed(outage_s: float) -> int:
    """The most ``broker_still_unreachable`` reminders an outage of ``outage_s`` (as the job
    measured it) brings: the first REMIND_S into it, the next ones at least 0.9 REMIND_S
    apart (each waiting call times its own, from its first failure; connection.py)."""
    return int(outage_s // (REMIND_S * 0.9))


def check_a_handful(events: list[dict[str, Any]]) -> None:
    """At most HANDFUL warning and error lines for an outage, besides its reminders: a loaded
    machine restarts a broker in more than REMIND_S, and each outage may add those its
    length allows (``reminders_allowed``)."""
    lines = noisy(events)
    reminders = [e for e in lines if e["event"] == "broker_still_unreachable"]
    others = [e for e in lines if e["event"] != "broker_still_unreachable"]
    assert len(others) <= HANDFUL, "\n".join(map(str, others))
    outages = [e["outage_s"] for e in events if e["event"] == "broker_reachable"]
    allowed = sum(reminders_allowed(outage_s) for outage_s in outages)
    assert len(reminders) <= allowed, (outages, reminders)


def check_library_lines(run: Job) -> None:
    """Every line of the log is JSON, and the client library's lines are ``library_log``
    events naming its logger, at warning at most (the job did not fail)."""
    lines = run.log.read_text().splitlines()
    assert [line for line in lines if not line.startswith("{")] == []
    library = [e for e in run.events() if e.get("logger", "samzapy").split(".")[0] != "samzapy"]
    assert {e["event"] for e in library} <= {"library_log", "library_log_suppressed"}, library
    assert all(e["level"] in ("debug", "info", "warning") for e in library), library
    assert all(e["logger"] and e["library_level"] for e in library), library


def tagging_job(bootstrap: str, tmp_path: Path, n: int, **extra: Any) -> tuple[Path, str]:
    """A job file of kafka_jobs:Tag over a new 2-partition topic holding ``n`` messages
    (values 0..n-1), and the name of its output topic."""
    source, out = name("in"), name("out")
    asyncio.run(create_topic(bootstrap, source, 2))
    asyncio.run(create_topic(bootstrap, out, 2))
    asyncio.run(produce(bootstrap, source, [(i % 2, None, str(i).encode()) for i in range(n)]))
    return job_file(tmp_path, bootstrap, source, **{"task.commit.ms": 200, **extra}), out


def complete(bootstrap: str, out: str, n: int) -> bool:
    if output_count(bootstrap, out) < n:
        return False
    return sorted(int(r["v"]) for r in outputs(bootstrap, out)) == list(range(n))


async def test_an_admin_call_rides_out_an_outage_with_two_lines(
    own_kafka_broker: ScriptBroker,
) -> None:
    """The call that failed at start-up in issue 14: describing topics while the broker is gone."""
    broker = own_kafka_broker
    built = KafkaSystemFactory("kafka", {"bootstrap.servers": broker.bootstrap})
    topic = f"described-{uuid.uuid4().hex[:8]}"
    admin = built.get_admin()
    await admin.start()
    try:
        await admin.create_stream(topic, 3)
        await asyncio.to_thread(broker.down)
        with capture_logs() as logs:
            described = asyncio.ensure_future(admin.partition_counts([topic]))
            await asyncio.sleep(3)
            assert not described.done()
            await asyncio.to_thread(broker.up)
            assert await asyncio.wait_for(described, 60) == {topic: 3}
    finally:
        await admin.stop()
    events = [(e["event"], e["log_level"]) for e in logs]
    # Two lines, and a reminder for each REMIND_S the broker took to come back (a loaded
    # machine restarts it in more than that).
    reminders = len(events) - 2
    assert events == [
        ("broker_unreachable", "warning"),
        *[("broker_still_unreachable", "warning")] * reminders,
        ("broker_reachable", "info"),
    ]
    assert logs[-1]["bootstrap_servers"] == broker.bootstrap and logs[-1]["outage_s"] >= 3
    assert reminders <= reminders_allowed(logs[-1]["outage_s"])


@pytest.mark.parametrize(
    "after",
    [
        # before its first connection
        pytest.param(None, marks=pytest.mark.slow),
        # while it connects its admins and describes its topics
        pytest.param("event_loop_chosen", marks=pytest.mark.slow),
        "group_joining",  # while it joins the group, reads checkpoints and offsets
    ],
)
def test_a_broker_stopped_as_the_job_starts_is_waited_for(
    own_kafka_broker: ScriptBroker, tmp_path: Path, after: str | None
) -> None:
    bootstrap = own_kafka_broker.bootstrap
    n = 2_000
    job, out = tagging_job(bootstrap, tmp_path, n)
    run = Job(job, out, tmp_path / "job.log")
    if after is not None:
        wait_for(lambda: after in {e["event"] for e in run.events()}, 60, after, run.proc)
    own_kafka_broker.down()
    time.sleep(3)
    own_kafka_broker.up()
    wait_for(lambda: complete(bootstrap, out, n), 120, "every input's output", run.proc)
    assert run.stop() == 0
    events = run.events()
    names = [e["event"] for e in events]
    assert "job_failed" not in names
    check_a_handful(events)
    check_library_lines(run)


@pytest.mark.slow  # make test-slow
def test_a_broker_stopped_mid_run_is_ridden_out_with_a_handful_of_lines(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """An outage shorter than the group's session (less two heartbeats) goes unnoticed."""
    bootstrap = own_kafka_broker.bootstrap
    n = 20_000
    job, out = tagging_job(bootstrap, tmp_path, n, **{"job.coordinator.session.timeout.ms": 30000})
    # 0.5 ms per message keeps the job busy for about 10 s: the outage comes mid-run.
    run = Job(job, out, tmp_path / "job.log", delay_ms=0.5)
    wait_for(lambda: output_count(bootstrap, out) >= 2_000, 120, "2k outputs", run.proc)
    before_outage = output_count(bootstrap, out)
    own_kafka_broker.down()
    time.sleep(8)  # about 800 client log lines a run used to print for this
    own_kafka_broker.up()
    wait_for(lambda: complete(bootstrap, out, n), 180, "every input's output", run.proc)
    assert run.stop() == 0
    assert before_outage < n, "the outage should come while the job still has work"
    events = run.events()
    names = [e["event"] for e in events]
    assert names.count("broker_unreachable") == names.count("broker_reachable") == 1, names
    check_a_handful(events)
    check_library_lines(run)


# make test-slow: test_coordinator_cut_off holds the lease through a cut-off by default
@pytest.mark.slow
def test_an_outage_longer_than_the_session_holds_the_tasks_and_resumes_them_exactly(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """Longer than the group's session, an outage holds the group lease (the member cannot
    tell it from being cut off from the coordinator while others take its tasks): nothing is
    written and no message taken until the broker is back, whose coordinator acknowledges the
    member's heartbeats again; the tasks then go on where they were, every input's output
    written once."""
    bootstrap = own_kafka_broker.bootstrap
    n = 20_000
    job, out = tagging_job(bootstrap, tmp_path, n, **{"job.coordinator.session.timeout.ms": 6000})
    run = Job(job, out, tmp_path / "job.log", delay_ms=0.5)
    wait_for(lambda: output_count(bootstrap, out) >= 2_000, 120, "2k outputs", run.proc)
    own_kafka_broker.down()
    time.sleep(8)
    own_kafka_broker.up()
    wait_for(lambda: complete(bootstrap, out, n), 180, "every input's output", run.proc)
    assert run.stop() == 0
    names = [e["event"] for e in run.events()]
    assert "job_failed" not in names
    assert "lease_held" in names and "lease_resumed" in names, names
    assert not {"lease_lost", "task_fenced"} & set(names), names
    check_library_lines(run)


@pytest.mark.slow  # make test-slow
def test_an_outage_longer_than_the_connect_timeout_fails_the_held_job_and_a_restart_resumes(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """The lease holds the tasks while the coordinator is away, but a consumer whose brokers
    answered nothing for ``connect.timeout.ms`` gives up: past it the job fails (exit 1)
    without committing anything more, and a restart once the broker is back resumes from the
    checkpoints, every input's output written (at-least-once: once at least)."""
    bootstrap = own_kafka_broker.bootstrap
    n = 20_000
    job, out = tagging_job(
        bootstrap,
        tmp_path,
        n,
        **{
            "job.coordinator.session.timeout.ms": 6000,
            "systems.kafka.connect.timeout.ms": 10000,
        },
    )
    run = Job(job, out, tmp_path / "job.log", delay_ms=0.5)
    wait_for(lambda: output_count(bootstrap, out) >= 2_000, 120, "2k outputs", run.proc)
    own_kafka_broker.down()
    try:
        code = run.wait(60)
    finally:
        own_kafka_broker.up()
    assert code == 1, run.tail()
    events = run.events()
    names = [e["event"] for e in events]
    assert "lease_held" in names, names
    held = names.index("lease_held")
    assert "checkpoint_written" not in names[held:], names[held:]
    [failed] = [e for e in events if e["event"] == "job_failed"]
    assert "systems.kafka.connect.timeout.ms" in json.dumps(failed), failed
    # What the producers held is dropped, not waited for: the stop takes seconds at most
    # (each client's is cut at 5 s), without an error left behind by the client library.
    [task_failed] = [e for e in events if e["event"] == "task_failed"]
    assert seconds_between(task_failed, failed) < 10, run.tail()
    text = run.log.read_text()
    assert "never retrieved" not in text and "Exception in callback" not in text, run.tail()
    again = Job(job, out, tmp_path / "again.log")
    wait_for(lambda: complete_at_least_once(bootstrap, out, n), 180, "every output", again.proc)
    assert again.stop() == 0


@pytest.mark.slow  # make test-slow: 12 to 20 s, a broker stopped and started again
def test_a_stop_during_an_outage_ends_within_the_connect_timeout(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """docs/deploy.md, "Shutdown": with the brokers gone, a SIGTERM's final commit waits for
    them up to ``connect.timeout.ms``, then the job fails (exit 1), committing nothing more.
    Its flush had waited for ever (an idempotent producer never gives a batch up): only a
    second signal, or Kubernetes' SIGKILL, ended the process. The group's session outlasts
    the wait here: the bound, not a lost lease, ends it."""
    bootstrap = own_kafka_broker.bootstrap
    n = 200
    extra = {
        "task.commit.ms": 600_000,  # the last checkpoint is the stop's
        "systems.kafka.connect.timeout.ms": 3000,
        "job.coordinator.session.timeout.ms": 60_000,
    }
    job, out = tagging_job(bootstrap, tmp_path, n, **extra)
    run = Job(job, out, tmp_path / "job.log")
    wait_for(lambda: complete(bootstrap, out, n), 120, "every input's output", run.proc)
    own_kafka_broker.down()
    try:
        stopped_at = time.monotonic()
        code = run.stop(timeout=90)
        took = time.monotonic() - stopped_at
    finally:
        own_kafka_broker.up()
    assert code == 1, run.tail()
    assert took < 3 + 15, run.tail()  # the wait, then each client's stop cut at 5 s at most
    [failed] = [e for e in run.events() if e["event"] == "job_failed"]
    assert "got no answer within 3 s" in failed["error"], failed
    assert "connect.timeout.ms" in failed["error"], failed


def file_to_kafka_job(bootstrap: str, tmp_path: Path, n: int, **extra: Any) -> tuple[Path, str]:
    """A job file of kafka_jobs:TagThenHoldTheEnd over a file input of ``n`` lines (it ends)
    writing to a new Kafka topic, its checkpoints on Kafka; and that topic's name."""
    out = name("out")
    asyncio.run(create_topic(bootstrap, out, 1))
    (tmp_path / "files" / "in").mkdir(parents=True)
    (tmp_path / "files" / "in" / "0.jsonl").write_text("".join(f"{i}\n" for i in range(n)))
    cfg = {
        "job.name": "bounded-kafka-it",
        "job.id": uuid.uuid4().hex[:8],
        "task.class": "kafka_jobs:TagThenHoldTheEnd",
        "task.inputs": ["files.in"],
        "task.checkpoint.factory": "kafka",
        "systems.files.samza.factory": "file",
        "systems.files.path": str(tmp_path / "files"),
        "systems.kafka.samza.factory": "kafka",
        "systems.kafka.bootstrap.servers": bootstrap,
        **extra,
    }
    job = tmp_path / "job.yaml"
    job.write_text(json.dumps(cfg))
    return job, out


@pytest.mark.slow  # make test-slow: 30 to 40 s, a broker stopped and started again
def test_an_end_of_stream_commit_during_an_outage_fails_within_the_connect_timeout(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """A job whose bounded inputs all end while its brokers are away: the final commit waits
    for them up to ``connect.timeout.ms``, as a SIGTERM's does, then the job fails (exit 1)
    naming the task and the step, without ``task_ended`` or ``job_finished``; a rerun, the
    brokers back, finishes. The commit had waited for as long as the brokers were away: the
    job never ended."""
    bootstrap = own_kafka_broker.bootstrap
    n = 50
    extra = {"task.commit.ms": 100, "systems.kafka.connect.timeout.ms": 3000}
    job, out = file_to_kafka_job(bootstrap, tmp_path, n, **extra)
    ended, go = tmp_path / "ended", tmp_path / "go"
    env = {"SAMZAPY_TEST_ENDED": str(ended), "SAMZAPY_TEST_GO": str(go)}
    # 20 ms per message: periodic checkpoints are written before the end.
    run = Job(job, out, tmp_path / "job.log", delay_ms=20, env=env)
    wait_for(ended.exists, 60, "the end of the input", run.proc)
    wait_for(lambda: output_count(bootstrap, out) >= n, 30, "every input's output", run.proc)
    own_kafka_broker.down()
    try:
        go.touch()
        released_at = time.monotonic()
        code = run.wait(timeout=60)
        took = time.monotonic() - released_at
    finally:
        own_kafka_broker.up()
    assert code == 1, run.tail()
    assert took < 3 + 15, run.tail()  # the wait, then each client's stop cut at 5 s at most
    names = [e["event"] for e in run.events()]
    assert "task_ended" not in names and "job_finished" not in names, names
    [failed] = [e for e in run.events() if e["event"] == "job_failed"]
    assert "task 'Partition 0' could not commit after end-of-stream" in failed["error"], failed
    assert "got no answer within 3 s" in failed["error"], failed

    rerun = Job(job, out, tmp_path / "rerun.log", env=env)  # the brokers are back
    assert rerun.wait(timeout=120) == 0, rerun.tail()


def complete_at_least_once(bootstrap: str, out: str, n: int) -> bool:
    if output_count(bootstrap, out) < n:
        return False
    return {int(r["v"]) for r in outputs(bootstrap, out)} == set(range(n))
