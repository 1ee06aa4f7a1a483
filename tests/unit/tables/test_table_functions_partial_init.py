"""A remote table whose write function's init fails after its read function's returned: the
task fails, and the read function's close still runs (it releases what its init opened),
while the write function, whose init never returned, is not closed."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from samzapy import (
    KafkaSystemDescriptor,
    RemoteTableDescriptor,
    StreamTask,
    TaskApplication,
    TaskApplicationDescriptor,
)
from samzapy.api.errors import TableError
from samzapy.tables.functions import TableFunctions
from samzapy.testing import TestRunner


class Reader:
    """A read function whose init opens a client that its close releases."""

    EVENTS: ClassVar[list[str]] = []

    def init(self, context: Any) -> None:
        Reader.EVENTS.append("read.init")

    async def get_async(self, key: Any) -> Any:
        return None

    def close(self) -> None:
        Reader.EVENTS.append("read.close")


class Writer:
    """A write function whose init fails (its service is down)."""

    def init(self, context: Any) -> None:
        raise ConnectionError("service down")

    async def put_async(self, key: Any, value: Any) -> None:
        pass

    async def delete_async(self, key: Any) -> None:
        pass

    def close(self) -> None:
        Reader.EVENTS.append("write.close")


def test_a_failed_write_init_still_closes_the_read_function_that_initialised() -> None:
    Reader.EVENTS.clear()

    async def main() -> None:
        functions = TableFunctions("profiles", Reader(), Writer())
        functions.attach(object())
        with pytest.raises(TableError, match="init of its write function failed"):
            await functions.initialise()
        await functions.close()

    asyncio.run(main())
    assert Reader.EVENTS == ["read.init", "read.close"]


class Plain(StreamTask):
    def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
        pass


KAFKA = KafkaSystemDescriptor("kafka")
VIEWS = KAFKA.get_input_descriptor("views", "json")
PROFILES = (
    RemoteTableDescriptor("profiles").with_read_function(Reader()).with_write_function(Writer())
)


class App(TaskApplication):
    def describe(self, app_desc: TaskApplicationDescriptor) -> None:
        app_desc.with_input_stream(VIEWS).with_table(PROFILES).with_task_factory(Plain)


def test_a_task_whose_table_init_failed_half_way_closes_what_it_opened() -> None:
    Reader.EVENTS.clear()
    runner = TestRunner.of(App).add_input_stream(VIEWS, [{"m": "ann"}])
    with pytest.raises(Exception, match="service down"):
        runner.run(timeout=10)
    assert Reader.EVENTS == ["read.init", "read.close"]
