"""The kafka system's pure parts: starting positions, error text, broker contact, send checks.

Everything here runs without a broker; tests/integration/test_kafka_system.py has the rest.
"""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing
from aiokafka import errors as kafka_errors
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from structlog.testing import capture_logs

import samzapy
from samzapy.api.errors import SerdeError, StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.kafka import KafkaSystemConsumer, KafkaSystemProducer, kafka_settings
from samzapy.system.kafka.batches import NO_HEADERS, OpenBatch
from samzapy.system.kafka.connection import (
    OUTAGES,
    ContactWatch,
    Outages,
    connect,
    pace_metadata,
    retrying,
)
from samzapy.system.kafka.consumer import start_position
from samzapy.system.kafka.errors import describe, error_name
from samzapy.system.kafka.group_offsets import KafkaGroupOffsets
from samzapy.system.kafka.topic_watch import TopicWatch
from samzapy.system.ports import OffsetBounds, OffsetDefault

SETTINGS = kafka_settings("k", {"bootstrap.servers": "127.0.0.1:9"})
OLDEST, UPCOMING = OffsetDefault.OLDEST, OffsetDefault.UPCOMING


class TestStartPosition:
    @pytest.mark.parametrize(
        ("offset", "default", "bounds", "expected"),
        [
            (None, OLDEST, OffsetBounds("3", "10"), (3, False)),
            (None, UPCOMING, OffsetBounds("3", "10"), (10, False)),
            (None, OLDEST, OffsetBounds(None, "7"), (7, False)),  # emptied by retention
            ("5", UPCOMING, OffsetBounds("3", "10"), (5, False)),
            ("3", UPCOMING, OffsetBounds("3", "10"), (3, False)),
            ("10", OLDEST, OffsetBounds("3", "10"), (10, False)),  # the next message
            ("2", OLDEST, OffsetBounds("3", "10"), (3, True)),  # deleted by retention
            ("2", UPCOMING, OffsetBounds("3", "10"), (10, True)),
            ("11", OLDEST, OffsetBounds("3", "10"), (3, True)),  # beyond the end
            ("4", OLDEST, OffsetBounds(None, "0"), (0, True)),  # the topic was recreated
        ],
    )
    def test_the_registered_offset_when_kafka_holds_it_else_the_default(
        self,
        offset: str | None,
        default: str,
        bounds: OffsetBounds,
        expected: tuple[int, bool],
    ) -> None:
        assert start_position(offset, default, bounds) == expected


class TestRegistration:
    def test_offsets_must_be_integers(self) -> None:
        consumer = KafkaSystemConsumer(SETTINGS)
        with pytest.raises(StreamSystemError, match=r"from offset 'x': Kafka offsets are integers"):
            consumer.register(_ssp(), "x", OLDEST)

    def test_defaults_must_be_known(self) -> None:
        consumer = KafkaSystemConsumer(SETTINGS)
        with pytest.raises(
            StreamSystemError, match=r"must be 'oldest' or 'upcoming', got 'latest'"
        ):
            consumer.register(_ssp(), None, "latest")

    async def test_a_consumer_without_partitions_starts_without_a_broker(self) -> None:
        consumer = KafkaSystemConsumer(SETTINGS)
        await consumer.start()
        assert await consumer.poll([], 10, 0) == {}
        with pytest.raises(StreamSystemError, match=r"k\.t#0: the kafka consumer did not register"):
            await consumer.poll([_ssp()], 10, 0)
        await consumer.stop()


def _ssp() -> SystemStreamPartition:
    return SystemStreamPartition("k", "t", 0)


class TestErrorText:
    def test_kafka_errors_read_as_one_line(self) -> None:
        assert describe(kafka_errors.KafkaConnectionError("Unable to bootstrap")) == (
            "KafkaConnectionError: Unable to bootstrap"
        )
        assert describe(kafka_errors.OffsetOutOfRangeError({"tp": 3})) == (
            "OffsetOutOfRangeError: {'tp': 3}"
        )
        assert describe(kafka_errors.UnknownTopicOrPartitionError()) == (
            "UnknownTopicOrPartitionError: This request is for a topic or partition that does "
            "not exist on this broker."
        )
        assert describe(TimeoutError()) == "TimeoutError: timed out"

    def test_error_codes_have_names(self) -> None:
        assert error_name(3) == "UnknownTopicOrPartitionError"
        assert error_name(36) == "TopicAlreadyExistsError"


class TestProducerChecks:
    def test_messages_must_be_bytes(self) -> None:
        producer = KafkaSystemProducer(SETTINGS)
        with pytest.raises(
            SerdeError,
            match=r"cannot send to k\.out: a Kafka message must be bytes or None, got dict; "
            r"set a msg serde",
        ):
            producer.send(SystemStream("k", "out"), 0, None, {"a": 1})
        with pytest.raises(
            SerdeError, match=r"a Kafka key must be bytes or None, got str; set a key"
        ):
            producer.send(SystemStream("k", "out"), 0, "key", b"x")

    def test_a_producer_that_has_not_started_refuses_sends(self) -> None:
        producer = KafkaSystemProducer(SETTINGS)
        with pytest.raises(StreamSystemError, match=r"'out': the kafka producer of system 'k' has"):
            producer.send(SystemStream("k", "out"), 0, None, bytearray(b"x"))

    async def test_flush_and_stop_without_a_start_do_nothing(self) -> None:
        producer = KafkaSystemProducer(SETTINGS)
        await producer.flush()
        await producer.stop()
        assert producer.failed_sends == 0


class _PublicOnly:
    """A batch builder with aiokafka's public append only."""

    def __init__(self, builder: Any) -> None:
        self.inner = builder

    def append(self, *, timestamp: Any, key: Any, value: Any) -> Any:
        return self.inner.append(timestamp=timestamp, key=key, value=value)


class TestOpenBatch:
    """The producer appends to aiokafka's record batch builder directly; a builder that is
    not as expected gets its public append. Either way the batch holds the same records."""

    @staticmethod
    def fill(builder: Any) -> tuple[int, list[tuple[int, bytes | None, bytes]]]:
        batch = OpenBatch(builder, ("out", 0))
        while batch.append(batch.count, None, b"k%d" % batch.count, b"v" * 50, NO_HEADERS):
            batch.count += 1
        records = MemoryRecords(bytes((getattr(builder, "inner", builder))._build()))
        read = [(r.offset, r.key, r.value) for r in records.next_batch()]
        return batch.count, read

    def test_direct_and_public_appends_build_the_same_batch(self) -> None:
        direct = BatchBuilder(1024, 0)
        assert OpenBatch(direct, ("out", 0)).append == direct._builder.append
        count, read = self.fill(direct)
        assert count == len(read) > 5
        assert read == [(i, b"k%d" % i, b"v" * 50) for i in range(count)]
        public = _PublicOnly(BatchBuilder(1024, 0))
        assert self.fill(public) == (count, read)


class TestConnect:
    async def test_gives_up_after_the_timeout_naming_the_servers(self) -> None:
        attempts: list[int] = []

        async def unreachable() -> None:
            attempts.append(1)
            raise kafka_errors.KafkaConnectionError("Unable to bootstrap from [('h', 1)]")

        with (
            capture_logs() as logs,
            pytest.raises(
                StreamSystemError,
                match=r"^cannot reach Kafka at h:1 after 1 attempts over 0\.0 s: "
                r"KafkaConnectionError: Unable to bootstrap",
            ),
        ):
            await connect(unreachable, servers="h:1", timeout_ms=0, system="k", client="admin")
        assert len(attempts) == 1
        assert [(e["event"], e["bootstrap_servers"], e["client"]) for e in logs] == [
            ("broker_unreachable", "h:1", "admin")
        ]
        # The outage goes on: a call that gives up again is in it, and only an answer ends it.
        assert OUTAGES.is_open("k", "h:1")
        with capture_logs() as again, pytest.raises(StreamSystemError):
            await connect(unreachable, servers="h:1", timeout_ms=0, system="k", client="producer")
        assert again == []
        with capture_logs() as ended:
            OUTAGES.answered("k", "h:1")
        assert [(e["event"], e["failed_attempts"]) for e in ended] == [("broker_reachable", 2)]

    async def test_retries_until_the_broker_answers(self) -> None:
        answers = iter([kafka_errors.KafkaConnectionError("down"), "client"])

        async def flaky() -> str:
            answer = next(answers)
            if isinstance(answer, BaseException):
                raise answer
            return answer

        with capture_logs() as logs:
            client = await connect(flaky, servers="h:1", timeout_ms=10_000, system="k", client="c")
        assert client == "client"
        assert [(e["event"], e.get("error"), e.get("failed_attempts")) for e in logs] == [
            ("broker_unreachable", "KafkaConnectionError: down", None),
            ("broker_reachable", None, 1),
        ]

    async def test_other_kafka_errors_fail_at_once(self) -> None:
        async def refused() -> None:
            raise kafka_errors.SaslAuthenticationFailed("bad password")

        with pytest.raises(
            StreamSystemError,
            match=r"cannot connect the Kafka producer of system 'k' to h:1: "
            r"SaslAuthenticationFailed: .*bad password",
        ):
            await connect(refused, servers="h:1", timeout_ms=60_000, system="k", client="producer")


class _UpdatingNetwork:
    """aiokafka's network client's metadata update, answered (True) or not (False)."""

    def __init__(self, answers: list[bool]) -> None:
        self._retry_backoff = 0.2
        self._answers = answers

    async def _metadata_update(self, cluster: Any, topics: Any) -> bool:
        return self._answers.pop(0)


class _Client:
    def __init__(self, network: _UpdatingNetwork) -> None:
        self._client = network


async def test_a_metadata_request_no_broker_answered_is_followed_by_the_backoff() -> None:
    network = _UpdatingNetwork([False, True])
    pace_metadata(_Client(network))
    began = time.monotonic()
    assert await network._metadata_update(None, set()) is False
    unanswered = time.monotonic() - began
    began = time.monotonic()
    assert await network._metadata_update(None, set()) is True
    answered = time.monotonic() - began
    assert unanswered >= 0.2 > answered


class _Cluster:
    """aiokafka's ClusterMetadata, knowing the topics of ``known``."""

    def __init__(self, known: set[str]) -> None:
        self._known = known

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0} if topic in self._known else None


async def test_an_answer_without_a_topic_asked_for_is_followed_by_the_backoff() -> None:
    """A consumer whose topic was deleted asks for its metadata again as soon as an answer
    lacks it: without the backoff, thousands of requests a second until the job fails."""
    network = _UpdatingNetwork([True, True])
    pace_metadata(_Client(network), missing=True)
    cluster = _Cluster({"kept"})
    began = time.monotonic()
    assert await network._metadata_update(cluster, {"kept", "deleted"}) is True
    lacking = time.monotonic() - began
    began = time.monotonic()
    assert await network._metadata_update(cluster, {"kept"}) is True
    complete = time.monotonic() - began
    assert lacking >= 0.2 > complete


async def test_other_clients_are_not_held_back_by_a_topic_an_answer_lacks() -> None:
    """A producer's topic is missing from answers while it is being created (aiokafka waits
    its backoff between those already), and a deleted topic a client still tracks would hold
    back its every update: only the system consumer's client (``missing``) waits there."""
    network = _UpdatingNetwork([True])
    pace_metadata(_Client(network))
    began = time.monotonic()
    assert await network._metadata_update(_Cluster({"kept"}), {"kept", "creating"}) is True
    assert time.monotonic() - began < 0.2


class _AddingNetwork(_UpdatingNetwork):
    """An update during which a topic is added to the client's set (aiokafka's ``add_topic``
    adds to the very set the update was given)."""

    async def _metadata_update(self, cluster: Any, topics: Any) -> bool:
        topics.add("added")
        await asyncio.sleep(0)
        return self._answers.pop(0)


async def test_a_topic_added_while_the_request_was_out_is_not_one_it_lacks() -> None:
    """A producer's first send to a topic adds it while a metadata request is out: the answer
    to that request lacks it, not being asked for it, and must not hold the waiters back."""
    network = _AddingNetwork([True])
    pace_metadata(_Client(network), missing=True)
    began = time.monotonic()
    assert await network._metadata_update(_Cluster({"kept"}), {"kept"}) is True
    assert time.monotonic() - began < 0.2


class TestOneOutageIsTwoLines:
    async def test_every_client_and_attempt_of_an_outage_shares_one_pair_of_events(self) -> None:
        down = [True]

        async def call() -> str:
            if down[0]:
                raise kafka_errors.NodeNotReadyError("node 1")
            return "described"

        async def restore() -> None:
            await asyncio.sleep(
                1.2
            )  # two failed attempts of each caller (0 and 0.5 s); 1.5 s works
            down[0] = False

        def retried(client: str) -> Any:
            return retrying(
                call,
                what="describe Kafka topics ['t']",
                fatal=None,
                servers="h:2",
                timeout_ms=10_000,
                system="k",
                client=client,
            )

        with capture_logs() as logs:
            results = await asyncio.gather(retried("admin"), retried("producer"), restore())
        assert results[:2] == ["described", "described"]
        assert [(e["event"], e["log_level"]) for e in logs] == [
            ("broker_unreachable", "warning"),
            ("broker_reachable", "info"),
        ]
        assert logs[0]["error"] == "NodeNotReadyError: node 1"
        assert logs[1]["failed_attempts"] == 4 and logs[1]["outage_s"] >= 1.0

    def test_an_attempt_begun_during_the_outage_just_closed_opens_no_new_one(self) -> None:
        outages = Outages()
        error = kafka_errors.KafkaConnectionError("refused")
        with capture_logs() as logs:
            outages.failed("k", "h:5", "consumer", error)
            begun = time.monotonic()  # a probe starts while the broker is still away
            outages.answered("k", "h:5")
            outages.failed("k", "h:5", "consumer", TimeoutError(), attempted_at=begun)
            outages.failed("k", "h:5", "consumer", error, attempted_at=time.monotonic())
        assert [e["event"] for e in logs] == [
            "broker_unreachable",
            "broker_reachable",
            "broker_unreachable",  # a fresh attempt failing is a new outage
        ]

    async def test_a_call_gives_up_after_the_timeout_naming_what_it_did_and_the_key(
        self,
    ) -> None:
        async def call() -> None:
            raise kafka_errors.NodeNotReadyError("node 1")

        with pytest.raises(
            StreamSystemError,
            match=r"^cannot reach Kafka at h:3 to describe Kafka topics \['t'\] after 2 attempts "
            r"over 0\.5 s: NodeNotReadyError: node 1 \(system 'k'; check "
            r"systems\.k\.bootstrap\.servers, or allow more time with "
            r"systems\.k\.connect\.timeout\.ms, now 500\)$",
        ):
            await retrying(
                call,
                what="describe Kafka topics ['t']",
                fatal=None,
                servers="h:3",
                timeout_ms=500,
                system="k",
                client="admin",
            )

    async def test_other_errors_are_not_retried(self) -> None:
        calls: list[int] = []

        async def call() -> None:
            calls.append(1)
            raise kafka_errors.TopicAuthorizationFailedError("t")

        with pytest.raises(StreamSystemError, match=r"^cannot describe: TopicAuthorization"):
            await retrying(
                call,
                what="describe",
                fatal=lambda exc: StreamSystemError(f"cannot describe: {describe(exc)}"),
                servers="h:4",
                timeout_ms=10_000,
                system="k",
                client="admin",
            )
        assert calls == [1]


class TestContactWatch:
    async def test_a_broker_silent_for_longer_than_the_timeout_fails_the_check(self) -> None:
        async def failing() -> None:
            raise kafka_errors.KafkaConnectionError("connection refused")

        watch = _watch(failing)
        start = asyncio.get_running_loop().time()
        with capture_logs() as logs:
            watch.check(start + 0.5)  # idle past the probe interval: a probe starts
            await _settle()
        assert [e["event"] for e in logs] == ["broker_unreachable"]
        watch.check(start + 0.9)  # silent, but not for longer than the timeout yet
        with pytest.raises(
            StreamSystemError,
            match=r"^lost Kafka at h:1: no answer for 1\.1 s after 1 failed checks: "
            r"KafkaConnectionError: connection refused",
        ):
            watch.check(start + 1.1)
        await watch.close()

    async def test_records_or_an_answering_probe_keep_it_alive(self) -> None:
        probes: list[int] = []

        async def answering() -> None:
            probes.append(1)

        watch = _watch(answering)
        start = asyncio.get_running_loop().time()
        watch.contact(start + 0.2)
        watch.check(start + 0.3)  # heard from 0.1 s ago: no probe
        await _settle()
        assert probes == []
        watch.check(start + 5.0)
        await _settle()
        assert probes == [1]
        watch.check(start + 5.0)  # the probe answered: no error, however long the silence
        await watch.close()

    async def test_a_probe_failing_otherwise_is_reported(self) -> None:
        async def forbidden() -> None:
            raise kafka_errors.TopicAuthorizationFailedError("t")

        watch = _watch(forbidden)
        watch.check(asyncio.get_running_loop().time() + 1)
        await _settle()
        with pytest.raises(StreamSystemError, match=r"the Kafka consumer of system 'k' failed: "):
            watch.check(asyncio.get_running_loop().time())
        await watch.close()


def _watch(probe: Any) -> ContactWatch:
    return ContactWatch(probe, servers="h:1", timeout_ms=1000, system="k", client="consumer")


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_only_the_kafka_package_imports_aiokafka() -> None:
    root = Path(samzapy.__file__).parent
    importers = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "aiokafka" for name in names):
                importers.append(path.relative_to(root).as_posix())
    assert importers, "the kafka package imports aiokafka"
    assert {p for p in importers if not p.startswith("system/kafka/")} == set()


def test_every_transient_client_message_is_one_aiokafka_logs() -> None:
    """An aiokafka release that rewords a message would let it through at error level again."""
    import aiokafka

    from samzapy.system.kafka.client_logs import TRANSIENT_MESSAGES

    literals: set[str] = set()
    for path in Path(aiokafka.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        literals.update(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )
    assert TRANSIENT_MESSAGES - literals == set()


@pytest.mark.parametrize(
    ("code", "message", "transient"),
    [
        (
            38,
            "Unable to replicate the partition 1 time(s): All brokers are currently fenced.",
            True,
        ),
        (38, "Replication factor: 3 larger than available brokers: 1.", False),
        (41, "This is not the correct controller for this cluster.", True),
        (36, "Topic 't' already exists.", False),
    ],
)
def test_a_fenced_broker_is_a_transient_topic_error(
    code: int, message: str, transient: bool
) -> None:
    from samzapy.system.kafka.errors import transient_topic_error

    assert transient_topic_error(code, message) is transient


async def test_a_stream_given_its_own_linger_holds_its_batches_that_long() -> None:
    class _Cluster:
        def partitions_for_topic(self, topic: str) -> set[int]:
            return {0}

    class _AioProducer:
        client = type("Client", (), {"cluster": _Cluster()})()

        def create_batch(self) -> Any:
            return BatchBuilder(1024, 0)

    producer = KafkaSystemProducer(SETTINGS)
    producer._producer = _AioProducer()
    producer.linger("mid", 50)
    loop = asyncio.get_running_loop()
    for topic, linger_s in (("mid", 0.05), ("out", 0.005)):  # out: the 5 ms default
        before = loop.time()
        batch = producer._new_batch((topic, 0))
        after = loop.time()
        assert batch.timer is not None
        batch.timer.cancel()
        # Due that long after the batch was made (bounds, not a guess at how long making it
        # took: a busy machine took more than 4 ms once).
        assert before + linger_s <= batch.timer.when() <= after + linger_s


@pytest.mark.parametrize(
    ("options", "linger_s", "batch_bytes"),
    [
        ({}, 0.1, 1 << 16),
        ({"producer.linger.ms": 7, "producer.batch.size": 4096}, 0.007, 4096),
    ],
)
async def test_a_transactional_producer_lingers_longer_unless_the_job_says(
    options: dict[str, Any], linger_s: float, batch_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from samzapy.system.kafka import transactional

    settings = kafka_settings("k", {"bootstrap.servers": "127.0.0.1:9", **options})
    producer = transactional.KafkaTransactionalProducer(settings, "job-Partition_0", timeout_ms=1)
    assert producer._linger_s == pytest.approx(linger_s)
    made: dict[str, Any] = {}

    async def started(client: Any) -> Any:
        return client

    def aiokafka_producer(**kwargs: Any) -> dict[str, Any]:
        made.update(kwargs)
        return kwargs

    monkeypatch.setattr(transactional, "started", started)
    monkeypatch.setattr(transactional, "AIOKafkaProducer", aiokafka_producer)
    await producer._open_producer()
    assert made["max_batch_size"] == batch_bytes
    assert made["transactional_id"] == "job-Partition_0"


def test_a_fenced_transactional_producer_names_the_transaction_timeout_too() -> None:
    """The broker answers a producer whose transaction it aborted for its timeout as it
    answers one whose id another producer claimed: the error names both causes."""
    from aiokafka.errors import ProducerFenced

    from samzapy.api.errors import TaskFencedError
    from samzapy.system.kafka import transactional

    settings = kafka_settings("k", {"bootstrap.servers": "127.0.0.1:9"})
    producer = transactional.KafkaTransactionalProducer(settings, "job-P0", timeout_ms=60_000)
    error = producer._error("commit its transaction", ProducerFenced())
    assert isinstance(error, TaskFencedError)
    assert str(error).startswith(
        "the transactional producer 'job-P0' was fenced: another container claimed its id, or "
        "the broker aborted its transaction for staying open longer than "
        "task.transaction.timeout.ms (60000 ms) (ProducerFenced"
    )


class _Coordinator:
    """aiokafka's group coordinator, answering an OffsetCommit with ``codes`` by topic."""

    group_id, generation, member_id = "g", -1, ""

    def __init__(self, codes: list[tuple[str, list[tuple[int, int]]]]) -> None:
        self._codes = codes

    async def ensure_coordinator_known(self) -> None:
        return None

    async def _send_req(self, request: Any) -> Any:
        return type("Response", (), {"topics": self._codes})()


async def test_a_refused_group_commit_names_the_partition_refused() -> None:
    """A commit that includes a deleted input's partitions is refused for them alone: the
    warning (``group_commit_failed``) says which, not only that some topic or partition does
    not exist."""
    ssps = {SystemStreamPartition("kafka", t, p): 3 for t in ("kept", "gone") for p in (0, 1)}
    coordinator = _Coordinator([("kept", [(0, 0), (1, 0)]), ("gone", [(0, 0), (1, 3)])])
    member = type("Member", (), {"_coordinator": coordinator})()
    offsets = KafkaGroupOffsets(SETTINGS, "g", member=lambda: member)
    with pytest.raises(StreamSystemError) as refused:
        await offsets.commit(ssps)
    assert str(refused.value) == (
        "cannot commit offsets to consumer group 'g': UnknownTopicOrPartitionError: partition 1 "
        "of Kafka topic 'gone': This request is for a topic or partition that does not exist "
        "on this broker."
    )


class _MetadataClient:
    """aiokafka's network client, whose metadata answers lack the topics of ``lacking``, one
    answer each."""

    def __init__(self, lacking: list[set[str]]) -> None:
        self._lacking = lacking
        self.cluster = _Cluster(set())

    async def force_metadata_update(self) -> bool:
        self.cluster = _Cluster({"t"} - (self._lacking.pop(0) if self._lacking else set()))
        return True


async def _watched(client: _MetadataClient) -> None:
    """Polls a TopicWatch of topic ``t`` (partitions 0, 1) through two checks."""
    watch = TopicWatch(client, {"t": "0, 1"}, servers="h:1", system="k", interval_s=0.05)
    loop = asyncio.get_running_loop()
    try:
        for _ in range(30):
            watch.check(loop.time())
            await asyncio.sleep(0.01)
    finally:
        await watch.close()


async def test_a_topic_missing_from_two_answers_in_a_row_fails_the_poll() -> None:
    with pytest.raises(
        StreamSystemError,
        match=r"^the Kafka consumer of system 'k' failed: UnknownTopicOrPartitionError: Kafka "
        r"topic 't' no longer exists at h:1 \(deleted while it was read\?\): its partitions "
        r"0, 1 cannot be read$",
    ):
        await _watched(_MetadataClient([set(), {"t"}, {"t"}]))


class _PacedMetadataClient(_MetadataClient):
    """A consumer's client whose answers that lack a topic wait its backoff (``pace_metadata``
    with ``missing``): 0.6 s here, so that two such answers outlast the check interval."""

    _retry_backoff = 0.6

    async def force_metadata_update(self) -> bool:
        updated = await super().force_metadata_update()
        if self.cluster.partitions_for_topic("t") is None:
            await asyncio.sleep(self._retry_backoff)
        return updated


async def test_a_check_allows_for_the_backoff_after_each_answer_that_lacks_the_topic() -> None:
    """A check of two paced answers takes twice the backoff: timed out at the interval alone
    (or the 1 s least), the deleted topic was never reported."""
    client = _PacedMetadataClient([{"t"}, {"t"}])
    watch = TopicWatch(client, {"t": "0, 1"}, servers="h:1", system="k", interval_s=0.05)
    loop = asyncio.get_running_loop()
    try:
        with pytest.raises(StreamSystemError, match="no longer exists"):
            for _ in range(200):
                watch.check(loop.time())
                await asyncio.sleep(0.01)
    finally:
        await watch.close()


class _FailingMetadataClient(_MetadataClient):
    async def force_metadata_update(self) -> bool:
        raise RuntimeError("a bug")


async def test_an_unexpected_error_of_a_check_is_logged_and_the_next_check_runs() -> None:
    client = _FailingMetadataClient([])
    with structlog.testing.capture_logs() as logs:
        await _watched(client)
    failed = [e for e in logs if e["event"] == "topic_check_failed"]
    assert len(failed) >= 2, logs  # one each check: the task's error was retrieved
    assert failed[0]["error"] == "RuntimeError('a bug')"


async def test_one_answer_without_the_topic_is_asked_again_before_the_poll_fails() -> None:
    """A broker whose metadata lags behind the cluster's (just restarted) may answer without
    a topic that exists: the job goes on when the next answer has it."""
    await _watched(_MetadataClient([{"t"}, set(), set(), {"t"}]))


async def test_the_probe_s_confirm_shares_the_watch_s_checks() -> None:
    """``TopicWatch.confirm`` (the idle-time probe's topic check) runs a check when none is
    fresh, takes the last one while it is, and a topic it found gone fails the next poll."""
    client = _MetadataClient([set(), {"t"}, {"t"}])
    asked: list[int] = []
    update = client.force_metadata_update

    async def counted() -> bool:
        asked.append(1)
        return await update()

    client.force_metadata_update = counted  # type: ignore[method-assign]
    watch = TopicWatch(client, {"t": "0, 1"}, servers="h:1", system="k", interval_s=0.2)
    loop = asyncio.get_running_loop()
    try:
        assert await watch.confirm() and await watch.confirm()
        assert len(asked) == 1
        watch.check(loop.time())  # not due: the probe's check was the watch's
        assert len(asked) == 1
        await asyncio.sleep(0.2)
        assert not await watch.confirm()  # two answers without the topic
        assert len(asked) == 3
        with pytest.raises(StreamSystemError, match="no longer exists"):
            watch.check(loop.time())
    finally:
        await watch.close()
