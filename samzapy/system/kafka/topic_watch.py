"""Noticing a topic deleted (or deleted and created again) under a running consumer while
its other partitions deliver.

aiokafka never fails a consumer whose assigned topic was deleted: it asks for the topic's
metadata again and again and hands out the other topics' records as before. The consumer's
idle-time probe (``connection.ContactWatch``) finds the topic gone once the brokers have been
silent for a probe interval, which never happens while another topic keeps delivering.
``TopicWatch`` asks the brokers every interval (the probe's: at most 5 s, a third of
``connect.timeout.ms`` when that is less), one metadata request (two when the first lacks a
topic) in a task of its own that the poll never waits for; once two answers in a row lack a
topic read (the second asked for a retry backoff after the first: one answer may come from
a broker whose metadata lags behind the cluster's, as one just restarted), the next poll fails
naming the topic and its partitions.

A check the brokers do not answer says nothing of the topics: an outage is the contact
watch's to judge, and the next check runs an interval later.

The idle-time probe checks the topics before it asks for the partitions' ends (which for a
deleted topic would wait as for a lost broker) through the watch (``confirm``): it awaits the
check in progress, takes the last one if it started less than an interval ago, or runs one,
which counts as the watch's. So an idle consumer checks its topics once per interval, not
once for the watch and once for the probe.

A topic deleted and created again at once is missing for a moment only, which a check
seldom sees; its ID changed, though (``topic_ids.py``). Given the IDs looked up at start-up
(those the checkpoints record), the watch asks for its topics through Metadata v10 or later
instead (``topic_ids.described``: still one request per answer), which gives each topic's ID
too, and takes an answer with another ID for a topic as one without it: two in a row fail
the next poll, saying that the topic was created again (its offsets are not the old
topic's, which the consumer goes on reading from). Brokers that give no
IDs (before Kafka 2.8) are asked as without IDs.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterable, Mapping
from typing import Any

import structlog
from aiokafka.errors import UnknownTopicOrPartitionError

from samzapy.api.errors import StreamSystemError
from samzapy.system.kafka.connection import MIN_ATTEMPT_S
from samzapy.system.kafka.errors import KAFKA_ERRORS, describe, missing_topics, where
from samzapy.system.kafka.topic_ids import described

log = structlog.get_logger("samzapy.kafka")


def deleted_topic(topic: str, partitions: str, servers: str) -> UnknownTopicOrPartitionError:
    """What a consumer says of ``topic`` (whose ``partitions`` it reads, ``"0, 1"``) found
    missing at ``servers`` while it runs."""
    return UnknownTopicOrPartitionError(
        f"{where(topic)} no longer exists at {servers} (deleted while it was read?): its "
        f"partitions {partitions} cannot be read"
    )


def recreated_topic(topic: str, partitions: str, servers: str, before: str, now: str) -> str:
    """What a consumer says of ``topic`` found at ``servers`` under another ID (``now``)
    than the one it had at start-up (``before``)."""
    return (
        f"{where(topic)} was deleted and created again at {servers} while it was read (its "
        f"topic ID was {before} at start-up and is {now} now): its partitions {partitions} "
        "cannot be read on from the old topic's offsets; the restart reads the new topic from "
        "its offset default (input_topic_recreated): under 'upcoming', move the job's "
        "position with `samzapy checkpoint set --to oldest` before it to read what the new "
        'topic holds (docs/deploy.md, "Deleting an input topic")'
    )


class TopicWatch:
    """Checks every ``interval_s`` that the topics a consumer reads still exist (under the
    IDs they had at start-up, when given)."""

    def __init__(
        self,
        client: Any,
        read: Mapping[str, str],
        *,
        servers: str,
        system: str,
        interval_s: float,
        ids: Mapping[str, str] | None = None,
    ) -> None:
        """``client``: the consumer's aiokafka network client; ``read``: the partitions read
        of each topic, as text (``{"t": "0, 1"}``); ``ids``: the topics' IDs looked up at
        start-up (None, or none of the topics read: no IDs compared)."""
        self._client = client
        self._read = dict(read)
        self._ids = {t: i for t, i in (ids or {}).items() if t in self._read}
        self._servers = servers
        self._system = system
        self._interval_s = interval_s
        self._loop = asyncio.get_running_loop()
        self._next = self._loop.time() + interval_s
        self._checking: asyncio.Task[None] | None = None
        #: When the last check that completed started (-inf: none did).
        self._checked_at = -math.inf
        #: What a check found: a topic gone (the error), or created again (the message).
        self._gone: UnknownTopicOrPartitionError | str | None = None

    def check(self, now: float) -> None:
        """Raise if a check found a topic gone or created again; start a check when one is
        due."""
        gone = self._gone
        if gone is not None:
            what = gone if isinstance(gone, str) else describe(gone)
            failed = StreamSystemError(
                f"the Kafka consumer of system {self._system!r} failed: {what}"
            )
            raise failed from (None if isinstance(gone, str) else gone)
        if self._checking is None and now >= self._next:
            self._start(now)

    async def confirm(self) -> bool:
        """For the idle-time probe: whether every topic read still exists (False: one is
        gone, and the next poll fails), by the check in progress, the last one if it started
        less than an interval ago, or one started now (the watch's next one an interval
        later)."""
        now = self._loop.time()
        if self._checking is None and now - self._checked_at >= self._interval_s:
            self._start(now)
        if self._checking is not None:
            await asyncio.shield(self._checking)
        return self._gone is None

    def _start(self, now: float) -> None:
        self._next = now + self._interval_s
        self._checking = self._loop.create_task(self._run_check(now))

    async def _run_check(self, started: float) -> None:
        # Two answers that lack a topic wait the client's backoff after each (the consumer's
        # metadata is paced, ``connection.pace_metadata``): the check's time allows for both.
        backoff = getattr(self._client, "_retry_backoff", 0)
        limit = max(self._interval_s, MIN_ATTEMPT_S) + 2 * (backoff if backoff > 0 else 0)
        try:
            with contextlib.suppress(TimeoutError, *KAFKA_ERRORS):
                async with asyncio.timeout(limit):
                    changed = await self._changed(self._read, backoff)
                    if changed:
                        changed = await self._changed(changed, backoff)
                for topic, now in sorted(changed.items())[:1]:
                    partitions, servers = self._read[topic], self._servers
                    self._gone = (
                        deleted_topic(topic, partitions, servers)
                        if now is None
                        else recreated_topic(topic, partitions, servers, self._ids[topic], now)
                    )
                self._checked_at = started
        except Exception as exc:  # not the topics' to judge: the next check runs as usual
            log.warning("topic_check_failed", system=self._system, error=repr(exc))
        finally:
            self._checking = None

    async def _changed(self, topics: Iterable[str], backoff: float) -> dict[str, str | None]:
        """Which of ``topics`` one answer lacks (None) or gives another ID than at start-up
        (the new ID); none when no broker answered. Without IDs to compare, aiokafka's own
        metadata request answers (which waits the backoff after an answer lacking a topic,
        ``connection.pace_metadata``); with them, Metadata v10 or later, the backoff waited
        here."""
        if not self._ids:
            return dict.fromkeys(await missing_topics(self._client, topics))
        asked = list(topics)
        found = await described(self._client, asked)
        if found is None:  # the brokers give no IDs (any more): compare none
            self._ids = {}
            return await self._changed(asked, backoff)
        ids = self._ids
        changed = {
            t: found.get(t)
            for t in asked
            if t not in found or (t in ids and found[t] not in (None, ids[t]))
        }
        if changed and backoff > 0:
            await asyncio.sleep(backoff)
        return changed

    async def close(self) -> None:
        """Stop a check in progress."""
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()
            await asyncio.gather(checking, return_exceptions=True)


__all__ = ["TopicWatch", "deleted_topic", "recreated_topic"]
