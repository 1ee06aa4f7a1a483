"""Task classes the CLI tests run through the real `samzapy` command."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from samzapy import (
    AsyncStreamTask,
    ClosableTask,
    InitableTask,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
)
from samzapy.metrics import MetricsReporter

OUT = SystemStream("files", "out")


class Copy(StreamTask):
    """Copies each message to files.out, on the same partition."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(
            OutgoingMessageEnvelope(
                OUT, envelope.message, partition=envelope.system_stream_partition.partition
            )
        )


class FailOnBad(StreamTask):
    """Copies messages and fails on one whose "bad" field is true."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message.get("bad"):
            raise ValueError(f"bad message {envelope.message}")
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))


class FailInInit(InitableTask, Copy):
    """Copies messages; its init fails."""

    def init(self, context: Any) -> None:
        raise RuntimeError("init failed")


class FailOnClose(ClosableTask, Copy):
    """Copies messages; its close fails."""

    def close(self) -> None:
        raise RuntimeError("close failed")


class CloseWithoutClosable(Copy):
    """Copies messages; its close, written without ClosableTask among its bases, would fail."""

    def close(self) -> None:
        raise RuntimeError("close was called")


class CountSignals(StreamTask):
    """Copies messages; touches a file once it has processed SAMZAPY_TEST_READY_AFTER."""

    def __init__(self) -> None:
        self.count = 0

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))
        self.count += 1
        if self.count == int(os.environ.get("SAMZAPY_TEST_READY_AFTER", "1")):
            open(os.environ["SAMZAPY_TEST_READY_FILE"], "w").close()


class HangOnFirst(AsyncStreamTask):
    """Touches SAMZAPY_TEST_READY_FILE at its first message, whose call then takes 60 s."""

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        Path(os.environ["SAMZAPY_TEST_READY_FILE"]).touch()  # noqa: ASYNC240 - a test's marker file
        await asyncio.sleep(60)


class BlockFirstInExecutor(AsyncStreamTask):
    """Copies messages. With SAMZAPY_TEST_BLOCK_S set, its first call touches
    SAMZAPY_TEST_READY_FILE, then waits for a blocking call of that many seconds on the event
    loop's default executor (``run_in_executor(None, ...)``, as an async task does blocking
    I/O): a stop cancels the wait, not the call, whose thread runs on."""

    def __init__(self) -> None:
        self.calls = 0

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.calls += 1
        if self.calls == 1 and "SAMZAPY_TEST_BLOCK_S" in os.environ:
            Path(os.environ["SAMZAPY_TEST_READY_FILE"]).touch()  # noqa: ASYNC240 - a test's marker file
            block_s = float(os.environ["SAMZAPY_TEST_BLOCK_S"])
            await asyncio.get_running_loop().run_in_executor(None, time.sleep, block_s)
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))


class HangOnMarked(AsyncStreamTask):
    """Copies messages, and asks for a commit after one whose "commit" field is true. With
    SAMZAPY_TEST_HANG set, the call for a message whose "hang" field is true touches
    SAMZAPY_TEST_READY_FILE and never completes."""

    async def process_async(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        if envelope.message.get("hang") and "SAMZAPY_TEST_HANG" in os.environ:
            Path(os.environ["SAMZAPY_TEST_READY_FILE"]).touch()  # noqa: ASYNC240 - a test's marker file
            await asyncio.get_running_loop().create_future()  # never done
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))
        if envelope.message.get("commit"):
            coordinator.commit()


class BlockFirstOnPool(StreamTask):
    """Copies messages. With SAMZAPY_TEST_BLOCK_S set, its first call touches
    SAMZAPY_TEST_READY_FILE and then blocks that many seconds before it sends its copy (on the
    thread pool, a call that cannot be cancelled)."""

    def __init__(self) -> None:
        self.calls = 0

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        self.calls += 1
        if self.calls == 1 and "SAMZAPY_TEST_BLOCK_S" in os.environ:
            Path(os.environ["SAMZAPY_TEST_READY_FILE"]).touch()
            time.sleep(float(os.environ["SAMZAPY_TEST_BLOCK_S"]))
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))


class SlowInit(InitableTask, StreamTask):
    """Copies messages; its init touches SAMZAPY_TEST_READY_FILE, then waits 60 s."""

    async def init(self, context: Any) -> None:
        Path(os.environ["SAMZAPY_TEST_READY_FILE"]).touch()  # noqa: ASYNC240 - a test's marker file
        await asyncio.sleep(60)

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(OutgoingMessageEnvelope(OUT, envelope.message))


class ModulesLoaded(StreamTask):
    """Writes which optional parts of samzapy the process had imported by its first message."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        import sys

        optional = ("aiokafka", "prometheus_client", "samzapy.operators")
        loaded = {name: name in sys.modules for name in optional}
        collector.send(OutgoingMessageEnvelope(OUT, loaded))


class LoopName(StreamTask):
    """Writes the module of the event loop it runs on."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        import asyncio

        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        collector.send(OutgoingMessageEnvelope(OUT, {"loop": loop}))


class FailsAtStop(MetricsReporter):
    """A metrics reporter whose final push fails (its endpoint is gone at the stop)."""

    async def start(self, registry: Any) -> None:
        pass

    async def stop(self) -> None:
        raise ConnectionError("the metrics endpoint went away")


class CopyToMemory(StreamTask):
    """Copies each message to mem.out, on the same partition (mem: a memory system)."""

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        collector.send(
            OutgoingMessageEnvelope(
                SystemStream("mem", "out"),
                envelope.message,
                partition=envelope.system_stream_partition.partition,
            )
        )


class CountInStore(InitableTask, StreamTask):
    """Counts its messages in its store ``counts`` and sends the running count to files.out."""

    def init(self, context: Any) -> None:
        self.store = context.get_store("counts")

    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        count = (self.store.get("messages") or 0) + 1
        self.store.put("messages", count)
        collector.send(OutgoingMessageEnvelope(OUT, {"count": count}))
