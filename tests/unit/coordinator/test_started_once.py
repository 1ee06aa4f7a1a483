"""A process logs container_started and a stop's stop_requested once, whatever the
rebalances: under kafka-group each assignment's new tasks start in a container of their own
(a share), and the tasks they add are rebalance_completed's tasks_added, not another start of
the process; a SIGTERM stops every share, as one stop."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from coordinator_fakes import Members
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.config import load_config, resolve
from samzapy.coordinator.job_runner import JobRunner
from samzapy.system.inmemory import InMemoryBroker


class Idle(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


def _runner() -> JobRunner:
    namespace = f"once-{uuid.uuid4().hex[:8]}"
    InMemoryBroker.for_namespace(namespace).create_stream("in", 2)
    cfg = resolve(
        load_config(
            text=(
                f"job.name: once\ntask.class: {__name__}:Idle\ntask.inputs: [mem.in]\n"
                f"systems.mem.samza.factory: memory\nsystems.mem.namespace: {namespace}\n"
            ),
            env={},
        )
    )
    return JobRunner(cfg)


async def test_a_task_a_rebalance_adds_does_not_log_a_second_container_started() -> None:
    runner = _runner()
    members = Members()
    with capture_logs() as logs:
        await asyncio.wait_for(runner._take(members, [0], {}), 10)
        await runner._on_rebalance()
        await asyncio.wait_for(runner._take(members, [0, 1], {}), 10)  # task 1 comes
        await asyncio.wait_for(runner._shares.stop("test"), 10)
    started = [e for e in logs if e["event"] == "container_started"]
    assert [e["task_names"] for e in started] == [["Partition 0"]]
    (added,) = [e for e in logs if e["event"] == "rebalance_completed"]
    assert added["tasks_added"] == ["Partition 1"]


async def test_a_stop_of_a_process_with_two_shares_is_logged_once() -> None:
    runner = _runner()
    members = Members()
    await asyncio.wait_for(runner._take(members, [0], {}), 10)
    await runner._on_rebalance()
    await asyncio.wait_for(runner._take(members, [0, 1], {}), 10)  # a second share
    assert len(runner._shares.shares) == 2
    with capture_logs() as logs:
        runner.request_stop("SIGTERM")
        await asyncio.wait_for(runner._shares.stop("test"), 10)
    stops = [e for e in logs if e["event"] == "stop_requested"]
    assert [e["reason"] for e in stops] == ["SIGTERM"]
