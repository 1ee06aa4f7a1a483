"""Task classes the Kafka job tests run, in-process and through the real `samzapy` command."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from samzapy import EndOfStreamListenerTask, OutgoingMessageEnvelope, StreamTask, SystemStream


class Tag(StreamTask):
    """Writes {"p", "o", "v"} (input partition, offset, value) to the output topic named by
    SAMZAPY_TEST_OUTPUT, on the input's partition, keyed like the input; sleeps
    SAMZAPY_TEST_DELAY_MS per message when set (to keep a job busy during an outage)."""

    def __init__(self) -> None:
        self.out = SystemStream("kafka", os.environ.get("SAMZAPY_TEST_OUTPUT", "out"))
        self.delay = float(os.environ.get("SAMZAPY_TEST_DELAY_MS", "0")) / 1000

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if self.delay:
            time.sleep(self.delay)
        ssp = envelope.system_stream_partition
        value = envelope.message
        if isinstance(value, bytes):
            value = value.decode()
        collector.send(
            OutgoingMessageEnvelope(
                self.out,
                json.dumps({"p": ssp.partition, "o": int(envelope.offset), "v": value}).encode(),
                key=envelope.key,
                partition=ssp.partition,
            )
        )


class Forward(StreamTask):
    """Sends each message to the output topic named by SAMZAPY_TEST_OUTPUT with its key (none
    for a message without one) and no partition: the router and the producer pick it."""

    def __init__(self) -> None:
        self.out = SystemStream("kafka", os.environ.get("SAMZAPY_TEST_OUTPUT", "out"))

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(self.out, envelope.message, key=envelope.key))


class TagAndSendAside(Tag):
    """``Tag``; besides, a message ``commit`` asks for a commit once it is processed, and a
    message ``aside`` is also sent to the stream SAMZAPY_TEST_ASIDE names (``system.stream``),
    when set."""

    def __init__(self) -> None:
        super().__init__()
        system, _, stream = os.environ.get("SAMZAPY_TEST_ASIDE", "").partition(".")
        self.aside = SystemStream(system, stream) if stream else None

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        super().process(envelope, collector, coordinator)
        if envelope.message == b"commit":
            coordinator.commit()
        elif envelope.message == b"aside" and self.aside is not None:
            collector.send(OutgoingMessageEnvelope(self.aside, b"aside", key=envelope.key))


class TagThenHoldTheEnd(Tag, EndOfStreamListenerTask):
    """``Tag`` over a bounded input; at its end, creates the file SAMZAPY_TEST_ENDED names,
    then waits for the file SAMZAPY_TEST_GO names before it sends one more record and
    returns (and the final commit runs): the test does what it must before that commit
    (stop the broker), which then has that record to flush, whatever the periodic commits
    had covered before the end."""

    async def on_end_of_stream(self, collector: Any, coordinator: Any) -> None:
        await asyncio.to_thread(self._hold)  # the event loop (the producer) goes on
        collector.send(OutgoingMessageEnvelope(self.out, b'{"end": true}', partition=0))

    @staticmethod
    def _hold() -> None:
        Path(os.environ["SAMZAPY_TEST_ENDED"]).touch()
        go = Path(os.environ["SAMZAPY_TEST_GO"])
        while not go.exists():
            time.sleep(0.05)
