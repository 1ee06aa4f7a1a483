"""A static member's clean stop says that it stays in the group (docs/deploy.md, "Failover":
a static member "keeps its place in the group while it is away"): its ``group_left`` names
its membership and until when the group keeps it, which is why ``samzapy checkpoint set``
still sees it as a live member."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_idle_member import assigned, of  # noqa: E402
from test_kafka_jobs import Job, create_topic, job_file, name, wait_for  # noqa: E402


@pytest.mark.timeout(120)
def test_a_static_members_stop_says_the_group_keeps_it_until_its_session_ends(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    source = name("static-leave")
    asyncio.run(create_topic(kafka_bootstrap, source, 1))
    job = job_file(
        tmp_path,
        kafka_bootstrap,
        source,
        **{"job.container.id": "pod-0", "job.coordinator.session.timeout.ms": 12000},
    )
    run = Job(job, name("static-leave-out"), tmp_path / "run.log")
    wait_for(lambda: assigned(run) == ["Partition 0"], 60, "its task", run.proc)
    assert run.stop() == 0
    (left,) = of(run, "group_left")
    assert left["membership"] == "static", json.dumps(left)
    assert "12000 ms" in left["member_until"] and "'pod-0'" in left["member_until"]
