"""Start-up that a stop request cuts short, and the event saying what started.

Starting a container can wait a long time: for a broker that does not answer yet (up to
``connect.timeout.ms``), for a group's first assignment, for a store's restore. SIGTERM or
Ctrl-C in that time must stop the process at once, as the README promises, not after the
wait: ``unless_stopped`` runs a start-up step and cancels it when the stop comes first. What
the step had opened is closed by the caller's usual clean-up after a failed start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import structlog

from samzapy.api.envelope import KV_ACCELERATED
from samzapy.config import ResolvedConfig
from samzapy.container.gauges import ProcessTotals

log = structlog.get_logger("samzapy.container")

T = TypeVar("T")


async def unless_stopped(step: Coroutine[Any, Any, T], stopped: asyncio.Event) -> T | None:
    """``await step``, or None when ``stopped`` is set first (``step`` is then cancelled).
    A cancellation that does not come from the stop is not taken for one: it propagates."""
    task = asyncio.ensure_future(step)
    waiter = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait([task, waiter], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled() and stopped.is_set():
        return None
    return task.result()  # a step that cancelled itself raises CancelledError here


def log_started(
    cfg: ResolvedConfig,
    tasks: Sequence[Any],
    job_task_count: int,
    task_class: str | None,
    group: str | None,
    totals: ProcessTotals,
) -> None:
    """The ``container_started`` event: what the container runs (``task_class``: as the
    job names it, ``task.class`` or a factory given in code; ``kv_speedups``: whether ``KV``
    has its C constructor, samzapy/_speedups.c). Once per process (``totals``): under
    kafka-group, the tasks a later assignment adds start in a share of their own, which
    ``rebalance_completed`` reports (``tasks_added``); such a share's start is the debug
    event ``share_started``, with the same fields."""
    broadcasts = cfg.task.broadcast_inputs
    first, totals.announced = not totals.announced, True
    (log.info if first else log.debug)(
        "container_started" if first else "share_started",
        inputs=[str(ss) for ss in dict.fromkeys(cfg.task.inputs)],
        broadcast_inputs=[f"{b.system_stream}#{list(b.partitions)}" for b in broadcasts],
        tasks=len(tasks),
        task_names=[str(t.name) for t in tasks],
        job_tasks=job_task_count,
        task_class=task_class,
        **({"app_class": cfg.task.app_class} if cfg.task.app_class else {}),
        max_concurrency=cfg.task.max_concurrency,
        thread_pool_size=cfg.job.container_thread_pool_size,
        checkpoints=cfg.task.checkpoint_factory,
        processing_guarantee=cfg.task.processing_guarantee,
        group=group,
        kv_speedups=KV_ACCELERATED,
    )


__all__ = ["log_started", "unless_stopped"]
