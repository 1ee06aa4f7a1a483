"""A task slower than its Kafka input, on the real broker (README, "Guarantees": "input queues
are bounded, so memory stays bounded when tasks are slower than their input";
configuration.md: "A partition whose buffer is full is paused until its task catches up").

The memory system's test of the same bound is in tests/unit/container/test_run_loop.py; here
the partitions are Kafka's, whose consumer the container pauses and resumes per partition.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from samzapy import StreamTask
from samzapy.container import SamzaContainer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_kafka_jobs import _config, _processed, _run_until, create_topic, name, produce  # noqa: E402

PARTITIONS, PER_PARTITION, THRESHOLD = 2, 1500, 100


class SlowCounter(StreamTask):
    """Takes 0.5 ms a message, and notes the most messages the container held waiting."""

    container: ClassVar[SamzaContainer | None] = None
    most_buffered: ClassVar[int] = 0
    seen: ClassVar[dict[int, list[int]]] = {}

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        cls = type(self)
        if cls.container is not None:
            buffered = sum(t.progress().buffered for t in cls.container.tasks)
            cls.most_buffered = max(cls.most_buffered, buffered)
        partition = envelope.system_stream_partition.partition
        cls.seen.setdefault(partition, []).append(int(envelope.message))
        time.sleep(0.0005)


async def test_a_slow_task_keeps_its_kafka_input_buffers_within_the_fetch_threshold(
    kafka_bootstrap: str,
) -> None:
    source = name("in")
    await create_topic(kafka_bootstrap, source, PARTITIONS)
    messages = [(p, None, str(i).encode()) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    await produce(kafka_bootstrap, source, messages)
    config = _config(
        kafka_bootstrap,
        source,
        **{
            "systems.kafka.samza.fetch.threshold": THRESHOLD,
            "systems.kafka.samza.msg.serde": "string",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
        },
    )
    container = SamzaContainer(config, task_factory=SlowCounter)
    SlowCounter.container, SlowCounter.most_buffered, SlowCounter.seen = container, 0, {}
    total = PARTITIONS * PER_PARTITION
    await _run_until(container, lambda: _processed(container) >= total, limit=120)
    # Every message, in order, once; the whole backlog was on the broker from the start, yet
    # the container held at most the threshold (split over the partitions' queues).
    assert SlowCounter.seen == {p: list(range(PER_PARTITION)) for p in range(PARTITIONS)}
    assert THRESHOLD // 2 <= SlowCounter.most_buffered <= THRESHOLD, SlowCounter.most_buffered
