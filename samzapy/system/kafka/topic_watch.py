"""Noticing a topic deleted under a running consumer while its other partitions deliver.

aiokafka never fails a consumer whose assigned topic was deleted: it asks for the topic's
metadata again and again and hands out the other topics' records as before. The consumer's
idle-time probe (``connection.ContactWatch``) finds the topic gone once the brokers have been
silent for a probe interval, which never happens while another topic keeps delivering.
``TopicWatch`` asks the brokers every interval (the probe's: at most 5 s, a third of
``connect.timeout.ms`` when that is less), one metadata request (two when the first lacks a
topic) in a task of its own that the poll never waits for; once two answers in a row lack a
topic read (``gone_topics``), the next poll fails naming the topic and its partitions.

A check the brokers do not answer says nothing of the topics: an outage is the contact
watch's to judge, and the next check runs an interval later.

The idle-time probe checks the topics before it asks for the partitions' ends (which for a
deleted topic would wait as for a lost broker) through the watch (``confirm``): it awaits the
check in progress, takes the last one if it started less than an interval ago, or runs one,
which counts as the watch's. So an idle consumer checks its topics once per interval, not
once for the watch and once for the probe.
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

log = structlog.get_logger("samzapy.kafka")


async def gone_topics(client: Any, topics: Iterable[str]) -> list[str]:
    """Which of ``topics`` two metadata answers in a row of the aiokafka ``client`` lack (the
    second asked for right after the first: one answer may come from a broker whose metadata
    lags behind the cluster's, as one just restarted)."""
    missing = await missing_topics(client, topics)
    return await missing_topics(client, missing) if missing else []


def deleted_topic(topic: str, partitions: str, servers: str) -> UnknownTopicOrPartitionError:
    """What a consumer says of ``topic`` (whose ``partitions`` it reads, ``"0, 1"``) found
    missing at ``servers`` while it runs."""
    return UnknownTopicOrPartitionError(
        f"{where(topic)} no longer exists at {servers} (deleted while it was read?): its "
        f"partitions {partitions} cannot be read"
    )


class TopicWatch:
    """Checks every ``interval_s`` that the topics a consumer reads still exist."""

    def __init__(
        self,
        client: Any,
        read: Mapping[str, str],
        *,
        servers: str,
        system: str,
        interval_s: float,
    ) -> None:
        """``client``: the consumer's aiokafka network client; ``read``: the partitions read
        of each topic, as text (``{"t": "0, 1"}``)."""
        self._client = client
        self._read = dict(read)
        self._servers = servers
        self._system = system
        self._interval_s = interval_s
        self._loop = asyncio.get_running_loop()
        self._next = self._loop.time() + interval_s
        self._checking: asyncio.Task[None] | None = None
        #: When the last check that completed started (-inf: none did).
        self._checked_at = -math.inf
        self._gone: UnknownTopicOrPartitionError | None = None

    def check(self, now: float) -> None:
        """Raise if a check found a topic gone; start a check when one is due."""
        if self._gone is not None:
            raise StreamSystemError(
                f"the Kafka consumer of system {self._system!r} failed: {describe(self._gone)}"
            ) from self._gone
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
                    missing = await gone_topics(self._client, self._read)
                if missing:
                    topic = missing[0]
                    self._gone = deleted_topic(topic, self._read[topic], self._servers)
                self._checked_at = started
        except Exception as exc:  # not the topics' to judge: the next check runs as usual
            log.warning("topic_check_failed", system=self._system, error=repr(exc))
        finally:
            self._checking = None

    async def close(self) -> None:
        """Stop a check in progress."""
        checking, self._checking = self._checking, None
        if checking is not None:
            checking.cancel()
            await asyncio.gather(checking, return_exceptions=True)


__all__ = ["TopicWatch", "deleted_topic", "gone_topics"]
