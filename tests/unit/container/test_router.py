"""The output router: which partition each message goes to, serialization and framing, and a
new stream's creation with the messages sent meanwhile kept in order."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import (
    IncomingMessageEnvelope,
    OutgoingMessageEnvelope,
    SerdeError,
    StreamSystemError,
    SystemStream,
    SystemStreamPartition,
    TaskError,
    TaskName,
)
from samzapy.container.collector import OutputRouter
from samzapy.container.send_errors import RefusingProducer
from samzapy.control.wire import decode
from samzapy.system.inmemory import InMemoryBroker
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.partitioner import partition_for
from samzapy.system.ports import SystemProducer
from samzapy.system.serde import JsonSerde, StringSerde

OUT = SystemStream("memory", "out")
NEW = SystemStream("memory", "new")


class RecordingProducer(SystemProducer):
    """Keeps what the router hands over, partition as chosen (None: the producer's choice)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None, Any, Any]] = []
        #: The partition counts it knows, as a Kafka producer's metadata would.
        self.counts: dict[str, int] = {}

    def send(
        self, system_stream: SystemStream, partition: int | None, key: Any, message: Any
    ) -> None:
        self.sent.append((system_stream.stream, partition, key, message))

    async def flush(self) -> None:
        return None

    def partition_count(self, stream: str) -> int | None:
        return self.counts.get(stream)


class Setup:
    def __init__(
        self, *, serdes: bool = False, framed: bool = False, pair: tuple[Any, Any] | None = None
    ) -> None:
        """``serdes``: string keys and json messages; ``pair``: these (key, message) serdes."""
        if pair is None:
            pair = (StringSerde(), JsonSerde()) if serdes else (None, None)
        self.broker = InMemoryBroker.for_namespace(f"router-{uuid.uuid4().hex[:8]}")
        self.broker.create_stream("out", 4)
        admin = InMemorySystemFactory("memory", {"namespace": self.broker.namespace}).get_admin()
        self.producer = RecordingProducer()
        self.errors: list[BaseException] = []
        self.router = OutputRouter(
            {"memory": self.producer},
            {"memory": admin},
            lambda ss: pair,
            lambda ss: 3,
            self.errors.append,
            framed=lambda ss: framed,
        )

    async def send(
        self, *envelopes: OutgoingMessageEnvelope
    ) -> list[tuple[str, int | None, Any, Any]]:
        for envelope in envelopes:
            self.router.send(envelope)
        await self.router.flush()
        return self.producer.sent


async def test_an_explicit_partition_wins() -> None:
    setup = Setup()
    sent = await setup.send(
        OutgoingMessageEnvelope(OUT, "m", key="k", partition_key="p", partition=2)
    )
    assert sent == [("out", 2, "k", "m")]


async def test_the_partition_key_wins_over_the_key() -> None:
    setup = Setup()
    sent = await setup.send(OutgoingMessageEnvelope(OUT, "m", key="k", partition_key="member-7"))
    assert sent == [("out", partition_for(b"member-7", 4), "k", "m")]


async def test_the_key_picks_the_partition_with_kafkas_partitioner() -> None:
    setup = Setup()
    keys = [f"key-{i}" for i in range(50)]
    sent = await setup.send(*(OutgoingMessageEnvelope(OUT, i, key=k) for i, k in enumerate(keys)))
    assert [p for _, p, _, _ in sent] == [partition_for(k.encode(), 4) for k in keys]
    assert {p for _, p, _, _ in sent} == {0, 1, 2, 3}


@pytest.mark.parametrize("key", [b"k-1", bytearray(b"k-1"), memoryview(b"xk-1")[1:]])
async def test_a_bytes_like_key_without_a_serde_is_hashed_as_its_bytes(key: Any) -> None:
    """The kafka system's default key serde is none: a bytearray or memoryview key goes out
    as its bytes, and must land where Kafka's Java producer puts those bytes (not where its
    text, ``bytearray(b'k-1')``, would)."""
    setup = Setup()
    sent = await setup.send(
        OutgoingMessageEnvelope(OUT, "m", key=key),
        OutgoingMessageEnvelope(OUT, "m", partition_key=key),
    )
    assert [p for _, p, _, _ in sent] == [partition_for(b"k-1", 4)] * 2


async def test_with_a_key_serde_the_serialized_key_is_hashed() -> None:
    setup = Setup(serdes=True)
    sent = await setup.send(OutgoingMessageEnvelope(OUT, {"n": 1}, key="k"))
    assert sent == [("out", partition_for(b"k", 4), b"k", b'{"n":1}')]


async def test_without_a_key_the_producer_chooses() -> None:
    setup = Setup()
    sent = await setup.send(OutgoingMessageEnvelope(OUT, "m"))
    assert sent == [("out", None, None, "m")]


async def test_a_partition_out_of_range_is_an_error_naming_stream_and_count() -> None:
    setup = Setup()
    await setup.send()  # the route to "out" is not open yet: open it first
    setup.router.send(OutgoingMessageEnvelope(OUT, "first", partition=0))
    await setup.router.flush()
    with pytest.raises(
        StreamSystemError, match=r"partition 4 is out of range for memory.out, which has 4"
    ):
        setup.router.send(OutgoingMessageEnvelope(OUT, "m", partition=4))


async def test_a_new_stream_is_created_and_messages_sent_meanwhile_keep_their_order() -> None:
    setup = Setup()
    setup.router.send(OutgoingMessageEnvelope(NEW, "a", partition=2))
    setup.router.broadcast_control(NEW, b"\x02control")
    setup.router.send(OutgoingMessageEnvelope(NEW, "b", key="x"))
    assert setup.producer.sent == [], "nothing is sent before the partition count is known"
    await setup.router.flush()
    assert setup.broker.partition_count("new") == 3
    assert setup.producer.sent == [
        ("new", 2, None, "a"),
        ("new", 0, None, b"\x02control"),
        ("new", 1, None, b"\x02control"),
        ("new", 2, None, b"\x02control"),
        ("new", partition_for(b"x", 3), "x", "b"),
    ]


async def test_framed_streams_get_a_type_byte_and_need_bytes() -> None:
    setup = Setup(serdes=True, framed=True)
    sent = await setup.send(OutgoingMessageEnvelope(OUT, {"n": 1}, partition=0))
    assert decode(sent[0][3]) == (0, b'{"n":1}')
    raw = Setup(framed=True)
    await raw.send(OutgoingMessageEnvelope(OUT, b"ok", partition=0))
    with pytest.raises(SerdeError, match=r"memory.out is framed .* got dict"):
        raw.router.send(OutgoingMessageEnvelope(OUT, {"not": "bytes"}, partition=0))


class Refusing:
    """A job's own serde that fails the way user code does, with any exception."""

    def to_bytes(self, obj: Any) -> bytes:
        raise ValueError(f"no bytes for {obj!r}")

    def from_bytes(self, data: bytes) -> Any:
        return data


REFUSED = [
    pytest.param(
        (StringSerde(), JsonSerde()),
        OutgoingMessageEnvelope(OUT, float("nan"), key="k"),
        r"the message serde refused the message: json serde cannot encode nan",
        id="json-nan",
    ),
    pytest.param(
        (StringSerde(), JsonSerde()),
        OutgoingMessageEnvelope(OUT, {"n": 1}, key=5),
        r"the key serde refused the key: string serde expects a str, got 5",
        id="key",
    ),
    pytest.param(
        (StringSerde(), JsonSerde()),
        OutgoingMessageEnvelope(OUT, {"n": 1}, key=5, partition=1),
        r"the key serde refused the key: string serde expects a str, got 5",
        id="key-explicit-partition",
    ),
    pytest.param(
        (StringSerde(), JsonSerde()),
        OutgoingMessageEnvelope(OUT, {"n": 1}, key="k", partition_key=7),
        r"the key serde refused the partition key: string serde expects a str",
        id="partition-key",
    ),
    pytest.param(
        (None, Refusing()),
        OutgoingMessageEnvelope(OUT, "m", partition=1),
        r"the message serde refused the message: ValueError: no bytes for 'm'",
        id="own-serde",
    ),
]


@pytest.mark.parametrize(("pair", "envelope", "refusal"), REFUSED)
@pytest.mark.parametrize("ready", [True, False], ids=["route-ready", "first-send"])
async def test_a_key_or_message_its_serde_refuses_fails_naming_the_stream(
    pair: tuple[Any, Any], envelope: OutgoingMessageEnvelope, refusal: str, ready: bool
) -> None:
    """A user mixing producers needs to know which output, and which part of the message,
    could not be encoded: in the task's call once the stream is known, at the flush (before
    any checkpoint) for the sends that waited for it."""
    setup = Setup(pair=pair)
    match = rf"^cannot send to memory.out: {refusal}"
    if ready:
        await setup.send(OutgoingMessageEnvelope(OUT, None, partition=0))
        with pytest.raises(SerdeError, match=match) as failed:
            setup.router.send(envelope)
    else:
        setup.router.send(envelope)
        with pytest.raises(SerdeError, match=match) as failed:
            await setup.router.flush()
    assert failed.value.__cause__ is not None
    assert [s for s in setup.producer.sent if s[3] is not None] == []


async def test_a_send_to_an_unknown_system_names_it() -> None:
    setup = Setup()
    with pytest.raises(StreamSystemError, match=r"no system named 'nowhere' is configured"):
        setup.router.send(OutgoingMessageEnvelope(SystemStream("nowhere", "x"), "m"))
    await asyncio.sleep(0)


@pytest.mark.parametrize("system", ["memory", "files"], ids=["connected", "not-connected"])
async def test_a_refusing_system_s_stream_is_not_looked_up_and_its_first_send_fails_the_job(
    system: str,
) -> None:
    """Under exactly-once (docs/configuration.md, task.processing.guarantee): "a send to
    another system fails the job", naming the task's message, whether the job had connected
    that system (an admin) or not; its stream is neither looked up nor created."""
    setup = Setup()
    admin = InMemorySystemFactory("memory", {"namespace": setup.broker.namespace}).get_admin()
    errors: list[BaseException] = []
    router = OutputRouter(
        {"kafka": RecordingProducer(), system: RefusingProducer(system, "kafka")},
        {"memory": admin},
        lambda ss: (None, None),
        lambda ss: 3,
        errors.append,
    )
    aside = SystemStream(system, "aside")
    read = IncomingMessageEnvelope(SystemStreamPartition("kafka", "in", 2), "41", None, "m")
    router.send(OutgoingMessageEnvelope(aside, "m", partition=1), TaskName("t"), origin=read)
    refusal = (
        f"cannot send to {aside}: task.processing.guarantee is exactly-once, and a task's "
        f"outputs commit in a transaction of kafka system 'kafka'; system '{system}' has none"
    )
    with pytest.raises(TaskError) as failed:
        await router.flush()
    assert str(failed.value) == (
        f"a send of task 't' (processing kafka.in#2 at offset 41) failed: {refusal}"
    )
    assert str(failed.value.__cause__) == refusal
    assert errors == [failed.value]
    assert setup.broker.partition_count("aside") is None


async def test_an_output_takes_up_partitions_its_producer_learned_of_at_the_next_flush() -> None:
    """As Kafka's Java producer at its metadata refresh: keys hash over the new count, and an
    explicit partition among the new ones is in range; what the producer does not know (yet),
    or a smaller count, changes nothing."""
    setup = Setup()
    keys = [f"key-{i}" for i in range(40)]
    await setup.send(*(OutgoingMessageEnvelope(OUT, "m", key=k) for k in keys))
    setup.producer.counts["out"] = 3
    with capture_logs() as logs:
        await setup.router.flush()
    assert logs == []
    setup.producer.counts["out"] = 8
    with capture_logs() as logs:
        await setup.router.flush()
    assert [e for e in logs if e["event"] == "output_partitions_added"] == [
        {
            "event": "output_partitions_added",
            "log_level": "info",
            "stream": "memory.out",
            "partitions_before": 4,
            "partitions_now": 8,
        }
    ]
    setup.producer.sent.clear()
    sent = await setup.send(
        *(OutgoingMessageEnvelope(OUT, "m", key=k) for k in keys),
        OutgoingMessageEnvelope(OUT, "m", partition=7),
    )
    assert [p for _, p, _, _ in sent] == [partition_for(k.encode(), 8) for k in keys] + [7]
    assert max(p for _, p, _, _ in sent[:-1]) >= 4


async def test_a_framed_stream_keeps_the_partition_count_it_was_looked_up_with() -> None:
    """An intermediate stream's count is the planner's: its replays and control records, and
    the tasks that read it, depend on it."""
    setup = Setup(framed=True, pair=(StringSerde(), StringSerde()))
    await setup.send(OutgoingMessageEnvelope(OUT, "m", key="k"))
    setup.producer.counts["out"] = 8
    keys = [f"key-{i}" for i in range(40)]
    sent = await setup.send(*(OutgoingMessageEnvelope(OUT, "m", key=k) for k in keys))
    assert [p for _, p, _, _ in sent[1:]] == [partition_for(k.encode(), 4) for k in keys]


def test_a_route_remembers_key_partitions_up_to_a_bound() -> None:
    from samzapy.container import route as routes
    from samzapy.system.partitioner import partition_for

    route = routes.Route(SystemStream("s", "t"), None, None, None, False)  # type: ignore[arg-type]
    route.partitions = 8
    keys = [f"k{i}".encode() for i in range(routes.PARTITION_CACHE_SIZE + 10)]
    for key in keys:
        assert route.partition_of(key) == partition_for(key, 8)
        assert route.partition_cache[key] == partition_for(key, 8)
    assert len(route.partition_cache) <= routes.PARTITION_CACHE_SIZE


def test_framed_streams_ask_their_producer_for_a_longer_linger() -> None:
    from samzapy.config import load_config, resolve
    from samzapy.container.assembly import FRAMED_LINGER_MS, linger_ms

    cfg = resolve(
        load_config(
            text=(
                "job.name: j\ntask.class: m:T\ntask.inputs: [k.in]\n"
                "systems.k.samza.factory: memory\n"
                "streams.mid: {samza.system: k, samza.intermediate: true}\n"
                "streams.slow: {samza.system: k, samza.intermediate: true, producer.linger.ms: 7}\n"
            )
        )
    )
    assert linger_ms(cfg, SystemStream("k", "mid"), framed=True) == FRAMED_LINGER_MS
    assert linger_ms(cfg, SystemStream("k", "slow"), framed=True) == 7
    assert linger_ms(cfg, SystemStream("k", "out"), framed=False) is None
