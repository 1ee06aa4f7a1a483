"""A remote table's functions' init that did not all return: when the write function's init
fails after the read function's returned, the read function's close still runs (it releases
what its init opened) and the write function's does not; when a first call is given up on
(cancelled) in the init, that is no failure: the init runs again at the next call."""

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


class SlowDirectory:
    """A read function whose init takes a while (a slow connect)."""

    async def init(self, context: Any) -> None:
        Reader.EVENTS.append("directory.init")
        await asyncio.sleep(0.05)
        self.client = {"ann": "Oslo"}

    async def get_async(self, key: Any) -> Any:
        return self.client.get(key)


class WarmingProfiles:
    """A read function whose init warms up from the directory, giving up after a bound."""

    async def init(self, context: Any) -> None:
        directory = context.get_table("directory")
        try:
            await asyncio.wait_for(directory.get_async("ann"), 0.001)
        except TimeoutError:  # an optional warm-up: go on without it
            Reader.EVENTS.append("warm-up given up")

    async def get_async(self, key: Any) -> Any:
        return None


def test_a_first_call_given_up_on_leaves_the_table_to_open_later() -> None:
    """The warm-up's first call to the directory runs the directory's init and is cancelled
    (its timeout): that init did not fail, so the table opens when the task opens it."""
    Reader.EVENTS.clear()

    class Reads(StreamTask):
        def process(self, envelope: Any, collector: Any, coordinator: Any) -> None:
            pass

    class Warming(TaskApplication):
        def describe(self, app_desc: TaskApplicationDescriptor) -> None:
            app_desc.with_input_stream(VIEWS)
            app_desc.with_table(
                RemoteTableDescriptor("profiles").with_read_function(WarmingProfiles())
            )
            app_desc.with_table(
                RemoteTableDescriptor("directory").with_read_function(SlowDirectory())
            )
            app_desc.with_task_factory(Reads)

    TestRunner.of(Warming).add_input_stream(VIEWS, [{"m": "ann"}]).run(timeout=10)
    assert Reader.EVENTS == ["directory.init", "warm-up given up", "directory.init"]


def test_a_call_waiting_on_a_cancelled_init_runs_it_itself() -> None:
    Reader.EVENTS.clear()

    async def main() -> None:
        functions = TableFunctions("directory", SlowDirectory(), None)
        functions.attach(object())
        first = asyncio.ensure_future(functions.initialise())
        await asyncio.sleep(0)  # the first call is in the init
        waiting = asyncio.ensure_future(functions.initialise())
        await asyncio.sleep(0)
        first.cancel()
        await waiting  # not "the init failed": it runs the init again
        assert functions.ready

    asyncio.run(main())
    assert Reader.EVENTS == ["directory.init", "directory.init"]
