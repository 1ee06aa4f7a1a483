"""A task's old owner paused (SIGSTOP), not dead, while another container takes the task over.

docs/deploy.md, "Standby replicas": a standby's copy "is moved into place, but never over a
directory another process still holds open": the new owner "waits for the directory's lock"
and "once the old one has let go (woken and fenced, or killed) moves the copy in"; "without a
standby, the task's start waits on the same lock"; "the container's other tasks go on". And
"Failover": a static member whose session expired "stops its tasks at once without
committing, logs ``member_fenced`` and exits 1".

Two static members of a word count share one state directory (one host, or the one volume
``docker compose up --scale`` gives every replica), each running one task (and keeping a
standby of the other's). The owner of ``Partition 0`` is frozen in the middle of a pass, its
store open; its session runs out and the group gives the task to the other member. Woken, the
old owner is fenced and exits, and RocksDB's close writes into the directory by name (its
memtable, and the removal of files it does not know): a copy moved there meanwhile would lose
its table files. The store the new owner ends with must hold exactly the counts on disk (what
a restart keeps), and so must the changelog.

And with state directories of their own: the owner freezes just after handing a batch of
its changelog to its Kafka client; woken, it must not send it, under either guarantee.
"""

from __future__ import annotations

import asyncio
import signal
import struct
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from samzapy.api.system import TaskName
from samzapy.storage.rocksdb import RocksDBStoreFactory
from samzapy.storage.task_stores import task_directory_name

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, checkpointed, create_topic, name, read_all, wait_for  # noqa: E402
from test_scale_out import tasks_of  # noqa: E402
from test_standby import caught_up, processed  # noqa: E402
from test_state_jobs import STORE, changelog_state, produce_words, state_job_file  # noqa: E402

pytestmark = pytest.mark.timeout(180)

KEYS = 20_000
JOB_NAME = "paused-it"


def member_file(
    tmp_path: Path, bootstrap: str, source: str, changelog: str, job_id: str, n: int, **extra: Any
) -> Path:
    """Static member ``c<n>``; both members' stores in one state directory; a standby of
    each task (``job.standbytasks.replication.factor: 2``) unless ``extra`` says otherwise."""
    return state_job_file(
        tmp_path,
        bootstrap,
        source,
        changelog,
        **{
            "job.name": JOB_NAME,
            "job.id": job_id,
            "job.container.id": f"c{n}",
            "job.logged.store.base.dir": str(tmp_path / "state"),
            "job.coordinator.session.timeout.ms": 6000,
            "job.standbytasks.replication.factor": 2,
            "task.commit.ms": 300,
            **extra,
        },
    )


def locked(job: Job) -> bool:
    """Whether the container waits for ``Partition 0``'s store, held by another process."""
    return any(
        e["event"] in ("store_locked", "standby_not_moved") and e["task"] == "Partition 0"
        for e in job.events()
    )


def local_counts(tmp_path: Path, task: str) -> dict[str, int]:
    """What the task's store holds on disk (closed): word -> count."""
    directory = tmp_path / "state" / JOB_NAME / STORE / task_directory_name(TaskName(task))
    engine = RocksDBStoreFactory().create(STORE, TaskName(task), directory, {})
    try:
        return {k.decode(): struct.unpack(">q", v)[0] for k, v in engine.iterate(None, None)}
    finally:
        engine.close()


@pytest.mark.parametrize(
    "standby",
    [
        pytest.param(True, id="standby"),
        pytest.param(False, id="no-standby", marks=pytest.mark.slow),  # make test-slow
    ],
)
def test_a_paused_owner_keeps_its_store_until_it_lets_go(
    kafka_bootstrap: str, tmp_path: Path, standby: bool
) -> None:
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    first = {p: [f"w{p}-{i:05d}" for i in range(KEYS)] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, first))
    job_id = uuid.uuid4().hex[:8]
    factor = {"job.standbytasks.replication.factor": 2 if standby else 1}
    files = [
        member_file(tmp_path, kafka_bootstrap, source, changelog, job_id, n, **factor)
        for n in (0, 1)
    ]
    jobs = [Job(files[0], "unused", tmp_path / "c0.log")]
    ends = {p: KEYS - 1 for p in (0, 1)}
    wait_for(lambda: checkpointed(kafka_bootstrap, files[0]) == ends, 60, "the first pass")
    jobs.append(Job(files[1], "unused", tmp_path / "c1.log"))
    wait_for(
        lambda: sorted(len(tasks_of(j)) for j in jobs) == [1, 1], 60, "one task each", jobs[1].proc
    )
    n = 0 if "Partition 0" in tasks_of(jobs[0]) else 1
    owner, taker, taker_file = jobs[n], jobs[1 - n], files[1 - n]
    if standby:
        wait_for(lambda: caught_up(taker, "Partition 0"), 60, "a warm standby", taker.proc)
    # A second pass; the owner of Partition 0 is frozen in the middle of it, its store open
    # with writes no commit has flushed yet.
    second = {p: first[p][: KEYS // 2] for p in (0, 1)}
    before = processed(owner)
    asyncio.run(produce_words(kafka_bootstrap, source, second))
    wait_for(lambda: processed(owner) >= before + KEYS // 8, 60, "the second pass", owner.proc)
    owner.proc.send_signal(signal.SIGSTOP)
    try:
        # Its session runs out and the group gives Partition 0 to the other member.
        wait_for(
            lambda: locked(taker) or len(tasks_of(taker)) == 2 or taker.proc.poll() is not None,
            60,
            "the take-over",
        )
        time.sleep(2)  # the new owner runs the task meanwhile, if it can
    finally:
        owner.proc.send_signal(signal.SIGCONT)
    # Woken, the old owner is fenced and exits without committing, letting go of the store.
    assert owner.wait(60) == 1, owner.tail()
    assert any(e["event"] == "member_fenced" for e in owner.events()), owner.tail()
    # The other member goes on, through a third pass and its commits' snapshots, and stops
    # cleanly.
    third = {p: first[p][: KEYS // 10] for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, third))
    done = {p: KEYS + KEYS // 2 + KEYS // 10 - 1 for p in (0, 1)}
    wait_for(lambda: checkpointed(kafka_bootstrap, taker_file) == done, 60, "the end", taker.proc)
    assert taker.stop() == 0, taker.tail()
    words = [w for p in (0, 1) for w in first[p] + second[p] + third[p]]
    assert changelog_state(kafka_bootstrap, changelog) == Counter(words)
    # Each task's store on disk, which a restart keeps, holds exactly the counts.
    for p in (0, 1):
        assert local_counts(tmp_path, f"Partition {p}") == Counter(
            first[p] + second[p] + third[p]
        ), p
    # How: the new owner neither moved its standby's copy over the directory the frozen one
    # held nor opened it; it waited for the directory's lock, without failing (an exit would
    # have stopped its other task too), and took the task over once the old owner let go:
    # with the copy its standby had kept, or without one restoring from the changelog.
    events = taker.events()
    assert not [e for e in events if e["event"] == "job_failed"], taker.tail()
    waits = (
        ("standby_not_moved", "standby_moved_into_place")
        if standby
        else ("store_locked", "store_unlocked")
    )
    for event in waits:
        assert [e["task"] for e in events if e["event"] == event] == ["Partition 0"], event


# -- a batch inside the Kafka client at the pause -----------------------------------------------


def late_records(records: list[Any], frozen_at: float) -> list[Any]:
    """The records made before ``frozen_at`` (their create time) that landed after one made
    later: the frozen container's, written after another had taken its task over."""
    later = next((i for i, r in enumerate(records) if r.timestamp / 1000 > frozen_at), None)
    return [] if later is None else [r for r in records[later:] if r.timestamp / 1000 < frozen_at]


@pytest.mark.parametrize(
    "guarantee", ["at-least-once", pytest.param("exactly-once", marks=pytest.mark.slow)]
)
def test_a_batch_inside_the_kafka_client_when_the_owner_froze_is_never_written(
    kafka_bootstrap: str, tmp_path: Path, guarantee: str
) -> None:
    """docs/deploy.md, "Failover": a static member whose session expired (its event loop
    stood still) "stops its tasks at once without committing"; "what its producers still held
    is not written (``output_dropped``, at info, with the messages)". The owner of
    ``Partition 0`` freezes (``freezing_run.py``) just after handing a batch of its changelog
    to its Kafka client, before the client sent it; the other member (a state directory of
    its own: another host) takes the task over and counts the rest, each word twice. Woken,
    the old owner must not send that batch: its counts of 1, landing after the new owner's
    2s, would be what the next restore finds."""
    source, changelog = name("words"), name("counts-changelog")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    job_id = uuid.uuid4().hex[:8]
    files = [
        member_file(
            tmp_path,
            kafka_bootstrap,
            source,
            changelog,
            job_id,
            n,
            **{
                "job.logged.store.base.dir": str(tmp_path / f"state-{n}"),
                "job.standbytasks.replication.factor": 1,
                "task.processing.guarantee": guarantee,
            },
        )
        for n in (0, 1)
    ]
    command = [sys.executable, str(HERE / "freezing_run.py")]
    env = {"SAMZAPY_TEST_FREEZE_TOPIC": changelog}
    jobs = [
        Job(files[n], "unused", tmp_path / f"c{n}.log", env=env, command=command) for n in (0, 1)
    ]
    wait_for(lambda: sorted(len(tasks_of(j)) for j in jobs) == [1, 1], 60, "one task each")
    n = 0 if "Partition 0" in tasks_of(jobs[0]) else 1
    owner, taker = jobs[n], jobs[1 - n]
    owner.proc.send_signal(signal.SIGUSR1)  # armed: it freezes at its first changelog batch
    time.sleep(0.2)
    words = {p: [f"w{p}-{i:05d}" for i in range(KEYS)] * 2 for p in (0, 1)}
    asyncio.run(produce_words(kafka_bootstrap, source, words))
    eos = guarantee == "exactly-once"
    try:
        wait_for(lambda: any(e["event"] == "test_frozen" for e in owner.events()), 60, "the freeze")
        frozen_at = time.time()
        wait_for(lambda: len(tasks_of(taker)) == 2, 60, "the take-over", taker.proc)
        ends = {p: 2 * KEYS - 1 for p in (0, 1)}
        wait_for(
            lambda: checkpointed(kafka_bootstrap, files[0], exactly_once=eos) == ends,
            60,
            "every word counted",
            taker.proc,
        )
    finally:
        owner.proc.send_signal(signal.SIGCONT)
    assert owner.wait(60) == 1, owner.tail()
    events = owner.events()
    assert any(e["event"] == "member_fenced" for e in events), owner.tail()
    time.sleep(1)  # what the woken owner might still send has arrived
    assert taker.stop() == 0, taker.tail()
    records = asyncio.run(read_all(kafka_bootstrap, changelog, committed=eos))
    late = late_records([r for r in records if r.partition == 0], frozen_at)
    assert not late, f"{len(late)} changelog records of the frozen owner landed after the take-over"
    assert changelog_state(kafka_bootstrap, changelog, committed=eos) == Counter(
        w for ws in words.values() for w in ws
    )
    # What it held, the batch inside its client among it, it logged as dropped (under
    # exactly-once the broker may refuse the batch first: the new owner fenced its producer).
    dropped = sum(e["messages"] for e in events if e["event"] == "output_dropped")
    assert dropped > 0 or eos, owner.tail()
