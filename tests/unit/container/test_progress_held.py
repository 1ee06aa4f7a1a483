"""The ``progress`` line while the group lease holds the tasks (a broker outage, the group's
coordinator away): ``tasks_held`` counts the tasks held back, so a line that says the tasks
run and have no lag does not pass for a container at work (docs/deploy.md)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from leases import SwitchedLease
from structlog.testing import capture_logs

from samzapy import StreamTask
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.system.inmemory import InMemoryBroker


class Nothing(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


async def next_progress(logs: list[dict[str, Any]]) -> dict[str, Any]:
    seen = len(logs)
    for _ in range(200):
        lines = [e for e in logs[seen:] if e["event"] == "progress"]
        if lines:
            return lines[0]
        await asyncio.sleep(0.01)
    raise AssertionError("no progress line")


async def test_the_progress_line_counts_the_tasks_the_lease_holds() -> None:
    namespace = f"held-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    text = f"""
job.name: held
task.class: {__name__}:Nothing
task.inputs: [mem.in]
task.progress.interval.ms: 100
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
"""
    lease = SwitchedLease()
    container = SamzaContainer(resolve(load_config(text=text, env={})), lease=lease)
    with capture_logs() as logs:
        ran = asyncio.ensure_future(container.run())
        try:
            working = await next_progress(logs)
            assert (working["tasks_running"], working["tasks_held"]) == (2, 0)
            lease.hold()
            held = await next_progress(logs)
            assert (held["tasks_running"], held["tasks_held"], held["lag"]) == (2, 2, 0)
            lease.resume()
            resumed = await next_progress(logs)
            assert resumed["tasks_held"] == 0
        finally:
            container.request_stop("done")
            await ran
