"""One contract test class over every system admin (see samzapy/system/ports.py).

The adapters plug in through the harnesses of ``test_system_contract``: adding a harness
there (embedded or broker) runs these tests over it too. Tests take stream names from
``harness.stream(...)``, so on a shared broker every test has topics of its own. Offsets of a
new stream start at 0 on every adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_system_contract import (
    ALL_HARNESSES,
    SYSTEM,
    KafkaHarness,
    SystemHarness,
    make_harness,
)

from samzapy.api.errors import StreamSystemError
from samzapy.api.system import SystemStream, SystemStreamPartition
from samzapy.system.file.factory import FileSystemFactory
from samzapy.system.inmemory.factory import InMemorySystemFactory
from samzapy.system.ports import OffsetBounds, OffsetDefault, SystemAdmin

EMPTY = OffsetBounds(None, "0")


@pytest.fixture(params=ALL_HARNESSES)
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SystemHarness]:
    built = make_harness(request.param, tmp_path, request)
    yield built
    await built.close()


@pytest.fixture
async def admin(harness: SystemHarness) -> AsyncIterator[SystemAdmin]:
    started = harness.factory(bounded=False).get_admin()
    await started.start()
    yield started
    await started.stop()


def ssp(stream: str, partition: int) -> SystemStreamPartition:
    return SystemStreamPartition(SYSTEM, stream, partition)


class TestAdminContract:
    async def test_an_empty_partition_has_no_oldest_offset(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        stream = harness.stream("in")
        await harness.create_stream(stream, 2)
        assert await admin.offset_bounds([ssp(stream, 0), ssp(stream, 1)]) == {
            ssp(stream, 0): EMPTY,
            ssp(stream, 1): EMPTY,
        }

    async def test_bounds_cover_what_was_written(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        stream = harness.stream("in")
        await harness.create_stream(stream, 2)
        await harness.write(stream, 1, [b"a", b"b", b"c"])
        assert await admin.offset_bounds([ssp(stream, 0), ssp(stream, 1)]) == {
            ssp(stream, 0): EMPTY,
            ssp(stream, 1): OffsetBounds("0", "3"),
        }
        await harness.write(stream, 1, [b"d"])
        assert await admin.offset_bounds([ssp(stream, 1)]) == {
            ssp(stream, 1): OffsetBounds("0", "4")
        }

    async def test_bounds_cover_what_the_producer_flushed(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        stream = harness.stream("out")
        await harness.create_stream(stream, 1)
        producer = harness.factory(bounded=False).get_producer()
        await producer.start()
        producer.send(SystemStream(SYSTEM, stream), 0, None, b"one")
        producer.send(SystemStream(SYSTEM, stream), 0, None, b"two")
        await producer.flush()
        await producer.stop()
        assert await admin.offset_bounds([ssp(stream, 0)]) == {
            ssp(stream, 0): OffsetBounds("0", "2")
        }

    async def test_the_upcoming_offset_is_the_next_message_s(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        stream = harness.stream("in")
        await harness.create_stream(stream, 1)
        await harness.write(stream, 0, [b"old-0", b"old-1"])
        upcoming = (await admin.offset_bounds([ssp(stream, 0)]))[ssp(stream, 0)].upcoming
        consumer = harness.factory(bounded=False).get_consumer()
        consumer.register(ssp(stream, 0), upcoming, OffsetDefault.OLDEST)
        await consumer.start()
        await harness.write(stream, 0, [b"new"])
        batch = await consumer.poll([ssp(stream, 0)], 10, 5.0)
        await consumer.stop()
        envelopes = batch[ssp(stream, 0)]
        assert [(e.offset, e.message) for e in envelopes] == [(upcoming, b"new")]

    @pytest.mark.parametrize("held", [0, 2])
    async def test_the_offset_before_a_start_resumes_at_it(
        self, harness: SystemHarness, admin: SystemAdmin, held: int
    ) -> None:
        """A partition nothing was processed of is checkpointed as processed up to the
        offset before its start (``container/plan.py``): a restart resumes at the start,
        also of an empty partition."""
        stream = harness.stream("in")
        await harness.create_stream(stream, 1)
        if held:
            await harness.write(stream, 0, [b"old-0", b"old-1"][:held])
        upcoming = (await admin.offset_bounds([ssp(stream, 0)]))[ssp(stream, 0)].upcoming
        before = admin.offset_before(upcoming)
        assert before is not None
        assert admin.offset_after(before) == upcoming
        assert admin.compare_offsets(before, upcoming) < 0

    async def test_create_stream_takes_replication_and_topic_config(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        compacted, default = harness.stream("compacted"), harness.stream("default-replicas")
        await admin.create_stream(
            compacted, 1, replication_factor=1, config={"cleanup.policy": "compact"}
        )
        await admin.create_stream(default, 2, replication_factor=None, config=None)
        assert await admin.partition_counts([compacted, default]) == {compacted: 1, default: 2}
        assert await admin.offset_bounds([ssp(compacted, 0)]) == {ssp(compacted, 0): EMPTY}

    async def test_stream_configs_are_the_system_s_or_unknown(
        self, harness: SystemHarness, admin: SystemAdmin
    ) -> None:
        """Kafka describes its topics' settings, defaults included, and says which topic it
        did not describe; the memory and file systems have none (None: unknown)."""
        compacted, deleted = harness.stream("compacted"), harness.stream("deleted")
        await admin.create_stream(compacted, 1, config={"cleanup.policy": "compact"})
        await admin.create_stream(deleted, 1, config={"retention.ms": "3600000"})
        missing = harness.stream("missing")
        keys = ["cleanup.policy", "retention.ms"]
        configs = await admin.stream_configs([compacted, deleted, missing], keys)
        if not isinstance(harness, KafkaHarness):
            assert configs is None
            return
        assert configs is not None
        assert configs.found[compacted]["cleanup.policy"] == "compact"
        assert configs.found[deleted] == {"cleanup.policy": "delete", "retention.ms": "3600000"}
        assert "UnknownTopicOrPartition" in configs.unread[missing]

    async def test_topic_ids_are_kafka_s(self, harness: SystemHarness, admin: SystemAdmin) -> None:
        """Kafka gives each existing topic an ID (as its tools print it) and leaves a missing
        topic out; the memory and file systems give none (None). A topic made again gets a
        new one: tests/integration/test_recreated_input.py."""
        stream, missing = harness.stream("ids"), harness.stream("missing")
        await harness.create_stream(stream, 1)
        ids = await admin.topic_ids([stream, missing])
        if not isinstance(harness, KafkaHarness):
            assert ids is None
            return
        assert ids is not None and list(ids) == [stream] and len(ids[stream]) == 22
        assert await admin.topic_ids([stream]) == ids  # the same topic, the same ID


class TestInMemoryAdminOffsets:
    async def test_a_missing_stream_is_an_error_naming_it(self) -> None:
        admin = InMemorySystemFactory(SYSTEM, {"namespace": "admin-missing"}).get_admin()
        with pytest.raises(StreamSystemError, match="stream 'nope' does not exist"):
            await admin.offset_bounds([ssp("nope", 0)])


class TestFileAdminOffsets:
    """File offsets are line numbers, counted the way the file consumer counts them."""

    def factory(self, root: Path, *, follow: bool) -> FileSystemFactory:
        return FileSystemFactory(SYSTEM, {"path": str(root), "follow": follow})

    @pytest.mark.parametrize(
        ("content", "bounded", "following"),
        [
            (b"", EMPTY, EMPTY),
            (b"\n", OffsetBounds("0", "1"), OffsetBounds("0", "1")),
            (b"a\n\nb\n", OffsetBounds("0", "3"), OffsetBounds("0", "3")),
            (b"a\nparti", OffsetBounds("0", "2"), OffsetBounds("0", "1")),
            (b"parti", OffsetBounds("0", "1"), EMPTY),
        ],
    )
    async def test_a_last_line_without_newline_counts_only_in_bounded_mode(
        self, tmp_path: Path, content: bytes, bounded: OffsetBounds, following: OffsetBounds
    ) -> None:
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "0.jsonl").write_bytes(content)
        for follow, expected in ((False, bounded), (True, following)):
            admin = self.factory(tmp_path, follow=follow).get_admin()
            assert await admin.offset_bounds([ssp("in", 0)]) == {ssp("in", 0): expected}

    async def test_bounded_upcoming_is_where_the_consumer_ends(self, tmp_path: Path) -> None:
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "0.jsonl").write_bytes(b"a\n\nb\nc")
        factory = self.factory(tmp_path, follow=False)
        bounds = await factory.get_admin().offset_bounds([ssp("in", 0)])
        consumer = factory.get_consumer()
        consumer.register(ssp("in", 0), None, OffsetDefault.OLDEST)
        await consumer.start()
        envelopes = (await consumer.poll([ssp("in", 0)], 100, 1.0))[ssp("in", 0)]
        await consumer.stop()
        last = [e.offset for e in envelopes if not e.is_end_of_stream][-1]
        assert bounds[ssp("in", 0)].upcoming == str(int(last) + 1) == "4"

    async def test_counts_lines_across_chunks(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr("samzapy.system.file.factory.CHUNK_SIZE", 4)
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "0.jsonl").write_bytes(b"abc\nde\n\nfghij\nk")
        admin = self.factory(tmp_path, follow=True).get_admin()
        assert await admin.offset_bounds([ssp("in", 0)]) == {ssp("in", 0): OffsetBounds("0", "4")}

    async def test_a_missing_partition_file_is_an_error_naming_it(self, tmp_path: Path) -> None:
        admin = self.factory(tmp_path, follow=False).get_admin()
        await admin.create_stream("in", 1)
        with pytest.raises(
            StreamSystemError, match=r"offsets of sys\.in#1: partition file .*in/1\.jsonl does not"
        ):
            await admin.offset_bounds([ssp("in", 0), ssp("in", 1)])


def test_a_system_whose_offsets_are_no_integers_has_no_offset_before_by_default() -> None:
    """A custom system that overrides the offset arithmetic it needs but not offset_before:
    its partitions without a checkpointed offset start at their default, as before."""
    offset_before = SystemAdmin.offset_before  # the port's own, as a subclass inherits it
    assert offset_before(None, "c0ffee@42") is None  # type: ignore[arg-type]
    assert offset_before(None, "42") == "41"  # type: ignore[arg-type]
