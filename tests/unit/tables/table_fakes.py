"""Fakes the table tests share: a remote key-value service whose calls sleep and fail on
demand, a clock moved by hand, and a task's in-memory store."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from samzapy.api.system import TaskName
from samzapy.storage.inmemory import InMemoryStorageEngine
from samzapy.storage.serialized import SerializedKeyValueStore
from samzapy.system.serde import JsonSerde, StringSerde


def memory_store(name: str = "profiles") -> SerializedKeyValueStore[Any, Any]:
    """A real in-memory store of task 'Partition 0', string keys, JSON values."""
    engine = InMemoryStorageEngine(name, TaskName.for_partition(0))
    return SerializedKeyValueStore(engine, StringSerde(), JsonSerde())


class FakeClock:
    """Seconds that move only when a test says so."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Service:
    """A remote key-value service: read and write function in one object.

    ``failures`` makes the next calls raise ``error()`` (one failure used per call);
    ``delay`` makes every call sleep first. Reads return the value the key had when the call
    started (so a read that overlaps a write returns the old value). ``calls`` logs every
    call as ``(method, argument)``; ``events`` logs starts and ends; ``in_flight_max`` is
    the most calls that were under way at once.
    """

    def __init__(
        self,
        data: dict[Any, Any] | None = None,
        *,
        delay: float = 0.0,
        failures: int = 0,
        error: Callable[[], BaseException] = lambda: ConnectionError("service down"),
    ) -> None:
        self.data: dict[Any, Any] = dict(data or {})
        self.delay = delay
        self.failures = failures
        self.error = error
        self.calls: list[tuple[str, Any]] = []
        self.events: list[tuple[str, str]] = []
        self.in_flight = 0
        self.in_flight_max = 0
        self.inits: list[Any] = []
        self.closes = 0

    async def _enter(self, method: str, argument: Any) -> None:
        self.calls.append((method, argument))
        self.events.append(("start", method))
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.failures:
                self.failures -= 1
                raise self.error()
        finally:
            self.in_flight -= 1
            self.events.append(("end", method))

    def count(self, method: str) -> int:
        return sum(1 for name, _ in self.calls if name == method)

    async def get_async(self, key: Any) -> Any:
        value = self.data.get(key)
        await self._enter("get", key)
        return value

    async def put_async(self, key: Any, value: Any) -> None:
        await self._enter("put", (key, value))
        self.data[key] = value

    async def delete_async(self, key: Any) -> None:
        await self._enter("delete", key)
        self.data.pop(key, None)

    def init(self, context: Any) -> None:
        self.inits.append(context)

    async def close(self) -> None:
        self.closes += 1


class BulkService(Service):
    """A Service that also has get_all_async, put_all_async and delete_all_async."""

    async def get_all_async(self, keys: list[Any]) -> dict[Any, Any]:
        found = {key: self.data.get(key) for key in keys}
        await self._enter("get_all", list(keys))
        return found

    async def put_all_async(self, entries: list[tuple[Any, Any]]) -> None:
        await self._enter("put_all", list(entries))
        for key, value in entries:
            self.data[key] = value

    async def delete_all_async(self, keys: list[Any]) -> None:
        await self._enter("delete_all", list(keys))
        for key in keys:
            self.data.pop(key, None)
