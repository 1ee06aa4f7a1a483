"""unless_stopped: a start-up step that a stop request cuts short; a container asked to stop
while it starts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any, ClassVar

import pytest

from samzapy import InitableTask, StreamTask
from samzapy.config import load_config, resolve
from samzapy.container.container import SamzaContainer
from samzapy.container.startup import unless_stopped
from samzapy.system.inmemory import InMemoryBroker


async def test_the_step_s_result_when_it_ends_first() -> None:
    async def step() -> int:
        await asyncio.sleep(0)
        return 7

    assert await unless_stopped(step(), asyncio.Event()) == 7


async def test_none_and_the_step_cancelled_when_the_stop_comes_first() -> None:
    stopped, cancelled = asyncio.Event(), asyncio.Event()

    async def step() -> int:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return 7

    asyncio.get_running_loop().call_later(0.01, stopped.set)
    assert await unless_stopped(step(), stopped) is None
    assert cancelled.is_set()


async def test_a_stop_requested_before_does_not_run_the_step_to_its_end() -> None:
    stopped = asyncio.Event()
    stopped.set()
    ran_to_end = False

    async def step() -> None:
        nonlocal ran_to_end
        await asyncio.sleep(60)
        ran_to_end = True

    assert await unless_stopped(step(), stopped) is None
    assert not ran_to_end


async def test_the_step_s_failure_is_raised() -> None:
    async def step() -> None:
        raise ValueError("broker refused")

    with pytest.raises(ValueError, match="broker refused"):
        await unless_stopped(step(), asyncio.Event())


async def test_cancelling_the_caller_cancels_the_step() -> None:
    cancelled = asyncio.Event()

    async def step() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    caller = asyncio.ensure_future(unless_stopped(step(), asyncio.Event()))
    await asyncio.sleep(0.01)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert cancelled.is_set()


async def test_a_step_that_cancelled_itself_is_not_taken_for_a_stop() -> None:
    async def step() -> None:
        raise asyncio.CancelledError  # a client's own cancellation leaking out

    with pytest.raises(asyncio.CancelledError):
        await unless_stopped(step(), asyncio.Event())


# -- a container asked to stop while it starts its tasks -----------------------------------------


class StopsInInit(StreamTask, InitableTask):
    """Its init asks the container to stop, as a SIGTERM arriving then would."""

    container: ClassVar[SamzaContainer | None] = None

    def init(self, context: Any) -> None:
        assert StopsInInit.container is not None
        StopsInInit.container.request_stop("SIGTERM")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


async def test_a_stop_asked_while_the_tasks_start_leaves_the_container_not_ready() -> None:
    """/readyz answers 503 from a stop on (docs/deploy.md): the end of the start-up does not
    make the draining container ready again."""
    namespace = f"stop-in-init-{uuid.uuid4().hex[:8]}"
    InMemoryBroker.for_namespace(namespace).create_stream("in", 1)
    config = resolve(
        load_config(
            text=(
                f"job.name: j\njob.id: '{namespace}'\ntask.class: {__name__}:StopsInInit\n"
                f"task.inputs: [m.in]\nsystems.m.samza.factory: memory\n"
                f"systems.m.namespace: {namespace}\n"
            ),
            env={},
        )
    )
    container = StopsInInit.container = SamzaContainer(config)
    await asyncio.wait_for(container.run(), 10)
    assert not container.health.ready
