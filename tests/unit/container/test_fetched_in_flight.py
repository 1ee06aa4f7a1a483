"""A pooled sync task's call given up at a stop (it outlasted ``task.shutdown.ms`` and still
runs on the thread pool) keeps its message in flight: the stop's commit gives the consumer
group no position past it, though its queue is empty (``fetched_positions``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.system import SystemStreamPartition, TaskName
from samzapy.checkpoint.offsets import OffsetTracker
from samzapy.container.commit import fetched_positions
from samzapy.container.inputs import InputQueue, TaskInputs
from samzapy.container.slots import SlotContext, SlotState, pool_slot
from samzapy.metrics.registry import Timer

IN = SystemStreamPartition("kafka", "in", 0)


class Position:
    """A consumer that has handed over everything up to offset 8."""

    def fetch_offset(self, ssp: SystemStreamPartition) -> int | None:
        return 8


async def test_a_call_given_up_at_a_stop_keeps_its_message_from_the_group() -> None:
    entered, release = threading.Event(), threading.Event()

    def process(envelope: Any, collector: Any, coordinator: Any) -> None:
        entered.set()
        release.wait(10)

    queue = InputQueue(IN, 10)
    queue.queue.append(IncomingMessageEnvelope(IN, "7", None, b"m"))
    tracker = OffsetTracker("6")

    async def barrier() -> bool:
        return True

    with concurrent.futures.ThreadPoolExecutor(1) as executor:
        ctx = SlotContext(
            name=TaskName("t"),
            state=SlotState(),
            inputs=TaskInputs([queue], space_freed=lambda: None),
            trackers={IN: tracker},
            collector=None,  # type: ignore[arg-type]
            coordinator=None,  # type: ignore[arg-type]
            latency=Timer(),
            clock=None,  # type: ignore[arg-type]
            backpressure=lambda: None,
            barrier=barrier,
            on_control=lambda env: None,
            fail=lambda exc: None,
            close_iterators=None,
            executor=executor,
            track_call_starts=False,
        )
        slot = asyncio.get_running_loop().create_task(pool_slot(ctx, process))
        try:
            assert await asyncio.to_thread(entered.wait, 10)
            slot.cancel()  # the stop gives the call up
            await asyncio.gather(slot, return_exceptions=True)
            readers = [(IN, Position(), tracker, queue)]
            fetched = fetched_positions(readers)  # type: ignore[arg-type]
            assert not queue.queue and tracker.last_processed == "6"
            assert fetched() == {}
        finally:
            release.set()
