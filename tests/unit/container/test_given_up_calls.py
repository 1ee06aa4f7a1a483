"""A sync task's call on the thread pool that outlasts ``task.shutdown.ms`` cannot be
cancelled: its thread runs on while its task is closed and committed, the checkpoint leaving
its message out. What it sends from then on is dropped (docs/configuration.md,
``task.shutdown.ms``): counted in ``sends-dropped`` and logged once as ``sends_dropped``,
whether the task left a container that goes on (a rebalance released it, the producers still
running) or the container stopped; the other tasks' sends, and sends from threads of the
task's own, are delivered as before."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs
from test_release import until

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream, TaskName
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.control import decode
from samzapy.system.inmemory import InMemoryBroker

OUT = SystemStream("mem", "out")


class Blocking(StreamTask):
    """Sends each message to ``out``; the call for the first message of partition 1 waits
    for ``release`` first, and then also sends from a thread of its own."""

    entered: ClassVar[threading.Event] = threading.Event()
    release: ClassVar[threading.Event] = threading.Event()
    returned: ClassVar[threading.Event] = threading.Event()
    helper = concurrent.futures.ThreadPoolExecutor(1)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        ssp = envelope.system_stream_partition
        first = ssp.partition == 1 and envelope.offset == "0"
        if first:
            Blocking.entered.set()
            Blocking.release.wait(20)
        collector.send(OutgoingMessageEnvelope(OUT, f"{ssp.partition}:{envelope.offset}"))
        if first:
            collector.send(OutgoingMessageEnvelope(OUT, f"{ssp.partition}:{envelope.offset}+"))
            # A thread the task made: not the call's own sends, delivered as ever.
            Blocking.helper.submit(collector.send, OutgoingMessageEnvelope(OUT, "helper")).result()
            Blocking.returned.set()


def config(tmp_path: Path, namespace: str, extra: str = "") -> Any:
    text = f"""
job.name: given-up
job.id: '{namespace}'
task.class: {__name__}:Blocking
task.inputs: [mem.in]
task.commit.ms: -1
task.shutdown.ms: 200
job.container.thread.pool.size: 2
task.checkpoint.factory: file
task.checkpoint.dir: {tmp_path / "checkpoints"}
systems.mem.samza.factory: memory
systems.mem.namespace: {namespace}
{extra}"""
    return resolve(load_config(text=text, env={}))


WRITER = """
streams.out.samza.system: mem
streams.out.samza.intermediate: true
streams.out.samza.msg.serde: json
"""


def written(broker: InMemoryBroker, framed: bool) -> list[str]:
    """What reached ``out``, sorted (a framed record's message, control records left out)."""
    records = [
        m for p in range(broker.partition_count("out") or 0) for _k, m in broker.records("out", p)
    ]
    if not framed:
        return sorted(records)
    decoded = [decode(r) for r in records]
    return sorted(json.loads(body) for kind, body in decoded if isinstance(body, bytes))


def checkpointed(tmp_path: Path, task: int) -> list[str]:
    path = tmp_path / "checkpoints" / f"Partition_{task}.json"
    return [o["offset"] for o in json.loads(path.read_text())["offsets"]]


def fresh() -> None:
    Blocking.entered, Blocking.release = threading.Event(), threading.Event()
    Blocking.returned = threading.Event()


async def let_the_call_return() -> None:
    Blocking.release.set()
    assert await asyncio.to_thread(Blocking.returned.wait, 10)
    await asyncio.sleep(0.1)  # what it handed to the loop has been routed by now


@pytest.mark.parametrize("framed", [False, True], ids=["plain", "writer with origins"])
async def test_a_released_tasks_given_up_call_sends_nothing_while_the_others_go_on(
    tmp_path: Path, framed: bool
) -> None:
    namespace = f"given-up-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    broker.create_stream("out", 1)
    for p in range(2):
        for i in range(3):
            broker.append("in", p, None, f"m{i}")
    fresh()
    container = SamzaContainer(config(tmp_path, namespace, WRITER if framed else ""))
    run = asyncio.ensure_future(container.run())
    try:
        assert await asyncio.to_thread(Blocking.entered.wait, 10)
        await until(lambda: container.processed == 3, "partition 0's messages")
        with capture_logs() as logs:
            assert await container.release([TaskName("Partition 1")])
            # The message of the call left out: nothing processed, resume at offset 0.
            assert checkpointed(tmp_path, 1) == ["-1"]
            await let_the_call_return()
            broker.append("in", 0, None, "m3")  # the other task goes on, its sends delivered
            await until(lambda: container.processed == 4, "partition 0's new message")
        assert not run.done()
    finally:
        container.request_stop("test done")
        Blocking.release.set()
        await run
    assert written(broker, framed) == ["0:0", "0:1", "0:2", "0:3", "helper"]
    dropped = [e for e in logs if e["event"] == "sends_dropped"]
    assert [(e["task"], e["stream"]) for e in dropped] == [("Partition 1", "mem.out")]
    assert container.metrics.snapshot()["container"]["sends-dropped"] == 2


async def test_a_stopped_containers_given_up_call_sends_nothing(tmp_path: Path) -> None:
    namespace = f"given-up-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("in", 2)
    broker.create_stream("out", 1)
    broker.append("in", 1, None, "m0")
    fresh()
    container = SamzaContainer(config(tmp_path, namespace))
    run = asyncio.ensure_future(container.run())
    try:
        assert await asyncio.to_thread(Blocking.entered.wait, 10)
        with capture_logs() as logs:
            container.request_stop("SIGTERM")
            await run
            assert checkpointed(tmp_path, 1) == ["-1"]  # resume at 0, the call's message
            await let_the_call_return()
    finally:
        Blocking.release.set()
        if not run.done():
            await run
    assert written(broker, framed=False) == ["helper"]
    assert [e["task"] for e in logs if e["event"] == "sends_dropped"] == ["Partition 1"]
