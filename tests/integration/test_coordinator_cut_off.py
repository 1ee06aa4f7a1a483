"""A container cut off from its group's coordinator holds its tasks before they move.

Two ``kafka-group`` containers count words in a RocksDB store with a changelog, under
at-least-once. The test cuts one container's link to the group's coordinator while its
event loop, consumers and producers go on (``coordinator_cut.py``): the partial partition in
which a member the group evicted could go on processing and writing beside the container
that took its tasks. Its lease counts the heartbeats the coordinator acknowledged, so it
holds its tasks (no message taken, nothing written) before the group may have evicted it: it
processes nothing once the other container holds every task. Healed, it learns it was
evicted (its heartbeat refused, its member id dropped), stops those tasks without
committing, gets its share back, and the counts end exact. A second test holds the members
that wait in a join held up past the session, and resumes them. A static member cut off past
its session is fenced when it reaches the group again (``member_fenced``, exit 1), having
written nothing from its hold on. A hold longer than ``task.stall.timeout.ms`` is reported
by the stall watchdog (``task_stalled``, ``/healthz`` 503).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from samzapy.checkpoint.stream import checkpoint_stream_name

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_exactly_once import effective_checkpoints_never_move_back  # noqa: E402
from test_kafka_jobs import Job, checkpointed, create_topic, name, read_all, wait_for  # noqa: E402
from test_rebalance import RATE, Feeder, _at, runs  # noqa: E402
from test_scale_out import PARTITIONS as TASKS  # noqa: E402
from test_scale_out import http_get, job_file, tasks_of  # noqa: E402
from test_state_jobs import (  # noqa: E402
    PARTITIONS,
    by_partition,
    changelog_state,
    end_offsets,
    processed,
    produce_words,
    zipf_words,
)
from test_static_membership import Static, rebalances  # noqa: E402


def _holding(job: Job, count: int) -> dict[str, Any] | None:
    """The first assignment event that gave ``job`` ``count`` tasks."""
    for event in job.events():
        if (
            event["event"] in ("tasks_assigned", "rebalance_completed")
            and len(event["tasks"]) == count
        ):
            return event
    return None


@pytest.mark.timeout(300)
def test_a_member_cut_off_from_the_coordinator_holds_its_tasks_before_they_move(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    rng = random.Random(11)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    first, during, later = (zipf_words(rng, n) for n in (20_000, 20_000, 10_000))
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(first)))
    job_id = name("job")

    def container_job(n: int) -> Path:  # the same kafka-group job, a state directory each
        return job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n)

    job = container_job(0)
    session_s = json.loads(job.read_text())["job.coordinator.session.timeout.ms"] / 1000
    cut = Job(
        job,
        "unused",
        tmp_path / "cut.log",
        command=[sys.executable, str(HERE / "coordinator_cut.py")],
    )
    wait_for(lambda: processed(cut) >= 3000, 90, "the first container at work", cut.proc)
    other = Job(container_job(1), "unused", tmp_path / "other.log")
    wait_for(lambda: len(tasks_of(other)) == 2, 90, "a split of the tasks", other.proc)
    wait_for(lambda: len(tasks_of(cut)) == 2, 30, "the first container's half", cut.proc)

    cut.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: _holding(other, PARTITIONS) is not None, 60, "a take-over", other.proc)
    processed_at_take_over = processed(cut)
    # What arrives now is the other container's: the cut-off one must not process any of it.
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(during)))
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(
        lambda: checkpointed(kafka_bootstrap, job) == last, 120, "the take-over's end", other.proc
    )
    time.sleep(1.0)  # a progress interval or more: what the cut-off container did shows
    assert processed(cut) == processed_at_take_over, "the cut-off container processed on"

    healed_at = len(cut.events())
    cut.proc.send_signal(signal.SIGUSR2)
    wait_for(
        lambda: any(
            e["event"] in ("rebalance_completed", "tasks_assigned") and e["tasks_added"]
            for e in cut.events()[healed_at:]
        ),
        90,
        "the healed container's tasks again",
        cut.proc,
    )
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(later)))
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == last, 120, "the end", other.proc)
    progress = [e for e in cut.events()[healed_at:] if e["event"] == "progress"]
    assert max(e["processed"] for e in progress) > 0, "the healed container works again"
    assert other.stop() == 0
    assert cut.stop() == 0

    assert changelog_state(kafka_bootstrap, changelog) == Counter(first + during + later)
    effective_checkpoints_never_move_back(kafka_bootstrap, job)
    events = cut.events()
    held = next(e for e in events if e["event"] == "lease_held")
    assert "acknowledged no heartbeat" in held["cause"]
    assert held["unheard_s"] >= session_s - 1.0
    take_over = _holding(other, PARTITIONS)
    assert take_over is not None
    assert _at(held) < _at(take_over), "the tasks ran in two containers at once"
    # Healed, it learns it was evicted (the group refuses its heartbeat: aiokafka drops its
    # member id, seen by a tick or by the assignment under the new one): its held tasks
    # stop uncommitted.
    (lost,) = [e for e in events if e["event"] == "lease_lost"]
    assert "member id" in lost["reason"] and _at(lost) > _at(take_over)
    assert "lease_resumed" not in [e["event"] for e in events]
    assert any(e["event"] == "task_fenced" for e in events)
    # The other container ran the tasks it took in a share of their own beside its first:
    # still one progress line per interval, over all four, its count only growing.
    lines = [e for e in other.events() if e["event"] == "progress"]
    counts = [e["processed"] for e in lines]
    assert counts == sorted(counts), "one count per process, not one per share"
    assert max(e["tasks_running"] for e in lines) == PARTITIONS
    assert counts[-1] >= len(during), "what it processed after the take-over alone"


@pytest.mark.slow  # make test-slow
@pytest.mark.timeout(300)
def test_a_join_held_up_past_the_session_holds_the_waiting_members_and_resumes_them(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A rebalance that waits for a member draining a slow call (its release of a task that
    moves) keeps the others in their join, unheard, for longer than the session: their
    leases are held, then resumed by the assignment under their member ids. No task restarts
    from its checkpoint, and the counts end exact."""
    rng = random.Random(7)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    first, later = zipf_words(rng, 4000), zipf_words(rng, 4000)
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(first)))
    job_id = name("job")

    def container_job(n: int) -> Path:
        path = job_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n)
        cfg = json.loads(path.read_text())
        cfg.update({"task.class": "state_jobs:SlowWordCount", "app.slow.s": 20})
        path.write_text(json.dumps(cfg))
        return path

    files = [container_job(n) for n in range(4)]
    jobs = [Job(files[n], "unused", tmp_path / f"c{n}.log") for n in range(2)]
    wait_for(lambda: [len(tasks_of(j)) for j in jobs] == [2, 2], 90, "two containers at work")
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == last, 90, "the first words")
    # A 20 s call on every task: whichever task the next join moves, its release waits.
    slow = {p: [f"slow-{p}"] for p in range(PARTITIONS)}
    asyncio.run(produce_words(kafka_bootstrap, source, slow))
    time.sleep(1.0)
    jobs.append(Job(files[2], "unused", tmp_path / "c2.log"))
    wait_for(lambda: _holding(jobs[2], 0) is not None, 60, "the third's first assignment")
    # A fourth joins while that release is under way: the rebalance waits for it.
    jobs.append(Job(files[3], "unused", tmp_path / "c3.log"))
    wait_for(lambda: all(len(tasks_of(j)) == 1 for j in jobs), 120, "a task each")
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(later)))
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == last, 120, "every word")
    for job in jobs:
        job.proc.terminate()
    assert [job.wait(60) for job in jobs] == [0, 0, 0, 0]

    assert changelog_state(kafka_bootstrap, changelog) == Counter(
        first + later + [w for ws in slow.values() for w in ws]
    )
    effective_checkpoints_never_move_back(kafka_bootstrap, files[0])
    names = [e["event"] for j in jobs for e in j.events()]
    assert "lease_held" in names and "lease_resumed" in names, "no join was held up"
    assert not {"lease_lost", "task_fenced", "job_failed"} & set(names), names
    held = [e for j in jobs for e in j.events() if e["event"] == "lease_held"]
    assert all("acknowledged no heartbeat" in e["cause"] for e in held), held


@pytest.mark.slow  # test_lease holds the rule by default; this is the broker's side
@pytest.mark.timeout(300)
def test_a_stop_while_the_lease_holds_gives_the_tasks_up_without_committing(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Failover": a hold pauses the tasks while the coordinator is away, and
    "a stop requested meanwhile (SIGTERM) gives them up without committing" (where a stop
    otherwise commits). No commit falls due before it: the next run processes every word
    again, and the counts end exact."""
    rng = random.Random(13)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    first, during = zipf_words(rng, 20_000), zipf_words(rng, 5_000)
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(first)))
    job = job_file(tmp_path, kafka_bootstrap, source, changelog, name("job"), 0)
    job.write_text(json.dumps({**json.loads(job.read_text()), "task.commit.ms": 120_000}))
    command = [sys.executable, str(HERE / "coordinator_cut.py")]
    cut = Job(job, "unused", tmp_path / "cut.log", command=command)
    wait_for(lambda: processed(cut) >= len(first), 90, "the container at work", cut.proc)
    cut.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: any(e["event"] == "lease_held" for e in cut.events()), 60, "a hold", cut.proc)
    # Input waits meanwhile; the held container takes none of it.
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(during)))
    time.sleep(1.0)
    stopped_at = time.monotonic()
    assert cut.stop() == 0, cut.tail()
    assert time.monotonic() - stopped_at < 20, "the stop waited for the coordinator"
    assert processed(cut) == len(first)
    assert checkpointed(kafka_bootstrap, job) == {}, "a checkpoint written at the stop"
    events = [e["event"] for e in cut.events()]
    assert "lease_resumed" not in events and "job_failed" not in events, events

    # The next run (the coordinator reachable) starts over, from no checkpoint.
    again = Job(job, "unused", tmp_path / "again.log")
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    wait_for(lambda: processed(again) >= len(first) + len(during), 120, "every word", again.proc)
    assert again.stop() == 0
    assert checkpointed(kafka_bootstrap, job) == {p: end - 1 for p, end in ends.items()}
    assert processed(again) == len(first) + len(during)
    assert changelog_state(kafka_bootstrap, changelog) == Counter(first + during)


def _checkpoint_records(bootstrap: str, job: Path) -> list[tuple[str, float, int]]:
    """Every record of the job's checkpoint stream: (task, created at (s), owner epoch)."""
    cfg = json.loads(job.read_text())
    topic = checkpoint_stream_name(cfg["job.name"], cfg["job.id"])
    return [
        (
            record.key.decode(),
            record.timestamp / 1000,
            json.loads(record.value).get("extra", {}).get("epoch", 0),
        )
        for record in asyncio.run(read_all(bootstrap, topic))
        if record.value
    ]


# make test-slow: test_static_membership fences a member whose session expired by default
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_static_member_evicted_while_cut_off_is_fenced_when_it_reaches_the_group_again(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Failover": a static member cut off from the coordinator for longer
    than its session holds its tasks (``lease_held``) before the group evicts it, and the
    other member takes them over; healed, it learns the group evicted it: it is fenced
    (``member_fenced``), exits 1 and does not rejoin. It wrote nothing after the hold began:
    no output, no checkpoint (every checkpoint of its tasks from then on is of the newer
    owner's epoch); the counts end exact."""
    session_s = 6.0
    static = Static(kafka_bootstrap, tmp_path, session_ms=int(session_s * 1000))
    feeder = Feeder(kafka_bootstrap, static.source, zipf_words(random.Random(17), RATE * 60))
    feeder.start()
    jobs = [static.start(0, "c0")]
    try:
        cut = Job(
            static.file(1, "cut"),
            "unused",
            tmp_path / "cut.log",
            command=[sys.executable, str(HERE / "coordinator_cut.py")],
        )
        wait_for(
            lambda: sorted(len(tasks_of(j)) for j in (jobs[0], cut)) == [6, 6], 90, "two members"
        )
        time.sleep(2)  # a few commits of the cut member's tasks
        cut_tasks = tasks_of(cut)
        cut_at = time.time()
        cut.proc.send_signal(signal.SIGUSR1)
        wait_for(lambda: len(tasks_of(jobs[0])) == TASKS, 60, "the take-over", jobs[0].proc)
        time.sleep(2)  # the other member runs the cut member's tasks a while
        assert cut.proc.poll() is None, cut.tail()
        settled = rebalances(jobs[0])
        healed_at = time.monotonic()
        cut.proc.send_signal(signal.SIGUSR2)
        assert cut.wait(60) == 1, cut.tail()
        fenced_s = time.monotonic() - healed_at
        time.sleep(2)  # a rejoin would rebalance the other member meanwhile
        assert rebalances(jobs[0]) == settled, "the fenced member rejoined"
    finally:
        words = static.finish(feeder, jobs)  # every word checkpointed, the counts exact
    assert len(words) > 0
    effective_checkpoints_never_move_back(kafka_bootstrap, static.files[0])

    events = cut.events()
    names = [e["event"] for e in events]
    held = next(e for e in events if e["event"] == "lease_held")
    assert "acknowledged no heartbeat" in held["cause"], held
    assert held["unheard_s"] >= session_s - 1.0, held
    take_over = next(
        e
        for e in jobs[0].events()
        if e["event"] == "rebalance_completed" and len(e["tasks"]) == TASKS and _at(e) > cut_at
    )
    assert _at(held) < _at(take_over), "the tasks ran in two containers at once"
    fenced = [e for e in events if e["event"] == "member_fenced"]
    assert fenced and fenced[0]["container_id"] == "samzapy-1", cut.tail()
    assert _at(fenced[0]) > _at(take_over)
    assert fenced_s < 30, f"fenced {fenced_s:.1f} s after the heal"
    assert "lease_resumed" not in names and "job_finished" not in names, names
    # It does not rejoin: no assignment after the one the cut interrupted.
    assert tasks_of(cut) == cut_tasks
    # Its tasks took no message from the hold on (a progress interval after it, its count
    # stands still).
    counts = [e["processed"] for e in events if e["event"] == "progress" and _at(e) > _at(held)]
    assert len(counts) > 5 and len(set(counts[1:])) == 1, counts
    # Nothing written from the hold on: no output it made...
    late = [
        (p, ts)
        for p, records in static.output().items()
        for ts, tag, _, _ in records
        if tag == "cut" and ts / 1000 >= _at(held)
    ]
    assert not late, f"{len(late)} records made by the cut-off member while it held its tasks"
    # ...and no checkpoint: each of its tasks had its checkpoints (of its owner epoch) before
    # the hold, and after it only those of a newer owner, the other member.
    records = _checkpoint_records(kafka_bootstrap, static.files[0])
    for task in cut_tasks:
        before = [epoch for t, ts, epoch in records if t == task and ts < _at(held)]
        after = [epoch for t, ts, epoch in records if t == task and ts >= _at(held)]
        assert before and after, (task, before, after)
        assert min(after) > max(before), f"{task}: a checkpoint of the cut-off member's epoch"
    # The other member ran every task at the end.
    for p, output in static.output().items():
        assert runs([tag for _, tag, _, _ in output])[-1:] == ["c0"], p


@pytest.mark.timeout(300)
def test_a_hold_longer_than_the_stall_timeout_is_reported_by_the_stall_watchdog(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """docs/deploy.md, "Failover": "a hold longer than ``task.stall.timeout.ms`` is reported by
    the stall watchdog (``task_stalled``, ``/healthz`` 503, so a liveness probe restarts the
    container)". The container is cut off from the coordinator while input waits for its
    held tasks: once the hold outlasts the stall timeout, each task is reported stalled,
    waiting on the lease, and ``/healthz`` answers 503 naming them, the hold still on.
    Healed, the container drops the held tasks (the group evicted it), and their stalls with
    them: ``/healthz`` answers 200 while it runs them anew."""
    stall_s = 2.0
    rng = random.Random(19)
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    first, during = zipf_words(rng, 5_000), zipf_words(rng, 5_000)
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(first)))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    job = job_file(tmp_path, kafka_bootstrap, source, changelog, name("job"), 0)
    cfg = json.loads(job.read_text())
    cfg.update(
        {
            "task.stall.timeout.ms": int(stall_s * 1000),
            "metrics.reporters": ["prometheus"],
            "metrics.prometheus.port": port,
        }
    )
    job.write_text(json.dumps(cfg))
    command = [sys.executable, str(HERE / "coordinator_cut.py")]
    cut = Job(job, "unused", tmp_path / "cut.log", command=command)
    wait_for(lambda: processed(cut) >= len(first), 90, "the container at work", cut.proc)
    assert http_get(port, "/healthz")[0] == 200

    cut.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: any(e["event"] == "lease_held" for e in cut.events()), 60, "a hold", cut.proc)
    # Input waits for the held tasks meanwhile.
    produced_at = time.time()
    asyncio.run(produce_words(kafka_bootstrap, source, by_partition(during)))

    def stalled() -> list[dict[str, Any]]:
        return [e for e in cut.events() if e["event"] == "task_stalled"]

    wait_for(lambda: len(stalled()) == PARTITIONS, 30, "every held task reported", cut.proc)
    status, body = http_get(port, "/healthz")
    events = cut.events()
    names = [e["event"] for e in events]
    assert not {"lease_resumed", "lease_lost"} & set(names), "the hold ended before the report"
    assert processed(cut) == len(first), "the held container processed on"
    assert status == 503, (status, body)
    problems = json.loads(body)["problems"]
    assert sorted(problems) == [f"stalled:Partition {p}" for p in range(PARTITIONS)], problems
    held = next(e for e in events if e["event"] == "lease_held")
    for event in stalled():
        # Counted from the watchdog's last sight of the task with nothing to do, at most a
        # check interval (a quarter of the timeout) before the input came.
        assert _at(event) - produced_at >= stall_s * 3 / 4 and _at(event) > _at(held), event
        assert event["reason"].startswith("completed nothing for"), event
        assert "lease_held" in event["waiting_on"], event
        assert problems[f"stalled:{event['task']}"]["waiting_on"] == event["waiting_on"]

    # Healed, the container (evicted meanwhile) drops the held tasks and gets them again, and
    # nothing is lost. The stalls left with the tasks that stalled: /healthz no longer
    # reports them (docs/deploy.md, "Health and the stall watchdog": a stall is cleared when
    # its task leaves the container, dropped as the group evicted it).
    cut.proc.send_signal(signal.SIGUSR2)
    ends = asyncio.run(end_offsets(kafka_bootstrap, source))
    last = {p: end - 1 for p, end in ends.items()}
    wait_for(lambda: checkpointed(kafka_bootstrap, job) == last, 90, "every word", cut.proc)
    assert {"lease_lost", "task_fenced"} <= {e["event"] for e in cut.events()}
    assert http_get(port, "/healthz") == (200, '{"status": "ok"}\n')
    assert cut.stop() == 0, cut.tail()
    assert changelog_state(kafka_bootstrap, changelog) == Counter(first + during)
