"""The checkpointed input offsets in the job's Kafka consumer group, where Kafka's tools read
them, and the lag on the ``progress`` line; through `samzapy run` on the real broker.

For every coordinator and guarantee: while the job runs and after it stopped, the group's
committed offsets (what ``kafka-consumer-groups --describe`` and lag exporters read) equal the
last checkpoint's input offsets plus one (Kafka's committed offset is the next one to read);
under ``kafka-group`` the group shows the live container with its partitions; and the
``progress`` line's ``lag`` falls to 0 once the input is drained.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import (  # noqa: E402
    Job,
    checkpointed,
    create_topic,
    job_file,
    name,
    produce,
    wait_for,
)

PARTITIONS = 4
MESSAGES = 400


def group_id(job: Path) -> str:
    cfg = json.loads(job.read_text())
    return f"samzapy.{cfg['job.name']}.{cfg['job.id']}"


async def _group(bootstrap: str, group: str) -> tuple[dict[int, int], dict[str, list[int]]]:
    """The group's committed offsets by partition, and its members' assigned partitions."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
        described = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    members: dict[str, list[int]] = {}
    for response in described:
        # DescribeGroups v2: (error, group, state, protocol type, protocol, members), each
        # member (id, client id, host, metadata, assignment).
        for _, _, _, _, _, group_members in response.groups:
            for member_id, _, _, _, assigned in group_members:
                assignment = ConsumerProtocolMemberAssignment.decode(assigned)
                members[member_id] = sorted(p for _, ps in assignment.assignment for p in ps)
    return {tp.partition: meta.offset for tp, meta in committed.items()}, members


def group(bootstrap: str, job: Path) -> tuple[dict[int, int], dict[str, list[int]]]:
    return asyncio.run(_group(bootstrap, group_id(job)))


def next_offsets(bootstrap: str, job: Path, exactly_once: bool) -> dict[int, int]:
    return {p: o + 1 for p, o in checkpointed(bootstrap, job, exactly_once=exactly_once).items()}


def progress(run: Job) -> list[dict[str, Any]]:
    return [e for e in run.events() if e["event"] == "progress"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("coordinator", ["kafka-group", "static"])
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_the_group_holds_the_checkpointed_offsets_and_progress_shows_the_lag(
    kafka_bootstrap: str, tmp_path: Path, coordinator: str, guarantee: str
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, PARTITIONS))
    asyncio.run(create_topic(kafka_bootstrap, out, PARTITIONS))
    asyncio.run(
        produce(
            kafka_bootstrap,
            source,
            [(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode()) for i in range(MESSAGES)],
        )
    )
    exactly_once = guarantee == "exactly-once"
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "job.coordinator.factory": coordinator,
            "task.processing.guarantee": guarantee,
            "task.commit.ms": 300,
            "task.progress.interval.ms": 200,
            "job.coordinator.session.timeout.ms": 6000,
        },
    )
    run = Job(job, out, tmp_path / "job.log")
    wait_for(
        lambda: any(e["lag"] == 0 and e["processed"] >= MESSAGES for e in progress(run)),
        120,
        "the progress line to show the input drained (lag 0)",
        run.proc,
    )
    started = [e for e in run.events() if e["event"] == "container_started"]
    assert started and started[0]["group"] == group_id(job)
    lags = [e["lag"] for e in progress(run)]
    assert {"lag", "lag_max", "lag_max_partition"} <= set(progress(run)[-1])
    # Live: the group's offsets catch up with the checkpoints (they are copied after each).
    expected = {p: MESSAGES // PARTITIONS for p in range(PARTITIONS)}
    wait_for(
        lambda: next_offsets(kafka_bootstrap, job, exactly_once) == expected,
        60,
        "every message checkpointed",
        run.proc,
    )
    wait_for(
        lambda: group(kafka_bootstrap, job)[0] == expected, 30, "the group's offsets", run.proc
    )
    _, members = group(kafka_bootstrap, job)
    if coordinator == "kafka-group":
        assert len(members) == 1, members
        assert list(members.values()) == [list(range(PARTITIONS))]
    else:
        assert members == {}
    assert run.stop() == 0
    assert group(kafka_bootstrap, job)[0] == next_offsets(kafka_bootstrap, job, exactly_once)
    assert lags and lags[-1] == 0


@pytest.mark.timeout(120)
def test_a_job_starting_at_upcoming_has_no_lag_to_show(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source, out = name("in"), name("out")
    asyncio.run(create_topic(kafka_bootstrap, source, 2))
    asyncio.run(produce(kafka_bootstrap, source, [(i % 2, None, b"old") for i in range(100)]))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "systems.kafka.default.stream.samza.offset.default": "upcoming",
            "task.progress.interval.ms": 200,
        },
    )
    run = Job(job, out, tmp_path / "job.log")
    wait_for(lambda: len(progress(run)) >= 3, 60, "three progress lines", run.proc)
    assert [(e["processed"], e["lag"]) for e in progress(run)][-1] == (0, 0)
    asyncio.run(produce(kafka_bootstrap, source, [(0, None, b"new")]))
    wait_for(
        lambda: any(e["processed"] == 1 for e in progress(run)), 60, "the new message", run.proc
    )
    assert run.stop() == 0
    assert progress(run)[-1]["lag"] == 0
