"""A container that failed stops at once even when its producers can deliver nothing more:
what they hold is dropped (``abandon``), counted in ``output_dropped``, never flushed; a clean
stop still flushes. The system is a plug-in loaded from its ``module:Class`` name."""

from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import pytest
from structlog.testing import capture_logs
from test_commit_protocol import RecordingAdmin

from samzapy import ClosableTask, OutgoingMessageEnvelope, RequestScope, StreamTask, SystemStream
from samzapy.container.systems import Systems
from samzapy.system.ports import (
    SystemAdmin,
    SystemConsumer,
    SystemFactory,
    SystemProducer,
)
from samzapy.testing import TestRunner


class UndeliverableProducer(SystemProducer):
    """Its brokers are gone: a flush never ends (as a Kafka producer's with batches it can no
    longer deliver); ``abandon`` drops what was sent."""

    made: ClassVar[list[UndeliverableProducer]] = []

    def __init__(self) -> None:
        self.sent = 0
        self.flushed = self.stopped = self.abandoned = False
        UndeliverableProducer.made.append(self)

    def send(
        self, system_stream: SystemStream, partition: int | None, key: Any, message: Any
    ) -> None:
        self.sent += 1

    async def flush(self) -> None:
        self.flushed = True
        if self.sent:
            await asyncio.Event().wait()

    async def stop(self) -> None:
        self.stopped = True
        await self.flush()

    async def abandon(self) -> int:
        self.abandoned = True
        return self.sent


class UndeliverableFactory(SystemFactory):
    def get_admin(self) -> SystemAdmin:
        return RecordingAdmin()

    def get_consumer(self) -> SystemConsumer:
        raise AssertionError("not an input system")

    def get_producer(self) -> SystemProducer:
        return UndeliverableProducer()


class ForwardThenFail(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message == 3:
            raise ValueError("message 3 is bad")
        collector.send(OutgoingMessageEnvelope(SystemStream("gone", "out"), envelope.message))


def runner(messages: list[int]) -> TestRunner:
    config = {
        "systems.gone.samza.factory": f"{__name__}:UndeliverableFactory",
        "task.commit.ms": 600_000,
    }
    return TestRunner(ForwardThenFail, config).add_input("in", messages)


def test_a_failed_container_drops_what_its_producers_hold_and_stops_at_once() -> None:
    UndeliverableProducer.made.clear()
    began = time.monotonic()
    with capture_logs() as logs, pytest.raises(Exception, match="message 3 is bad"):
        runner(list(range(10))).run(timeout=20)
    assert time.monotonic() - began < 10
    [producer] = UndeliverableProducer.made
    assert producer.abandoned and not producer.flushed and not producer.stopped
    [dropped] = [e for e in logs if e["event"] == "output_dropped"]
    assert dropped["system"] == "gone" and dropped["messages"] == 3
    assert dropped["log_level"] == "info"


def test_a_clean_stop_still_flushes() -> None:
    """A job whose inputs end stops cleanly: its final commit flushes the producers first,
    here without end, until the runner's timeout cancels the run (then it drops)."""
    UndeliverableProducer.made.clear()
    with pytest.raises(TimeoutError):
        runner([0, 1]).run(timeout=1)
    [producer] = UndeliverableProducer.made
    assert producer.flushed and producer.abandoned


class BoundedFactory(UndeliverableFactory):
    stop_wait_ms = 1500  # as a kafka system's connect.timeout.ms


def the_stops_bound_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stop's commits bounded by the stop alone, as in a container with a group lease,
    whose commits but a final one have no bound of their own: here, without one, the task's
    commit had its own, the same stop wait started a moment later, and on a loaded machine
    either could find its bound passed first (the job failed, its message the commit's)."""
    monkeypatch.setattr(
        Systems, "commit_wait_s", lambda self, final: self.stop_wait_s() if final else None
    )


class ForwardThenStop(StreamTask):
    """Asks for a stop at message 1, as SIGTERM does (the stop's final commit, not the one
    of inputs that ended)."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(SystemStream("gone", "out"), envelope.message))
        if envelope.message == 1:
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)


def test_a_clean_stop_waits_for_the_servers_up_to_the_systems_stop_wait_then_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/deploy.md: with the brokers gone, the final commit waits for them up to
    connect.timeout.ms, then the job fails, what the producers hold dropped. The commit's
    flush had waited for ever: a SIGTERM during an outage stopped nothing."""
    the_stops_bound_alone(monkeypatch)
    UndeliverableProducer.made.clear()
    config = {
        "systems.gone.samza.factory": f"{__name__}:BoundedFactory",
        "task.commit.ms": 600_000,
    }
    began = time.monotonic()
    with (
        capture_logs() as logs,
        pytest.raises(Exception, match=r"^the final commit got no answer within 1\.5 s"),
    ):
        TestRunner(ForwardThenStop, config).add_input("in", list(range(5))).run(timeout=20)
    assert time.monotonic() - began < 10
    [producer] = UndeliverableProducer.made
    assert producer.flushed and producer.abandoned and not producer.stopped
    assert [e["messages"] for e in logs if e["event"] == "output_dropped"] == [2]


def test_an_end_of_stream_commit_waits_for_the_servers_up_to_the_systems_stop_wait() -> None:
    """Every input ended: the commit after on_end_of_stream waits for the brokers up to
    connect.timeout.ms too, then the job fails naming the task and the step it was on,
    without task_ended. It had waited for as long as the brokers were away."""
    UndeliverableProducer.made.clear()
    config = {
        "systems.gone.samza.factory": f"{__name__}:BoundedFactory",
        "task.commit.ms": 600_000,
    }
    began = time.monotonic()
    with (
        capture_logs() as logs,
        pytest.raises(
            Exception,
            match=r"^task 'Partition 0' could not commit after end-of-stream: flushing its "
            r"outputs got no answer within 1\.5 s",
        ),
    ):
        TestRunner(ForwardThenFail, config).add_input("in", [0, 1]).run(timeout=10)
    assert time.monotonic() - began < 8
    [producer] = UndeliverableProducer.made
    assert producer.abandoned and not producer.stopped
    assert "task_ended" not in [e["event"] for e in logs]


class SendAtClose(StreamTask, ClosableTask):
    """Sends one message from ``close``, to a system it never wrote to before."""

    collector: Any = None

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.collector = collector

    def close(self) -> None:
        self.collector.send(OutgoingMessageEnvelope(SystemStream("gone", "out"), "closed"))


def test_a_clean_stop_bounds_the_commit_of_a_system_first_used_by_a_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stop's bound counts the systems in use when it waits, not when it began: a
    ``close`` that first writes to a system connects it after the wait began. Its commit had
    waited for ever."""
    the_stops_bound_alone(monkeypatch)
    UndeliverableProducer.made.clear()
    config = {
        "systems.gone.samza.factory": f"{__name__}:BoundedFactory",
        "task.commit.ms": 600_000,
    }
    began = time.monotonic()
    with pytest.raises(Exception, match=r"^the final commit got no answer within 1\.5 s"):
        TestRunner(SendAtClose, config).add_input("in", [0, 1]).run(timeout=10)
    assert time.monotonic() - began < 8
    [producer] = UndeliverableProducer.made
    assert producer.sent == 1 and producer.abandoned


class Forward(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(SystemStream("gone", "out"), envelope.message))


def test_a_periodic_commit_waits_for_the_servers_up_to_the_systems_stop_wait() -> None:
    """A container without a group lease (its inputs not all on Kafka): a periodic commit
    whose brokers are away fails the job after connect.timeout.ms, naming the task and the
    step. It had waited for as long as they were away, the job silent (no consumer of the
    brokers watched them)."""
    UndeliverableProducer.made.clear()
    config = {
        "systems.gone.samza.factory": f"{__name__}:BoundedFactory",
        "task.commit.ms": 100,
    }
    began = time.monotonic()
    with pytest.raises(
        Exception,
        match=r"^task 'Partition 0' could not commit: flushing its outputs got no answer "
        r"within 1\.5 s",
    ):
        TestRunner(Forward, config).add_input("in", [0, 1], end=False).run(timeout=10)
    assert time.monotonic() - began < 8
    [producer] = UndeliverableProducer.made
    assert producer.abandoned and not producer.stopped
