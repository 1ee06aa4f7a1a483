"""GroupOffsets: each checkpoint's input offsets, copied to the job's consumer group.

The job's consumer group (``samzapy.<job.name>.<job.id>``) is where Kafka's tools look for a
consumer's position and lag. After a task's checkpoint is written (``checkpointed``), its
input offsets on the group's system are committed there too, in the background: a commit
never holds up a task, the offsets of the tasks that checkpoint together go out in one
request, and at most one request is in flight. A commit that fails (a rebalance under way,
the broker away) is logged once as ``group_commit_failed`` (at info when a rebalance under
way refused it: ``_REBALANCING``) and its offsets are committed with
the next checkpoint's; it never stops the job, and ``group_commit_resumed`` says when commits
go through again. Nothing reads these offsets back: the checkpoints decide where a restart
resumes. Under exactly-once the offsets go into each task's transaction instead
(``in_transaction``).

Kafka's committed offset is the next offset to read: one past the checkpoint's last
processed offset, or, where the task has processed every message its consumer handed over of
the partition, the consumer's position when it is further (``fetched``): past the records no
reader gets, a transaction's commit marker above all, which would otherwise show a lag of 1
for ever (Kafka Streams' KAFKA-6607). It is read at the commit, while nothing is in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping

import structlog

from samzapy.api.system import SystemStreamPartition
from samzapy.system.ports import GroupOffsetCommitter, TransactionalProducer

log = structlog.get_logger("samzapy.checkpoint")

#: How long the final commit at a clean stop may take before it is given up.
STOP_TIMEOUT_S = 5.0


#: The class names of the errors a group commit gets while the group rebalances (the error
#: itself, or the cause of the committer's StreamSystemError).
_REBALANCING = frozenset(
    {
        "RebalanceInProgressError",
        "CommitFailedError",
        "IllegalGenerationError",
        "UnknownMemberIdError",
    }
)


class GroupOffsets:
    """Commits the checkpointed offsets of ``system``'s partitions to ``group_id``."""

    def __init__(self, committer: GroupOffsetCommitter, *, system: str, group_id: str) -> None:
        self._committer = committer
        self.system = system
        self.group_id = group_id
        self._pending: dict[SystemStreamPartition, int] = {}
        self._running: asyncio.Task[None] | None = None
        #: Whether the last commit failed (its failure was logged).
        self._failing = False

    def next_offsets(
        self,
        offsets: Mapping[SystemStreamPartition, str],
        fetched: Mapping[SystemStreamPartition, int] | None = None,
    ) -> dict[SystemStreamPartition, int]:
        """The group's offsets for a checkpoint's ``offsets``: those of the group's system,
        one past the last processed, or the partition's position in ``fetched`` when further
        (where its task processed all its consumer handed over)."""
        out = {}
        for ssp, offset in offsets.items():
            if ssp.system == self.system:
                with contextlib.suppress(ValueError):
                    out[ssp] = int(offset) + 1
                    if fetched and (position := fetched.get(ssp)) is not None:
                        out[ssp] = max(out[ssp], position)
        return out

    def checkpointed(self, offsets: Mapping[SystemStreamPartition, str]) -> None:
        """A checkpoint with these input offsets was written: commit them soon."""
        self.commit(self.next_offsets(offsets))

    def commit(self, offsets: Mapping[SystemStreamPartition, int]) -> None:
        """Commit these group offsets (``next_offsets``) soon."""
        self._pending.update(offsets)
        if self._pending and (self._running is None or self._running.done()):
            self._running = asyncio.get_running_loop().create_task(
                self._commit_pending(), name="group-offsets"
            )

    def forget(self, ssps: Iterable[SystemStreamPartition]) -> None:
        """The tasks reading ``ssps`` left this container: drop their offsets still waiting
        (a commit that failed), so they never land after their new owner's."""
        for ssp in ssps:
            self._pending.pop(ssp, None)

    async def in_transaction(
        self, producer: TransactionalProducer, offsets: Mapping[SystemStreamPartition, int]
    ) -> None:
        """Exactly-once: add these group offsets (``next_offsets``) to the task's open
        transaction."""
        await producer.send_offsets(self.group_id, offsets)

    async def _commit_pending(self) -> None:
        while self._pending:
            offsets, self._pending = self._pending, {}
            try:
                await self._committer.commit(offsets)
            except Exception as exc:
                # Kept for the next checkpoint, under what it brings.
                self._pending = {**offsets, **self._pending}
                if not self._failing:
                    self._failing = True
                    # A rebalance under way is the normal course of a deploy: info, not a page.
                    routine = type(exc.__cause__ or exc).__name__ in _REBALANCING
                    (log.info if routine else log.warning)(
                        "group_commit_failed",
                        group=self.group_id,
                        error=str(exc),
                        error_type=type(exc).__name__,
                        retry="with the next checkpoint",
                    )
                return
            if self._failing:
                self._failing = False
                log.info("group_commit_resumed", group=self.group_id)

    async def stop(self) -> None:
        """Commit what is pending (for up to ``STOP_TIMEOUT_S`` in all), then close."""
        running = self._running

        async def last_commits() -> None:
            if running is not None and not running.done():
                await asyncio.shield(running)
            if self._pending:
                await self._commit_pending()

        try:
            await asyncio.wait_for(last_commits(), STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("group_commit_failed", group=self.group_id, error="timed out at stop")
        finally:
            if running is not None and not running.done():
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
            await self._committer.stop()


__all__ = ["GroupOffsets"]
