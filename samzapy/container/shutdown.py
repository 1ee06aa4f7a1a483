"""How a SamzaContainer stops its tasks and its systems: cleanly (every task closed, then
committed, its stores marked clean, the commits waiting for the servers up to the systems'
``stop_wait_ms``), or after a failure (nothing committed, and what the producers still hold
dropped within a bound, the brokers reachable or not).

A failed container, or one that gave its tasks up, is covered by no checkpoint past its last
one: under at-least-once its restart (or the tasks' new owner) sends again what it held,
under exactly-once its transactions never commit. So its stop drops what its producers hold
(``output_dropped``) rather than wait for brokers that may be gone, and stops every client
at once, each within ``STOP_TIMEOUT_S`` of the kafka system's connection module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import structlog

from samzapy.api.errors import SamzapyError, StreamSystemError
from samzapy.container.checkpoints import ContainerCheckpoints
from samzapy.container.clock import Clock, LoopClock, wait_on, within_bound
from samzapy.container.systems import Systems
from samzapy.container.task_instance import TaskInstance

log = structlog.get_logger("samzapy.container")


async def stop_cleanly(
    tasks: Sequence[TaskInstance],
    systems: Systems | None = None,
    given_up: Callable[[], BaseException | None] = lambda: None,
) -> None:
    """Stop ``tasks``, none with a call in flight: close each, then commit each, then close
    their stores marked as matching the commit (a restart keeps them). Every task is closed
    before any commits, so what a ``close`` sends is in the commits.

    The commits and the stores' close wait for the servers of ``systems`` up to their
    ``stop_wait_s`` (a kafka system's ``connect.timeout.ms``): past it, or once the container
    gave its tasks up (``given_up`` returns why: its group lease lost), they are cut short and
    the stop fails, as after a failure (the producers of a client that no broker answers had
    held it for ever: only a second signal ended the process)."""
    for task in tasks:
        await task.close()
    # The bound is asked again at each check: a system first used by a close's send counts.
    await within_bound(
        _commit_and_close_stores(tasks),
        lambda: None if systems is None else systems.stop_wait_s(),
        lambda within_s: StreamSystemError(
            f"the final commit got no answer within {within_s:g} s (the longest "
            "connect.timeout.ms of the job's systems): its brokers do not answer; "
            "nothing more is committed, the restart resumes from the last checkpoint"
        ),
        check_s=0.1,
        given_up=given_up,
    )


async def _commit_and_close_stores(tasks: Sequence[TaskInstance]) -> None:
    for task in tasks:
        await task.commit()
    for task in tasks:
        await task.close_stores(clean=True)


async def close_after_failure(
    tasks: Sequence[TaskInstance], *, clock: Clock | None = None, wait_s: float = 0.0
) -> None:
    """Close ``tasks`` after a failure, committing nothing (a close that fails is logged),
    their stores not marked clean. Their calls still running on the thread pool (which
    cannot be cancelled) first have up to ``wait_s`` on ``clock`` to return, so that a
    ``close`` does not overlap one (as Samza's container awaits its task thread pool before
    closing the tasks); past that they are given up (``shutdown_timed_out``), as at a stop.
    A run its caller cancelled (a TestRunner's timeout) gives them nothing: that caller
    waits no longer, and a manual clock would never reach the wait's end."""
    running = asyncio.current_task()
    if running is not None and running.cancelling():
        wait_s = 0.0
    await _settle(tasks, clock or LoopClock(), wait_s)
    for task in tasks:
        try:
            await task.close()
        except SamzapyError as exc:
            log.warning("task_close_failed", task=task.name, error=str(exc))
        await task.close_stores(clean=False)


async def _settle(tasks: Sequence[TaskInstance], clock: Clock, wait_s: float) -> None:
    """Wait up to ``wait_s`` for the tasks' calls running on the thread pool."""
    calls = {task.name: pooled for task in tasks if (pooled := task.pooled())}
    if not calls:
        return
    waiting = [asyncio.wrap_future(call) for pooled in calls.values() for call in pooled]
    for future in await wait_on(clock, waiting, wait_s):
        future.cancel()  # a call that returns later finds its loop's side gone
    left = {name: n for name, pooled in calls.items() if (n := sum(not c.done() for c in pooled))}
    if left:
        log.warning(
            "shutdown_timed_out",
            shutdown_ms=int(wait_s * 1000),
            tasks=sorted(str(name) for name in left),
            in_flight=sum(left.values()),
            reason="a call on the thread pool outlasted task.shutdown.ms after the failure: "
            "its task is closed while it runs",
        )


async def stop_parts(
    systems: Systems | None, checkpoints: ContainerCheckpoints | None, *, abandon: bool
) -> None:
    """Stop the systems, then the checkpoints; ``abandon``: both at once, what they hold
    dropped (``Systems.stop``, ``ContainerCheckpoints.stop``)."""
    if abandon:
        stopping = [systems.stop(abandon=True)] if systems is not None else []
        if checkpoints is not None:
            stopping.append(checkpoints.stop(abandon=True))
        await asyncio.gather(*stopping)
        return
    if systems is not None:
        await systems.stop()
    if checkpoints is not None:
        await checkpoints.stop()


__all__ = ["close_after_failure", "stop_cleanly", "stop_parts"]
