"""Stand-ins for what ``JobRunner`` drives, shared by the coordinator's unit tests: a group
membership and a share's container."""

from __future__ import annotations

import asyncio
from typing import Any

from samzapy.metrics import Health
from samzapy.system.ports import GroupMembership


class Members(GroupMembership):
    """A membership that notes the member's rejoins (with their reasons) and nothing else."""

    def __init__(self) -> None:
        self.rejoins: list[str] = []

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def failure(self) -> BaseException | None:
        return None

    def released(self, tasks: Any, at: float) -> None:
        pass

    def rejoin(self, reason: str = "") -> None:
        self.rejoins.append(reason)


class Share:
    """A share's container as Shares uses it; with a ``gate``, its releases wait for it."""

    def __init__(self, health: Health, gate: asyncio.Event | None = None) -> None:
        self.health = health
        self.gate = gate
        self.started = asyncio.Event()
        self.metric_groups: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        self.started.set()
        self.health.ready = True
        await self._stop.wait()

    def request_stop(self, reason: str, quiet: bool = False) -> None:
        self.health.ready = False  # as SamzaContainer.request_stop: draining
        self._stop.set()

    async def release(self, tasks: list[Any]) -> bool:
        if self.gate is not None:
            await self.gate.wait()
        return True
