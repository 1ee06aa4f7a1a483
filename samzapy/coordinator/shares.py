"""The SamzaContainers one process runs under the group coordinator, and the incremental
handover between assignments.

Each assignment's new tasks start in a SamzaContainer of their own (a *share*), next to the
shares already running; a task that leaves is released from its share while the share's other
tasks go on, and a share whose tasks have all left stops. ``plan_handover`` decides, purely,
what an assignment changes; ``Shares`` does it. The process logs one ``progress`` line over
its shares (``report_progress``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

import structlog

from samzapy.api.system import TaskName
from samzapy.container.container import SamzaContainer
from samzapy.container.progress import Rate, progress_fields

log = structlog.get_logger("samzapy.job_runner")


def task_name(task: int) -> TaskName:
    return TaskName.for_partition(task)


@dataclass
class Share:
    """One SamzaContainer of this process: its tasks and its run."""

    container: SamzaContainer
    run: asyncio.Task[None]
    tasks: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Handover:
    """What an assignment changes: the tasks kept, those to start in a new share, and per
    share those to release (``stop``: shares all of whose tasks leave)."""

    kept: frozenset[int]
    added: frozenset[int]
    removed: frozenset[int]
    release: dict[int, frozenset[int]]
    stop: tuple[int, ...]


def plan_handover(held: Collection[Collection[int]], assigned: Iterable[int]) -> Handover:
    """The handover from the shares' tasks (``held``, by share index) to ``assigned``."""
    wanted = frozenset(assigned)
    owned = frozenset(t for tasks in held for t in tasks)
    release: dict[int, frozenset[int]] = {}
    stop: list[int] = []
    for index, tasks in enumerate(held):
        leaving = frozenset(tasks) - wanted
        if leaving and leaving == frozenset(tasks):
            stop.append(index)
        elif leaving:
            release[index] = leaving
    return Handover(
        kept=owned & wanted,
        added=wanted - owned,
        removed=owned - wanted,
        release=release,
        stop=tuple(stop),
    )


class Shares:
    """The shares of this process."""

    def __init__(self, new_container: Callable[[frozenset[int]], SamzaContainer]) -> None:
        self._new_container = new_container
        self.shares: list[Share] = []

    @property
    def owned(self) -> set[int]:
        """Every task a share runs, is starting or is releasing."""
        return {t for share in self.shares for t in share.tasks}

    def runs(self) -> list[asyncio.Task[None]]:
        return [share.run for share in self.shares]

    def done(self) -> list[Share]:
        """The shares whose run has ended, removed from the running ones."""
        ended = [share for share in self.shares if share.run.done()]
        self.shares = [share for share in self.shares if not share.run.done()]
        return ended

    async def start(self, tasks: frozenset[int]) -> Share:
        """Start ``tasks`` in a new share; return once they run (or the share failed)."""
        container = self._new_container(tasks)
        share = Share(container, asyncio.ensure_future(container.run()), set(tasks))
        self.shares.append(share)
        started = asyncio.ensure_future(container.started.wait())
        await asyncio.wait([started, share.run], return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        return share

    async def release(self, handover: Handover, reason: str) -> list[str]:
        """Release what ``handover`` removes: stop the shares it empties, release the tasks
        it takes from the others (their other tasks go on), each share at the same time.
        The metric groups of the shares stopped (for the caller to remove later)."""
        stale: list[str] = []
        waits = []
        for index in handover.stop:
            share = self.shares[index]
            stale.extend(share.container.metric_groups)
            share.container.request_stop(reason)
            waits.append(_settled(share.run))
        for index, tasks in handover.release.items():
            waits.append(self._release(self.shares[index], tasks))
        await asyncio.gather(*waits)
        for index in handover.stop:
            self.shares[index].tasks.clear()
        return stale

    async def _release(self, share: Share, tasks: frozenset[int]) -> None:
        started = time.monotonic()
        try:
            released = await share.container.release([task_name(t) for t in sorted(tasks)])
        except Exception:
            # The share failed (the release failed it): its run says how, and the job
            # runner deals with it as with any failed share.
            await _settled(share.run)
            return
        if not released:  # stopping already: its stop commits everything
            await _settled(share.run)
        share.tasks -= tasks
        log.debug(
            "share_released",
            tasks=[str(task_name(t)) for t in sorted(tasks)],
            elapsed_ms=round((time.monotonic() - started) * 1000, 1),
        )

    def request_stop(self, reason: str) -> None:
        """One stop of the process: its ``stop_requested`` is logged once (by the first)."""
        for index, share in enumerate(self.shares):
            share.container.request_stop(reason, quiet=index > 0)

    def abandon(self, reason: str) -> None:
        for share in self.shares:
            share.container.abandon(reason)

    async def report_progress(
        self, interval_ms: int, processed: Callable[[], int], member: Callable[[], str | None]
    ) -> None:
        """Log the process's ``progress`` line every ``interval_ms`` (0: never) until
        cancelled, over the tasks of every running share (which log none of their own):
        ``processed`` counts the messages this process processed since it started, ``member``
        is its member id in the group now."""
        if interval_ms <= 0:
            return
        rate = Rate(processed())
        while True:
            await asyncio.sleep(interval_ms / 1000)
            loops = [
                share.container.run_loop
                for share in self.shares
                if not share.run.done() and share.container.run_loop is not None
            ]
            count = processed()
            per_s = rate(count)  # read every interval: a line after a quiet one is not a spike
            if not loops:  # no line while no task runs (joining, between assignments)
                continue
            try:
                fields = progress_fields(loops)
            except Exception as exc:  # a lag reader of a share stopping: the next line
                log.debug("progress_skipped", error=repr(exc))
                continue
            log.info("progress", processed=count, rate=per_s, member=member(), **fields)

    async def stop(self, reason: str) -> list[str]:
        """Stop every share and wait for them; the metric groups of their tasks."""
        stale = [g for share in self.shares for g in share.container.metric_groups]
        self.request_stop(reason)
        await asyncio.gather(*(_settled(share.run) for share in self.shares))
        return stale


async def _settled(run: asyncio.Task[None]) -> None:
    """Wait for ``run`` to end, whatever its outcome (the caller reads it from the task)."""
    await asyncio.wait([run])


__all__ = ["Handover", "Share", "Shares", "plan_handover", "task_name"]
