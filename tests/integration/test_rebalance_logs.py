"""What an operator alerting on warnings sees of a normal rebalance: nothing.

Two `samzapy run` containers of one job on a real broker: the second joins (a rebalance),
then leaves on SIGTERM (another). aiokafka logs the course of each at warning ("Heartbeat
failed for group ... because it is rebalancing") and, at the first start of a group on a
broker, at error (the group coordinator not available yet); samzapy had made each a
warning-level ``library_log``, which paged the operator at every deploy. They are info now,
with aiokafka's own level kept in ``library_level``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import Job, create_topic, job_file, name, produce, wait_for  # noqa: E402

if TYPE_CHECKING:
    from conftest import ScriptBroker

pytestmark = pytest.mark.timeout(300)


def warnings(job: Job) -> list[dict[str, Any]]:
    return [e for e in job.events() if e["level"] in ("warning", "error", "critical")]


def rebalances(job: Job) -> int:
    return sum(e["event"] == "rebalance_completed" for e in job.events())


def test_a_first_start_and_a_container_joining_and_leaving_log_no_warning(
    own_kafka_broker: ScriptBroker, tmp_path: Path
) -> None:
    """On a broker of its own: the job is the first group of a fresh broker."""
    kafka_bootstrap = own_kafka_broker.bootstrap
    source = name("in")
    asyncio.run(create_topic(kafka_bootstrap, source, 4))
    asyncio.run(
        produce(kafka_bootstrap, source, [(i % 4, None, str(i).encode()) for i in range(40)])
    )
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{
            "job.name": f"rebalance-logs-{uuid.uuid4().hex[:6]}",
            "job.coordinator.session.timeout.ms": 6000,
        },
    )
    out = name("out")
    asyncio.run(create_topic(kafka_bootstrap, out, 4))
    first = Job(job, out, tmp_path / "first.log")
    wait_for(
        lambda: "tasks_assigned" in {e["event"] for e in first.events()}, 90, "first", first.proc
    )
    second = Job(job, out, tmp_path / "second.log")
    wait_for(lambda: rebalances(first) >= 1, 90, "the join's rebalance", first.proc)
    wait_for(
        lambda: {"tasks_assigned", "rebalance_completed"} & {e["event"] for e in second.events()},
        90,
        "the second's tasks",
        second.proc,
    )
    assert second.stop() == 0, second.tail()
    wait_for(lambda: rebalances(first) >= 2, 90, "the leave's rebalance", first.proc)
    assert first.stop() == 0, first.tail()
    noisy = [(e["event"], e.get("library_level"), e.get("message")) for e in warnings(first)]
    noisy += [(e["event"], e.get("library_level"), e.get("message")) for e in warnings(second)]
    assert noisy == []
    # They were logged, at info, aiokafka's level kept.
    routine = [
        e
        for e in first.events() + second.events()
        if e["event"] == "library_log" and e["library_level"] in ("warning", "error")
    ]
    assert routine and {e["level"] for e in routine} == {"info"}, routine
