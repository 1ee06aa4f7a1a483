"""The Kafka consumer's topic check given the topics' IDs at start-up
(``system/kafka/topic_watch.py``): a topic deleted and created again between two checks is
found under another ID, through the same one request per answer (Metadata v10 and up)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import IncompatibleBrokerVersion, KafkaConnectionError

from samzapy.api.errors import StreamSystemError
from samzapy.system.kafka.topic_ids import TopicIdsRequest, described, format_id
from samzapy.system.kafka.topic_watch import TopicWatch

OLD, NEW = uuid.uuid4().bytes, uuid.uuid4().bytes


class _IdClient:
    """aiokafka's network client whose Metadata v10 answers give topic ``t`` the IDs of
    ``answers`` in turn (None: no such topic), the last one again and again."""

    _retry_backoff = 0.01

    def __init__(self, answers: list[bytes | None]) -> None:
        self._answers = answers
        self.cluster = SimpleNamespace(brokers=lambda: [SimpleNamespace(nodeId=1)])
        self.sent = 0

    async def send(self, node_id: int, request: Any) -> Any:
        assert isinstance(request, TopicIdsRequest)
        self.sent += 1
        raw = self._answers.pop(0) if len(self._answers) > 1 else self._answers[0]
        return SimpleNamespace(topics=[] if raw is None else [(0, "t", raw)])

    async def force_metadata_update(self) -> bool:
        raise AssertionError("a second request: aiokafka's metadata asked for as well")


async def _watched(client: Any) -> None:
    """Polls a TopicWatch of topic ``t`` (partitions 0, 1; ID ``OLD`` at start-up) through
    a few checks."""
    ids = {"t": format_id(OLD), "not-read": "x"}
    watch = TopicWatch(client, {"t": "0, 1"}, servers="h:1", system="k", interval_s=0.05, ids=ids)
    loop = asyncio.get_running_loop()
    try:
        for _ in range(30):
            watch.check(loop.time())
            await asyncio.sleep(0.01)
    finally:
        await watch.close()


async def test_a_topic_found_under_another_id_twice_fails_the_poll_naming_it() -> None:
    with pytest.raises(
        StreamSystemError,
        match=rf"^the Kafka consumer of system 'k' failed: Kafka topic 't' was deleted and "
        rf"created again at h:1 while it was read \(its topic ID was {format_id(OLD)} at "
        rf"start-up and is {format_id(NEW)} now\): its partitions 0, 1 cannot be read on ",
    ) as failed:
        await _watched(_IdClient([OLD, NEW, NEW]))
    assert failed.value.__cause__ is None


async def test_a_topic_missing_then_found_under_another_id_was_recreated() -> None:
    """A check that falls between the deletion and the creation: the second answer, a
    backoff later, finds the new topic."""
    with pytest.raises(StreamSystemError, match="was deleted and created again"):
        await _watched(_IdClient([OLD, None, NEW]))


async def test_a_topic_missing_from_two_answers_is_deleted() -> None:
    with pytest.raises(StreamSystemError, match=r"Kafka topic 't' no longer exists at h:1"):
        await _watched(_IdClient([OLD, None, None]))


async def test_one_answer_under_another_id_is_asked_again_before_the_poll_fails() -> None:
    """Of two answers, the second with the start-up ID: the job goes on."""
    client = _IdClient([OLD, NEW, OLD])
    await _watched(client)
    assert client.sent >= 4  # each check one request, and one more for the second answer


async def test_brokers_without_topic_ids_are_asked_as_without_ids() -> None:
    """Brokers before Kafka 2.8: aiokafka's metadata answers, and no ID is compared."""

    class _OldClient(_IdClient):
        async def send(self, node_id: int, request: Any) -> Any:
            raise IncompatibleBrokerVersion("no Metadata v10")

        async def force_metadata_update(self) -> bool:
            self.updated = getattr(self, "updated", 0) + 1
            return True

    client = _OldClient([OLD])
    client.cluster = SimpleNamespace(  # type: ignore[assignment]
        brokers=lambda: [SimpleNamespace(nodeId=1)], partitions_for_topic=lambda t: {0, 1}
    )
    await _watched(client)
    assert client.updated >= 2


async def test_a_broker_out_of_reach_is_passed_for_the_next() -> None:
    class _TwoBrokers(_IdClient):
        async def send(self, node_id: int, request: Any) -> Any:
            if node_id == 1:
                raise KafkaConnectionError("refused")
            return await super().send(node_id, request)

    client = _TwoBrokers([NEW])
    client.cluster = SimpleNamespace(  # type: ignore[assignment]
        brokers=lambda: [SimpleNamespace(nodeId=1), SimpleNamespace(nodeId=2)]
    )
    for _ in range(5):  # whichever comes first
        assert await described(client, ["t", "gone"]) == {"t": format_id(NEW)}
    client.cluster = SimpleNamespace(brokers=lambda: [SimpleNamespace(nodeId=1)])  # type: ignore[assignment]
    with pytest.raises(KafkaConnectionError):
        await described(client, ["t"])
