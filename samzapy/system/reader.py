"""Reading one partition from an offset up to a known end, through the system ports.

Restoring a store from its changelog and reading a checkpoint stream both read a partition
from some offset up to the offset it had reached when they started (its ``upcoming`` offset),
with a consumer of their own that reads only what committed transactions wrote (samzapy's own
streams are written in transactions under exactly-once processing). Aborted records and
transaction markers take offsets but are never read: reading is done once the consumer's
position has passed the end, whether or not a record at the end's last offset was seen.
``read_partition`` yields envelopes (a checkpoint stream's), ``read_entries`` a changelog's
records as store entries (``system/entries.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sized
from typing import TypeVar

from samzapy.api.envelope import IncomingMessageEnvelope
from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.entries import EntryBatch, count_before
from samzapy.system.ports import OffsetDefault, SystemAdmin, SystemConsumer, SystemFactory

_B = TypeVar("_B", bound=Sized)

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

    def cut(batch: list[IncomingMessageEnvelope]) -> tuple[list[IncomingMessageEnvelope], bool]:
        n = before_end(admin, batch, end)
        done = (
            n < len(batch) or admin.compare_offsets(admin.offset_after(batch[-1].offset), end) >= 0
        )
        return (batch if n == len(batch) else batch[:n]), done

    async def poll(consumer: SystemConsumer) -> list[IncomingMessageEnvelope] | None:
        return (await consumer.poll([ssp], _BATCH, min(_POLL_TIMEOUT_S, timeout))).get(ssp)

    async for batch in _read(factory, admin, ssp, start, end, poll, cut, timeout, name, False):
        yield batch


async def read_entries(
    factory: SystemFactory,
    admin: SystemAdmin,
    ssp: SystemStreamPartition,
    start: str | None,
    end: str,
    *,
    timeout: float = 60.0,  # noqa: ASYNC109 - a silence limit, not the call's deadline
    name: str | None = None,
) -> AsyncGenerator[EntryBatch, None]:
    """``read_partition``'s records as store entries (``system/entries.py``): what a
    store's restore reads of its changelog."""

    def cut(batch: EntryBatch) -> tuple[EntryBatch, bool]:
        n = batch.count_before(admin.compare_offsets, end)
        if n < len(batch) or batch.ended:
            return (batch if n == len(batch) else batch.split(n)[0]), True
        done = admin.compare_offsets(admin.offset_after(batch.offsets[-1]), end) >= 0
        return batch, done

    async def poll(consumer: SystemConsumer) -> EntryBatch | None:
        return await consumer.poll_entries(ssp, _BATCH, min(_POLL_TIMEOUT_S, timeout))

    async for batch in _read(factory, admin, ssp, start, end, poll, cut, timeout, name, True):
        yield batch


async def _read(
    factory: SystemFactory,
    admin: SystemAdmin,
    ssp: SystemStreamPartition,
    start: str | None,
    end: str,
    poll: Callable[[SystemConsumer], Awaitable[_B | None]],
    cut: Callable[[_B], tuple[_B, bool]],
    timeout: float,  # noqa: ASYNC109 - a silence limit
    name: str | None,
    entries: bool,
) -> AsyncGenerator[_B, None]:
    """The loop of both readers: ``poll`` a batch, ``cut`` it at the end (what is before
    it, and whether that is all)."""
    if start is not None and admin.compare_offsets(start, end) >= 0:
        return
    consumer = factory.get_committed_consumer()
    consumer.register(ssp, start, OffsetDefault.OLDEST)
    if entries:
        consumer.read_entries()
    await consumer.start()
    try:
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        records = 0
        while True:
            batch = await poll(consumer)
            if not batch:
                if batch is not None and getattr(batch, "ended", False):
                    return  # an ended partition's end-of-stream alone
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
            out, done = cut(batch)
            records += len(out)
            if out:
                yield out
            if done:
                return
    finally:
        await consumer.stop()


def before_end(admin: SystemAdmin, batch: list[IncomingMessageEnvelope], end: str) -> int:
    """How many of ``batch`` (one partition's envelopes, in offset order) come before ``end``
    and before its end-of-stream, which is a partition's last envelope."""
    n = len(batch)
    if n and batch[-1].is_end_of_stream:
        n -= 1
    return count_before(admin.compare_offsets, n, lambda i: batch[i].offset, end)


__all__ = ["before_end", "read_entries", "read_partition"]
