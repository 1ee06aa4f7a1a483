"""A remote table's functions get their init(context) with every table they reach usable,
whatever order the application described the tables in: a table not opened yet opens (its
own functions' init runs) at its first call; and close in the reverse order, so a function's
close() still finds the tables its init used open."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_apps import flat, run
from test_table_apps import ENRICHED, VIEWS, Enrich

from samzapy import (
    KV,
    CachingTableDescriptor,
    InMemoryTableDescriptor,
    KVSerde,
    RemoteTableDescriptor,
    StreamApplicationDescriptor,
    TaskError,
)

#: What the functions did, in order (class-level: each task has deep copies of them).
EVENTS: list[str] = []


class Directory:
    """A read function whose client exists only once its init ran."""

    def init(self, context: Any) -> None:
        EVENTS.append("directory.init")
        self.client = {"ann": {"city": "Oslo"}}
        context.get_store("cities").put("ann", "Bergen")  # a local table's store

    async def get_async(self, key: Any) -> Any:
        return self.client.get(key)

    def close(self) -> None:
        EVENTS.append("directory.close")
        del self.client


class Profiles:
    """A read function that warms up from other tables in its init."""

    def __init__(self, source: str) -> None:
        self.source = source

    async def init(self, context: Any) -> None:
        EVENTS.append("profiles.init")
        self.directory = context.get_table(self.source)
        reads = [self.directory.get_async("ann") for _ in range(2)]
        self.warm = await asyncio.gather(*reads)  # two first calls: one init behind them
        self.local = context.get_table("cities").get("ann")

    async def close(self) -> None:
        EVENTS.append("profiles.close")
        await self.directory.get_async("ann")  # still open: closed after this table

    async def get_async(self, key: Any) -> Any:
        return {"city": f"{self.warm[0]['city']}/{self.local}"} if key == "ann" else None


class Broken:
    def init(self, context: Any) -> None:
        raise RuntimeError("no credentials")

    async def get_async(self, key: Any) -> Any:
        return None


def _app(source: str, broken: bool = False) -> Any:
    def app(d: StreamApplicationDescriptor) -> None:
        # Described first, so opened first: its init reaches tables described after it.
        profiles = d.get_table(
            RemoteTableDescriptor("profiles").with_read_function(Profiles(source))
        )
        directory = RemoteTableDescriptor("directory").with_read_function(Directory())
        d.get_table(directory)
        d.get_table(CachingTableDescriptor("cached-directory", directory))
        d.get_table(InMemoryTableDescriptor("cities", KVSerde("string", "string")))
        if broken:
            d.get_table(RemoteTableDescriptor("broken").with_read_function(Broken()))
        d.get_input_stream(VIEWS).join(profiles, Enrich()).send_to(d.get_output_stream(ENRICHED))

    return app


@pytest.mark.parametrize("source", ["directory", "cached-directory"])
def test_a_functions_init_finds_a_table_described_after_it_ready(source: str) -> None:
    EVENTS.clear()
    result = run(_app(source), [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert flat(result.keyed_outputs(ENRICHED)) == [
        KV("ann", {"page": "/a", "city": "Oslo/Bergen"})
    ]
    assert EVENTS == ["profiles.init", "directory.init", "profiles.close", "directory.close"]


def test_a_table_a_first_call_opened_is_closed_when_a_later_init_fails() -> None:
    EVENTS.clear()
    with pytest.raises(TaskError, match="table 'broken': init of its read function failed"):
        run(_app("directory", broken=True), [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert EVENTS == ["profiles.init", "directory.init", "profiles.close", "directory.close"]


class Ring:
    """Reads the next table of a ring in its init (and so, through it, its own)."""

    def __init__(self, name: str, following: str) -> None:
        self.name, self.following = name, following

    async def init(self, context: Any) -> None:
        EVENTS.append(f"{self.name}.init")
        self.seen = await context.get_table(self.following).get_async("x")

    async def get_async(self, key: Any) -> Any:
        return {"city": self.name}


def test_tables_whose_inits_reach_each_other_open_once_without_waiting_forever() -> None:
    EVENTS.clear()

    def app(d: StreamApplicationDescriptor) -> None:
        first = d.get_table(
            RemoteTableDescriptor("first").with_read_function(Ring("first", "second"))
        )
        d.get_table(RemoteTableDescriptor("second").with_read_function(Ring("second", "first")))
        d.get_input_stream(VIEWS).join(first, Enrich()).send_to(d.get_output_stream(ENRICHED))

    run(app, [(VIEWS, [KV("ann", "/a")])], {ENRICHED: 1})
    assert EVENTS == ["first.init", "second.init"]
