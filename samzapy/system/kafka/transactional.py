"""The kafka system's transactional producer: one per task under exactly-once processing.

It is the batching producer (``producer.py``) with a ``transactional.id``; every batch it
sends belongs to the open transaction, and ``commit`` makes them all visible at once to
``read_committed`` readers, or none of them.

1. ``start`` connects and claims the transactional id (Kafka's InitProducerId): the broker
   aborts a transaction an earlier producer with the same id left open and fences that
   producer, so it can never write or commit again. A transaction is open when ``start``
   returns.
2. Sends go to the open transaction; ``pending`` says whether any was made since it opened.
3. ``commit`` flushes (every batch delivered) and commits, then opens the next transaction.
4. A fenced producer raises ``TaskFencedError`` (never retried): another producer claimed the
   id, or the broker aborted the transaction, open longer than ``timeout_ms`` (it bumps the
   producer's epoch then, and answers as to a fenced producer); any other failure of a
   transaction is a ``StreamSystemError``, and the transaction is lost: the container fails
   and its restart resumes from the last committed one.

Unless the job sets ``producer.linger.ms`` or ``producer.batch.size``, a task's transactional
producer holds a batch open up to ``TRANSACTIONAL_LINGER_MS`` and fills it up to
``TRANSACTIONAL_BATCH_BYTES``, where the shared producer lingers 5 ms over 16 KiB: a
``read_committed`` reader sees nothing before the commit anyway, which hands every open batch
over at once, and each task's producer sends its own requests, so short batches cost requests
(Kafka Streams lingers 100 ms too).

The broker aborts a transaction that stays open longer than ``timeout_ms``
(``transaction.timeout.ms``): the container commits every ``task.commit.ms``, which must be
shorter (the configuration refuses otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    InvalidProducerEpoch,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
)

from samzapy.api.errors import StreamSystemError, TaskFencedError
from samzapy.api.system import SystemStreamPartition
from samzapy.system.kafka.connection import started
from samzapy.system.kafka.errors import KAFKA_ERRORS, describe
from samzapy.system.kafka.group_offsets import kafka_offsets
from samzapy.system.kafka.producer import KafkaSystemProducer
from samzapy.system.kafka.settings import KafkaSettings
from samzapy.system.ports import TransactionalProducer

#: What Kafka answers a producer whose transactional id a newer producer has claimed.
FENCED: tuple[type[BaseException], ...] = (
    ProducerFenced,
    InvalidProducerEpoch,
    TransactionalIdAuthorizationFailed,
)


def fenced_cause(exc: BaseException) -> BaseException | None:
    """The fencing error behind ``exc`` (itself, or its cause chain), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FENCED):
            return seen
        seen = seen.__cause__
    return None


#: How long a transactional producer holds a batch open, unless ``producer.linger.ms`` is set.
TRANSACTIONAL_LINGER_MS = 100
#: Its batches' size, unless ``producer.batch.size`` is set.
TRANSACTIONAL_BATCH_BYTES = 1 << 16


class KafkaTransactionalProducer(KafkaSystemProducer, TransactionalProducer):
    """A task's producer whose writes commit atomically."""

    _defaults: ClassVar[dict[str, Any]] = {
        "linger_ms": TRANSACTIONAL_LINGER_MS,
        "max_batch_size": TRANSACTIONAL_BATCH_BYTES,
    }

    def __init__(self, settings: KafkaSettings, transactional_id: str, *, timeout_ms: int) -> None:
        super().__init__(settings)
        self.transactional_id = transactional_id
        self._timeout_ms = timeout_ms
        self._pending = False

    @property
    def pending(self) -> bool:
        """Whether anything was sent in the open transaction."""
        return self._pending

    async def _open_producer(self) -> Any:
        kwargs = {
            **self._settings.producer_kwargs(self._defaults),
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self._timeout_ms,
            "enable_idempotence": True,
            "acks": "all",
        }
        return await started(AIOKafkaProducer(**kwargs))

    async def start(self) -> None:
        await super().start()
        await self.begin()

    def _new_batch(self, target: Any) -> Any:
        # Every first send to a partition in a transaction opens a batch (commit hands them
        # all over): marking it here keeps the per-message send path as it is.
        self._pending = True
        return super()._new_batch(target)

    async def begin(self) -> None:
        try:
            await self._producer.begin_transaction()
        except KAFKA_ERRORS as exc:
            raise self._error("open a transaction", exc) from exc
        self._pending = False

    async def flush(self) -> None:
        try:
            await super().flush()
        except StreamSystemError as exc:
            cause = fenced_cause(exc)
            if cause is not None:
                raise self._fenced(cause) from exc
            raise

    async def commit(self) -> None:
        await self.flush()
        try:
            await self._producer.commit_transaction()
        except KAFKA_ERRORS as exc:
            raise self._error("commit its transaction", exc) from exc
        await self.begin()

    async def send_offsets(
        self, group_id: str, offsets: Mapping[SystemStreamPartition, int]
    ) -> None:
        if not offsets:
            return
        try:
            await self._producer.send_offsets_to_transaction(kafka_offsets(offsets), group_id)
        except KAFKA_ERRORS as exc:
            raise self._error(f"add offsets for consumer group {group_id!r}", exc) from exc

    async def abort(self) -> None:
        try:
            await self._producer.abort_transaction()
        except KAFKA_ERRORS as exc:
            raise self._error("abort its transaction", exc) from exc
        self._pending = False

    async def stop(self) -> None:
        """Stop without committing: what the open transaction holds is dropped here and
        aborted by the broker (at once when the next producer of the id starts, else after
        its timeout)."""
        await self.abandon()

    def _error(self, what: str, exc: BaseException) -> StreamSystemError:
        cause = fenced_cause(exc)
        if cause is not None:
            return self._fenced(cause)
        return StreamSystemError(
            f"the transactional producer {self.transactional_id!r} could not {what}: "
            f"{describe(exc)}"
        )

    def _fenced(self, cause: BaseException) -> TaskFencedError:
        # The broker answers alike when it aborted the transaction itself for its timeout.
        return TaskFencedError(
            f"the transactional producer {self.transactional_id!r} was fenced: another "
            "container claimed its id, or the broker aborted its transaction for staying "
            f"open longer than task.transaction.timeout.ms ({self._timeout_ms} ms) "
            f"({describe(cause)})"
        )


__all__ = ["FENCED", "KafkaTransactionalProducer", "fenced_cause"]
