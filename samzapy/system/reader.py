"""Reading one partition from an offset up to a known end, through the system ports.

Restoring a store from its changelog and reading a checkpoint stream both read a partition
from some offset up to the offset it had reached when they started (its ``upcoming`` offset),
with a consumer of their own that reads only what committed transactions wrote (samzapy's own
streams are written in transactions under exactly-once processing). Aborted records and
transaction markers take offsets but are never read: reading is done once the consumer's
position has passed the end, whether or not a record at the end's last offset was seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemFactory

_BATCH = 10_000
#: How long one poll waits. Short: a partition whose last offsets are transaction markers
#: (never delivered as records) is seen to be at its end only from the consumer's position
#: after a poll that returned nothing, so each read of such a partition ends up to this late.
_POLL_TIMEOUT_S = 0.05


async def read_partition(
    factory: SystemFactory,
    admin: SystemAdmin,
    ssp: SystemStreamPartition,
    start: str | None,
    end: str,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 - a silence limit, not the call's deadline
    name: str | None = None,
) -> AsyncGenerator[list[IncomingMessageEnvelope], None]:
    """Batches of ``ssp`` from ``start`` (None: the oldest offset) up to ``end`` (exclusive).

    Raises StreamSystemError when nothing arrives for ``timeout`` seconds before ``end``;
    ``name`` says what is read in that message (default: the partition).
    """
    if start is not None and admin.compare_offsets(start, end) >= 0:
        return
    consumer = factory.get_committed_consumer()
    consumer.register(ssp, start, OffsetDefault.OLDEST)
    await consumer.start()
    try:
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        records = 0
        while True:
            batch = (await consumer.poll([ssp], _BATCH, min(_POLL_TIMEOUT_S, timeout))).get(ssp)
            if not batch:
                position = await consumer.position(ssp)
                if position is not None and admin.compare_offsets(position, end) >= 0:
                    return  # what is left before the end is not to be read
                if loop.time() - last_progress >= timeout:
                    raise StreamSystemError(
                        f"reading {name or ssp} received nothing for {timeout:g} s after {records} "
                        f"records; expected records up to offset {end} (exclusive)"
                    )
                continue
            last_progress = loop.time()
            cut = before_end(admin, batch, end)
            out = batch if cut == len(batch) else batch[:cut]
            done = (
                cut < len(batch)
                or admin.compare_offsets(admin.offset_after(batch[-1].offset), end) >= 0
            )
            records += len(out)
            if out:
                yield out
            if done:
                return
    finally:
        await consumer.stop()


def before_end(admin: SystemAdmin, batch: list[IncomingMessageEnvelope], end: str) -> int:
    """How many of ``batch`` (one partition's envelopes, in offset order) come before ``end``
    and before its end-of-stream, which is a partition's last envelope. One comparison when
    the last message is before ``end`` (the usual batch), a binary search's few otherwise:
    one per envelope cost more than writing it to a store."""
    n = len(batch)
    if n and batch[-1].is_end_of_stream:
        n -= 1
    if n == 0 or admin.compare_offsets(batch[n - 1].offset, end) < 0:
        return n
    low, high = 0, n - 1  # batch[:low] is before end, batch[high:] is not
    while low < high:
        mid = (low + high) // 2
        if admin.compare_offsets(batch[mid].offset, end) < 0:
            low = mid + 1
        else:
            high = mid
    return low


__all__ = ["before_end", "read_partition"]
