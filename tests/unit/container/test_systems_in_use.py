"""A system the job is not known to use is connected by the first send to it, not before."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import OutgoingMessageEnvelope, StreamTask, SystemStream
from samzapy.api.errors import TaskFencedError
from samzapy.config import load_config, resolve
from samzapy.container.systems import Systems, used_systems
from samzapy.testing import TestRunner

ELSEWHERE = SystemStream("elsewhere", "copies")


class CopyElsewhere(StreamTask):
    def process(self, env: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(ELSEWHERE, env.message))


def test_the_first_send_to_a_system_not_in_use_connects_it() -> None:
    runner = TestRunner(CopyElsewhere).add_input("in", {0: ["a", "b", "c"]})
    runner.add_config("systems.elsewhere.samza.factory", "memory")
    runner.add_config("systems.elsewhere.namespace", runner.namespace)  # the runner's streams
    with capture_logs() as logs:
        result = runner.run()
    assert result.outputs("copies") == {0: ["a", "b", "c"]}
    connected = [e for e in logs if e["event"] == "system_connected"]
    assert [e["system"] for e in connected] == ["elsewhere"]


def test_the_systems_in_use_are_the_inputs_declared_streams_changelogs_and_dead_letters() -> None:
    config = resolve(
        load_config(
            text="""
job.name: j
task.class: x:Y
task.inputs: [a.in]
task.dead.letter.stream: d.dead
task.drop.process.errors: true
systems:
  a: {samza.factory: memory}
  b: {samza.factory: memory}
  c: {samza.factory: memory}
  d: {samza.factory: memory}
  e: {samza.factory: memory}
  unused: {samza.factory: kafka, bootstrap.servers: "127.0.0.1:1"}
streams.declared.samza.system: b
stores.s: {factory: inmemory, changelog: c.s-changelog}
"""
        )
    )
    assert used_systems(config) == ["a", "b", "c", "d"]
    systems = Systems(config)
    assert sorted(systems.factories) == ["a", "b", "c", "d", "e", "unused"]
    assert sorted(systems.admins) == sorted(systems.producers) == ["a", "b", "c", "d"]


async def test_a_producer_fenced_at_stop_is_no_failure_of_the_stop() -> None:
    """A fenced container's producer cannot flush what it held: logged as such (info), not as
    a stop that failed (a warning an operator would chase); another part's failure still is."""
    config = resolve(
        load_config(
            text="job.name: j\ntask.class: x:Y\ntask.inputs: [a.in]\n"
            "systems.a.samza.factory: memory\n"
        )
    )
    systems = Systems(config)

    async def fenced() -> None:
        raise TaskFencedError("not written to a.out: the container may have lost its tasks")

    async def broken() -> None:
        raise OSError("socket closed")

    systems.producers["a"].stop = fenced  # type: ignore[method-assign]
    systems.admins["a"].stop = broken  # type: ignore[method-assign]
    with capture_logs() as logs:
        await systems.stop()
    events = {e["event"]: e for e in logs}
    assert events["system_stopped_fenced"]["log_level"] == "info"
    assert events["system_stopped_fenced"]["part"] == "producer"
    assert events["system_stop_failed"]["part"] == "admin"


async def test_a_system_still_connecting_at_the_stop_stops_connecting_before_its_stop() -> None:
    """A first send to a system as the container stops: the stop cancels the connecting start
    before it stops the system's parts, so no start opens connections after its stop (a stop
    that waited on it would wait as long as the brokers do)."""
    config = resolve(
        load_config(
            text="job.name: j\ntask.class: x:Y\ntask.inputs: [a.in]\n"
            "systems.a.samza.factory: memory\nsystems.b.samza.factory: memory\n"
        )
    )
    systems = Systems(config)
    happened: list[str] = []
    started = asyncio.Event()

    async def start_slowly() -> None:
        started.set()
        try:
            await asyncio.sleep(60)  # a broker that does not answer
        except asyncio.CancelledError:
            happened.append("start cancelled")
            raise
        happened.append("started")

    async def stop() -> None:
        happened.append("stopped")

    add = systems._add

    def add_slow(name: str) -> None:
        add(name)
        systems.admins[name].start = start_slowly  # type: ignore[method-assign]
        systems.admins[name].stop = stop  # type: ignore[method-assign]

    systems._add = add_slow  # type: ignore[method-assign]
    connecting = asyncio.ensure_future(systems.connect("b"))
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.wait_for(systems.stop(), 5)
    assert happened == ["start cancelled", "stopped"]
    with pytest.raises(asyncio.CancelledError):
        await connecting
