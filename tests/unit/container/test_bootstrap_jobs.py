"""Bootstrap inputs in a running container (memory system): every message of a task's
bootstrap partitions up to their heads is processed before its first other message, even
when the other input's messages arrive first; then both interleave; each task goes on alone.

The bootstrap stream ``profiles`` is read through a memory system of its own whose fetch
threshold is 2, so it trickles in two messages at a time while ``views`` is there at once.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from samzapy import AsyncStreamTask, RequestScope, StreamTask, SystemStreamPartition
from samzapy.config import load_config, resolve
from samzapy.container import SamzaContainer
from samzapy.container.slots import TURN_MESSAGES
from samzapy.system.inmemory import InMemoryBroker
from samzapy.testing import TestRunner

PROFILES = 200
#: More than a sync task's turn (slots.TURN_MESSAGES): the views cannot all be processed in
#: the turn before the consumer brings the late profiles.
VIEWS = 2 * TURN_MESSAGES
LATE = 20


def job(namespace: str, *, bootstrap: bool = True, **extra: Any) -> Any:
    cfg = {
        "job.name": "boot",
        "job.id": namespace,
        "task.class": "x:Y",
        "task.inputs": ["fast.views", "slow.profiles"],
        "task.checkpoint.factory": "memory",
        "systems.fast.samza.factory": "memory",
        "systems.fast.namespace": namespace,
        "systems.slow.samza.factory": "memory",
        "systems.slow.namespace": namespace,
        "systems.slow.samza.fetch.threshold": 2,
        "streams.profiles.samza.system": "slow",
        "streams.profiles.samza.bootstrap": bootstrap,
        **extra,
    }
    return resolve(load_config(text=json.dumps(cfg)))


def fill(partitions: dict[int, int], views: int = VIEWS) -> tuple[str, InMemoryBroker]:
    """A namespace with ``profiles`` (``partitions``: messages per partition, not ended) and
    ``views`` (``views`` messages in each partition, ended)."""
    namespace = f"boot-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("profiles", len(partitions))
    broker.create_stream("views", len(partitions))
    for p, count in partitions.items():
        for i in range(count):
            broker.append("profiles", p, None, f"profile-{i}")
        for i in range(views):
            broker.append("views", p, None, f"view-{i}")
    broker.end_stream("views")
    return namespace, broker


class Log:
    """What the tasks did, in order: ``(task partition, event, stream, message)``, the event
    ``start`` or ``done``; and whether the task was bootstrapping at its first view."""

    def __init__(self, broker: InMemoryBroker) -> None:
        self.broker = broker
        self.events: list[tuple[int, str, str, Any]] = []
        self.container: SamzaContainer | None = None
        self.first_view: set[int] = set()
        self.bootstrapping: dict[tuple[int, str], bool] = {}

    def started(self, envelope: Any) -> None:
        ssp: SystemStreamPartition = envelope.system_stream_partition
        p = ssp.partition
        self.events.append((p, "start", ssp.stream, envelope.message))
        if (p, ssp.stream) not in self.bootstrapping and self.container is not None:
            task = next(t for t in self.container.tasks if t.name == f"Partition {p}")
            self.bootstrapping[p, ssp.stream] = task.progress().bootstrapping
        if ssp.stream == "views" and p not in self.first_view:
            # Messages after the head: read as a normal input, then the stream ends.
            self.first_view.add(p)
            for i in range(LATE):
                self.broker.append("profiles", p, None, f"late-{i}")
            self.broker.end_partition("profiles", p)

    def done(self, envelope: Any) -> None:
        ssp = envelope.system_stream_partition
        self.events.append((ssp.partition, "done", ssp.stream, envelope.message))

    def of(self, partition: int, event: str) -> list[tuple[str, Any]]:
        return [(s, m) for p, e, s, m in self.events if p == partition and e == event]

    def index(self, partition: int, event: str, stream: str, message: Any) -> int:
        return self.events.index((partition, event, stream, message))


def sync_task(log: Log) -> Callable[[], Any]:
    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            log.started(envelope)
            log.done(envelope)

    return Task


def async_task(log: Log) -> Callable[[], Any]:
    class Task(AsyncStreamTask):
        async def process_async(self, envelope, collector, coordinator):
            log.started(envelope)
            await asyncio.sleep(random.choice((0, 0, 0.001)))  # completions out of order
            log.done(envelope)

    return Task


async def run(log: Log, config: Any, task: Callable[[Log], Callable[[], Any]]) -> None:
    container = SamzaContainer(config, task_factory=task(log))
    log.container = container
    await asyncio.wait_for(container.run(), 30)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_every_bootstrap_message_is_processed_before_the_first_other_one(kind: str) -> None:
    namespace, broker = fill({0: PROFILES})
    log = Log(broker)
    config = job(namespace, **{"task.max.concurrency": 8 if kind == "async" else 1})
    with capture_logs() as logs:
        await run(log, config, sync_task if kind == "sync" else async_task)
    done = log.of(0, "done")
    assert len(done) == PROFILES + LATE + VIEWS
    # Every profile up to the head completed before the first view started, in order.
    head = log.index(0, "done", "profiles", f"profile-{PROFILES - 1}")
    first_view = log.index(0, "start", "views", "view-0")
    assert head < first_view
    assert [m for s, m in log.of(0, "start")[:PROFILES]] == [
        f"profile-{i}" for i in range(PROFILES)
    ]
    # Then both streams interleave: late profiles are processed among the views.
    last_view = log.index(0, "done", "views", f"view-{VIEWS - 1}")
    assert log.index(0, "done", "profiles", "late-0") < last_view
    assert log.bootstrapping == {(0, "profiles"): True, (0, "views"): False}
    (completed,) = [e for e in logs if e["event"] == "bootstrap_completed"]
    assert completed["task"] == "Partition 0"
    assert completed["messages"] == PROFILES


def test_without_bootstrap_the_views_go_first() -> None:
    """The setting is what orders them: the same job without it starts the views at once."""
    namespace, broker = fill({0: PROFILES})
    log = Log(broker)
    asyncio.run(run(log, job(namespace, bootstrap=False), sync_task))
    assert log.index(0, "start", "views", "view-0") < log.index(
        0, "start", "profiles", f"profile-{PROFILES - 1}"
    )


async def test_each_task_goes_on_once_its_own_bootstrap_is_done() -> None:
    # Task 1's profiles partition is empty: it is caught up at once and reads its views
    # while task 0 is still reading its profiles.
    namespace, broker = fill({0: PROFILES, 1: 0})
    log = Log(broker)
    with capture_logs() as logs:
        await run(log, job(namespace), sync_task)
    assert log.index(1, "done", "views", f"view-{VIEWS - 1}") < log.index(
        0, "done", "profiles", f"profile-{PROFILES - 1}"
    )
    assert log.index(0, "done", "profiles", f"profile-{PROFILES - 1}") < log.index(
        0, "start", "views", "view-0"
    )
    completed = [(e["task"], e["messages"]) for e in logs if e["event"] == "bootstrap_completed"]
    assert completed == [("Partition 1", 0), ("Partition 0", PROFILES)]


async def test_a_checkpoint_at_the_head_is_caught_up_at_once() -> None:
    namespace = f"boot-{uuid.uuid4().hex[:8]}"
    broker = InMemoryBroker.for_namespace(namespace)
    broker.create_stream("profiles", 1)
    broker.create_stream("views", 1)
    for i in range(10):
        broker.append("profiles", 0, None, f"profile-{i}")
    seen: list[Any] = []

    class StopAfterViews(StreamTask):
        """Stops the container at the view numbered ``last``."""

        last = 4

        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)
            if envelope.message == f"view-{StopAfterViews.last}":
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    for i in range(5):
        broker.append("views", 0, None, f"view-{i}")
    await asyncio.wait_for(SamzaContainer(job(namespace), task_factory=StopAfterViews).run(), 30)
    assert seen[:10] == [f"profile-{i}" for i in range(10)]
    # Restarted: its checkpoint is at the profiles' head, and no profile arrives; were it
    # waiting for one, the views would never come and the run would time out.
    seen.clear()
    StopAfterViews.last = 7
    for i in range(5, 8):
        broker.append("views", 0, None, f"view-{i}")
    with capture_logs() as logs:
        await asyncio.wait_for(
            SamzaContainer(job(namespace), task_factory=StopAfterViews).run(), 30
        )
    assert seen == ["view-5", "view-6", "view-7"]
    (completed,) = [e for e in logs if e["event"] == "bootstrap_completed"]
    assert completed["messages"] == 0


class Order(StreamTask):
    seen: list[str] = []  # noqa: RUF012 - one test's record

    def process(self, envelope, collector, coordinator):
        Order.seen.append(envelope.system_stream_partition.stream)


def test_bounded_bootstrap_input_through_the_test_runner() -> None:
    Order.seen = []
    (
        TestRunner(Order, {"streams.rates.samza.bootstrap": True})
        .add_input("orders", list(range(50)))
        .add_input("rates", list(range(30)))
        .run()
    )
    assert Order.seen == ["rates"] * 30 + ["orders"] * 50


@pytest.mark.parametrize("last", ["", "\n", "\n\n"])
async def test_a_followed_file_whose_head_is_after_empty_lines_is_caught_up(
    tmp_path: Any, last: str
) -> None:
    """The file system never delivers an empty line: a bootstrap file ending with some is
    caught up once the reader has passed them, not held for a message that never comes."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "views").mkdir()
    (tmp_path / "profiles" / "0.jsonl").write_text('"p0"\n"p1"\n' + last)
    (tmp_path / "views" / "0.jsonl").write_text('"v0"\n"v1"\n')
    seen: list[Any] = []

    class Task(StreamTask):
        def process(self, envelope, collector, coordinator):
            seen.append(envelope.message)
            if envelope.message == "v1":
                coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)

    config = {
        "job.name": "boot",
        "task.class": "x:Y",
        "task.inputs": ["fs.views", "fs.profiles"],
        "systems.fs.samza.factory": "file",
        "systems.fs.path": str(tmp_path),
        "systems.fs.follow": True,
        "systems.fs.poll.interval.ms": 1,
        "streams.profiles.samza.system": "fs",
        "streams.profiles.samza.bootstrap": True,
    }
    container = SamzaContainer(resolve(load_config(text=json.dumps(config))), task_factory=Task)
    await asyncio.wait_for(container.run(), 10)
    assert seen == ["p0", "p1", "v0", "v1"]
